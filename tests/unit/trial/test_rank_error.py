"""The failing rank's own error: picked out of a Ray Train run's ``WorkerGroupError`` (Ray's
real class) or a peer's, marked with its rank, and read back as the user sees it."""

from __future__ import annotations

import pickle
import traceback

from ray.train import WorkerGroupError

from sweeps.report.failure import error_line, rank_of
from sweeps.trial.backends.rank_error import first_line, from_train_run, is_consequence, own_error
from sweeps.trial.backends.rendezvous import PeerFailed

GLOO = RuntimeError("[../gloo/transport/tcp/pair.cc:553] Connection closed by peer "
                    "[127.0.0.1]:36491")
SNIPPETS = ('[Rank 0 Error Snippet]:\nray::RayTrainWorker.train()\nRuntimeError: closed\n'
            '[Rank 1 Error Snippet]:\nray::RayTrainWorker.train()\n  File "loop.py", line 9, '
            'in train_func\n    raise ValueError("bad batch")\nValueError: bad batch\n')


def test_a_symptom_is_not_a_ranks_own_error() -> None:
    assert is_consequence(GLOO) and is_consequence(PeerFailed("rank 1 raised ValueError: x"))
    assert not is_consequence(ValueError("bad batch"))
    assert not is_consequence(KeyError("connection"))


def test_the_first_rank_with_an_error_of_its_own_is_raised_with_the_others_after_it() -> None:
    own = ValueError("bad batch")
    error = from_train_run(WorkerGroupError(SNIPPETS, {0: GLOO, 1: own}), world_size=2)
    assert error is own and first_line(error) == "ValueError: bad batch"
    text = "".join(traceback.format_exception(error))
    assert text.index("ValueError: bad batch") < text.index("(raised by rank 1 of 2)")
    assert 'raise ValueError("bad batch")' in text and "Rank 0 Error Snippet" not in text
    assert "then, as a consequence: rank 0: RuntimeError: [../gloo" in text
    assert rank_of(error) == (1, 2)


def test_when_every_rank_only_saw_a_symptom_the_lowest_rank_is_named() -> None:
    other = RuntimeError("Connection reset by peer")
    error = from_train_run(WorkerGroupError("", {1: other, 0: GLOO}), world_size=2)
    assert error is GLOO and rank_of(error) == (0, 2)


def test_a_run_error_without_ranks_is_raised_as_it_is() -> None:
    error = RuntimeError("controller failed")
    assert from_train_run(error, world_size=2) is error


def test_the_mark_survives_pickling_as_tune_pickles_a_trials_error() -> None:
    error = pickle.loads(pickle.dumps(own_error(KeyError("batch"), 1, 4, "  File x", [])))
    assert rank_of(error) == (1, 4) and error_line(error) == "KeyError: 'batch'"
    assert "(raised by rank 1 of 4)" in error.__notes__


def test_a_world_of_one_is_not_named_as_a_rank() -> None:
    error = own_error(ValueError("nan"), 0, 1, "  File 'loop.py'")
    assert rank_of(error) is None and error.__notes__ == ["its traceback:\n  File 'loop.py'"]


def test_ranks_that_raised_the_same_are_named_so_and_their_shared_snippet_is_found() -> None:
    shared = '[Rank 0,1 Error Snippet]:\n  File "loop.py", line 3\nValueError: same\n'
    error = from_train_run(WorkerGroupError(shared, {0: ValueError("same"),
                                                     1: ValueError("same")}), world_size=2)
    assert rank_of(error) == (0, 2)
    assert error.__notes__[:2] == ["(raised by rank 0 of 2)", "(rank 1 raised the same)"]
    assert error.__notes__[-1] == "rank 0's traceback:\n" + shared.strip("\n")


def test_a_rank_error_that_would_lose_its_marks_or_read_as_a_clean_exit_is_not_raised() -> None:
    group = WorkerGroupError("", {1: SystemExit(0)})
    assert from_train_run(group, world_size=2) is group

    class Reduced(Exception):
        def __reduce__(self):
            return (Reduced, self.args)

    group = WorkerGroupError("", {1: Reduced("gone")})
    assert from_train_run(group, world_size=2) is group


def test_an_inline_attempt_raises_the_first_rank_with_an_error_of_its_own() -> None:
    from sweeps.trial.backends.rank_error import PeerError, attempt_error

    peer = PeerError(1, ZeroDivisionError("rank 1 divided"), '  File "loop.py"')
    # rank 0 read gloo's symptom: rank 1's error, with rank 0's symptom after it
    error = attempt_error(RuntimeError(str(GLOO)), (1, "rank 1 raised ..."), peer, 2,
                          "rank 0 raised RuntimeError: Connection closed by peer")
    assert error is peer.error and rank_of(error) == (1, 2)
    assert any(n.startswith("then, as a consequence: rank 0: RuntimeError") for n in
               error.__notes__)
    # rank 0 raised its own error first; rank 1's came later
    own = KeyError("rank 0's own")
    later = PeerError(1, ValueError("later"), "")
    assert attempt_error(own, (1, "rank 1 raised ..."), later, 2,
                         "rank 0 raised KeyError: ...") is own
    assert rank_of(own) == (0, 2)
    # rank 1's process died: its sentence, as PeerFailed
    died = attempt_error(PeerFailed("rank 1's process died"), (1, "rank 1's process died: x"),
                         None, 2, "rank 1's process died: x")
    assert isinstance(died, PeerFailed) and rank_of(died) == (1, 2)


def test_a_peer_raises_its_own_error_and_ends_quietly_only_on_anothers() -> None:
    import torch.distributed as dist

    from sweeps.trial.backends.peer import _ended_by_another
    from sweeps.trial.backends.rendezvous import RETURNED, STOPPED, Rendezvous, ReportMismatch

    def meet(reason: str | None) -> Rendezvous:
        rendezvous = Rendezvous(dist.HashStore(), "t/a", 1, 2)
        if reason is not None:
            rendezvous.abort(reason)
        return rendezvous

    own = ValueError("rank 1's own")
    assert _ended_by_another(meet(None), own) is None  # the first to fail: it raises
    assert _ended_by_another(meet("rank 0 raised KeyError: x"), own) is None  # its own, still
    assert _ended_by_another(meet(RETURNED), own) is None  # after rank 0 returned: fails it
    assert _ended_by_another(meet("rank 0 raised KeyError: x"), GLOO) == "ended"
    assert _ended_by_another(meet(STOPPED), GLOO) == "stopped"
    assert _ended_by_another(meet(RETURNED), ReportMismatch("outlived rank 0")) is None
