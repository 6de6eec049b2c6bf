"""Ray's ``OptunaSearch``, tolerant of reports that do not carry the metric.

    searcher = MetricTolerantOptunaSearch(space=DefineByRun(params), metric="val_acc", ...)

Built by ``sweeps.search.searchers.make_search_alg`` for ``search=tpe`` and ``search=optuna``.
A loop may report without the metric (a loss-only report between evaluations, the
Transformers Trainer's training logs), which the docs allow and ASHA skips. Deliberate
divergence from Ray: its ``OptunaSearch.on_trial_result`` indexes ``result[metric]`` and the
``KeyError`` ends the whole sweep; here such a report is passed over. And a trial whose last
report lacks the metric is told to Optuna with the last value it did report (Ray would tell
Optuna nothing, marking the trial pruned, so TPE would never learn from it). A trial its
restored state never knew (killed between Tune's state files; Ray: ``KeyError``) is adopted.
"""

from __future__ import annotations

import numbers
from typing import Any

from ray.tune.search.optuna import OptunaSearch

from sweeps._ray.tune_grow import told_trials
from sweeps.search.optuna_space import optuna_params

__all__ = ["MetricTolerantOptunaSearch"]


class MetricTolerantOptunaSearch(OptunaSearch):
    """``OptunaSearch`` that skips results without the metric (single objective)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._last: dict[str, dict[str, Any]] = {}

    def _seen(self) -> dict[str, dict[str, Any]]:
        """The last result with the metric, per running trial (also for a searcher restored
        from a state saved before this attribute existed)."""
        return self.__dict__.setdefault("_last", {})

    def _carries(self, result: dict[str, Any] | None) -> bool:
        """Whether ``result`` holds a number for every metric (a text value fails the trial
        in the scheduler; Optuna would raise and end the sweep)."""
        metrics = self.metric if isinstance(self.metric, list) else [self.metric]
        return bool(result) and all(isinstance(result.get(m), numbers.Real)
                                    and not isinstance(result.get(m), bool) for m in metrics)

    def _adopted(self, trial_id: str, result: dict[str, Any] | None) -> bool:
        """Whether the study has ``trial_id``, asking it with the config in ``result`` (Tune's
        flat ``config/...`` keys) when it has not."""
        if trial_id in self._ot_trials:
            return True
        config = {k[len("config/"):].replace("/", "."): v for k, v in (result or {}).items()
                  if k.startswith("config/")}
        if not config or not hasattr(self._space, "params"):
            return False
        self._ot_study.enqueue_trial(optuna_params(config, self._space.params)[0])
        self.suggest(trial_id)  # takes the enqueued trial: its params are the config's
        return True

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        if not self._carries(result) or trial_id in told_trials(self):
            return  # told already: a trial a grown max_t continues (Optuna cannot re-tell it)
        if not self._adopted(trial_id, result):
            return
        self._seen()[trial_id] = result
        super().on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None,
                          error: bool = False) -> None:
        last = self._seen().pop(trial_id, None)
        if trial_id in told_trials(self):  # as above: Ray would only warn
            return
        if not self._adopted(trial_id, result or last):
            return
        if not error and not result and last is None:
            # ended before it reported anything (a budget ends pending trials so): Ray would
            # tell Optuna it was pruned, which TPE ranks as the worst; left open instead, so a
            # resume that runs it after all tells its real result
            return
        if not self._carries(result):  # the last value it did report; a text value dropped
            metrics = self.metric if isinstance(self.metric, list) else [self.metric]
            result = {**{k: v for k, v in (result or {}).items() if k not in metrics},
                      **({k: last[k] for k in metrics} if last is not None else {})}
        super().on_trial_complete(trial_id, result, error)
