"""The failing rank's own error: picked out of a Ray Train run's ``WorkerGroupError`` (Ray's
real class) or a peer's, marked with its rank, and read back as the user sees it."""

from __future__ import annotations

import pickle
import traceback

from ray.train import WorkerGroupError

from sweeps.execution.rank_error import first_line, from_train_run, is_consequence, own_error
from sweeps.execution.rendezvous import PeerFailed
from sweeps.report.failure import error_line, rank_of

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
