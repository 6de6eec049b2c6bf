"""Growing a restored Tune experiment in place: more samples, and ended trials run again.

    reopen_in_state(sweep_dir, ["ab12_00001"])     # before Tuner.restore: they run again
    tuner = tune.Tuner.restore(...)
    grow_search(tuner, num_samples=12)             # the searcher suggests up to 12 trials

``sweeps.resume.grow`` decides what grows (docs/running.md#growing-a-sweep-in-place); this
module does it to Tune's objects, whose API has no route for either (ray#30838).

* **More samples.** Tune restores its search algorithm from its saved state after ``fit`` starts
  (``TuneController.resume`` -> ``restore_from_dir`` -> ``set_state``), and that state holds the
  old sample count and, once every sample was suggested, ``finished``. The restored Tuner's
  search algorithm is therefore replaced by a subclass whose ``set_state`` keeps the larger
  count: ``SearchGenerator`` for an Optuna search (its ``_total_samples`` and ``_finished``,
  ``ray/tune/search/search_generator.py`` ``set_state``), ``BasicVariantGenerator`` for random
  search (the last ``_TrialIterator``'s ``num_samples_left``: the iterator is a plain object, so
  it draws again from the restored random state and numbers the new trials after the old).
* **Ended trials again.** Tune requeues a restored trial by its saved status
  (``TuneController._requeue_restored_trials``): ``TERMINATED`` ones are skipped. The trials a
  larger ``scheduler.max_t`` continues are set to ``PAUSED`` in the newest experiment-state file
  before the restore, so Tune requeues them as it does an interrupted trial, and each one's
  trial driver continues its Train run from its last checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ray.tune.search import ConcurrencyLimiter, Searcher
from ray.tune.search.basic_variant import BasicVariantGenerator
from ray.tune.search.search_generator import SearchGenerator

from sweeps import files
from sweeps._ray.tune import experiment_state_files, trials_in_state

__all__ = ["reopen_in_state", "grow_search", "told_trials"]

REOPENED_STATUS = "PAUSED"  # Tune requeues PAUSED trials with resume_unfinished=True


def reopen_in_state(sweep_dir: Path, trial_ids: list[str]) -> list[str]:
    """Set each of ``trial_ids`` that Tune's newest experiment-state file has ``TERMINATED`` to
    ``PAUSED`` (rewritten atomically); returns the ones changed."""
    found = experiment_state_files(sweep_dir)
    if not found or not trial_ids:
        return []
    newest, wanted, changed = found[-1], set(trial_ids), []
    data = json.loads(files.read_text(newest))
    for entry in trials_in_state(data):
        state = json.loads(entry[0])
        if state.get("trial_id") in wanted and state.get("status") == "TERMINATED":
            state["status"] = REOPENED_STATUS
            entry[0] = json.dumps(state, indent=2)
            changed.append(state["trial_id"])
    if changed:
        files.write_atomic(newest, json.dumps(data))
    return changed


def told_trials(searcher: Any) -> set[str]:
    """The trials an ``OptunaSearch`` has told its study about (a trial a grown ``max_t``
    continues is one: Optuna cannot tell a finished trial again, Ray would warn per result)."""
    return searcher.__dict__.get("_completed_trials", set())


def grow_search(tuner: Any, num_samples: int, live: list[str] | None = None,
                known: dict[str, str] | None = None) -> None:
    """Let a ``Tuner.restore``'d tuner suggest trials up to ``num_samples`` in all (its saved
    search state would stop at the old count; 0: no growth, a grid), and count the trials
    reopened on this start (``live``) as running in its trial limit, as a trial it suggested
    is: Tune's limit (a ``ConcurrencyLimiter``, random search's own) holds back new
    suggestions while they run, and forwards their ends to the searcher. ``known``: Tune's
    restored trials and their status (``_GrowingSearch``)."""
    config = tuner._local_tuner._tune_config
    if num_samples:
        config.num_samples = num_samples
    alg, live = config.search_alg, list(live or [])
    if isinstance(alg, BasicVariantGenerator):
        grown = _GrowingVariants.__new__(_GrowingVariants)
        grown.__dict__.update(alg.__dict__)
        grown._grow_to, grown._reopened = num_samples, live
        config.search_alg = grown
        return
    if isinstance(alg, _GrowingSearch):
        alg._grow_to, alg._reopened, alg._known = num_samples, live, known
        return
    if isinstance(alg, Searcher):
        limit = config.max_concurrent_trials
        if limit and not isinstance(alg, ConcurrencyLimiter):  # as tune.run would wrap it
            alg = ConcurrencyLimiter(alg, max_concurrent=limit)
        config.max_concurrent_trials = None
        config.search_alg = _GrowingSearch(alg, num_samples, live, known)


class _GrowingSearch(SearchGenerator):
    """``SearchGenerator`` whose restored state keeps at least ``grow_to`` samples, counts Tune's
    trials (``known``: id -> status; the newer state after a kill between saves) as suggested,
    and holds live those not ``TERMINATED`` and the ``reopened`` in its ``ConcurrencyLimiter``."""

    def __init__(self, searcher: Any, grow_to: int, reopened: list[str] | None = None,
                 known: dict[str, str] | None = None) -> None:
        super().__init__(searcher)
        self._grow_to, self._reopened, self._known = grow_to, list(reopened or []), known or {}

    def set_state(self, state: dict) -> None:
        super().set_state(state)
        known = self.__dict__.get("_known") or {}
        self._counter = max(self._counter, len(known))
        if self._total_samples < self._grow_to:
            self._total_samples, self._finished = self._grow_to, False
        limiter = self.searcher
        while not isinstance(limiter, ConcurrencyLimiter) and hasattr(limiter, "searcher"):
            limiter = limiter.searcher
        if isinstance(limiter, ConcurrencyLimiter):
            live = {t for t, status in known.items() if status != "TERMINATED"} if known else \
                set(limiter.live_trials)
            limiter.live_trials = live | set(self.__dict__.get("_reopened", []))
            limiter.num_unfinished_live_trials = len(limiter.live_trials)
        self._reopened = []

    def __getstate__(self) -> dict:
        """Pickled into ``tuner.pkl`` without this start's reopened trials (a later start
        has its own, or none)."""
        return {**self.__dict__, "_reopened": [], "_known": {}}


class _GrowingVariants(BasicVariantGenerator):
    """``BasicVariantGenerator`` whose restored state draws up to ``_grow_to`` samples and
    counts the ``_reopened`` trials as live."""

    _grow_to = 0
    _reopened: list[str] = []

    def set_state(self, state: dict) -> None:
        grow_to, reopened = self.__dict__.get("_grow_to", 0), self.__dict__.get("_reopened", [])
        super().set_state(state)
        self._grow_to, self._reopened = grow_to, []
        self._live_trials.update(reopened)
        extra = grow_to - self._total_samples
        if extra > 0 and self._iterators:
            last = self._iterators[-1]
            last.num_samples += extra
            last.num_samples_left += extra
            self._total_samples += extra
            self._finished = False

    def __getstate__(self) -> dict:
        """As ``_GrowingSearch.__getstate__``."""
        return {**self.__dict__, "_reopened": []}
