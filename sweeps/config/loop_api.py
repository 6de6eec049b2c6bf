"""Which Ray API a loop is written against, read from its module's source before Ray starts.

    loop_api("trainables.digits:train_mlp")    # 'train': ray.train.report, a Ray Train loop
    loop_api("mypkg.tune_job:objective")       # 'tune': ray.tune.report, a Tune function

A Ray Train per-worker function reports with ``ray.train.report``; a Ray Tune function
trainable (``def objective(config): ... tune.report({...})``, Tune's docs) with
``ray.tune.report``, ``tune.get_checkpoint()`` and ``tune.Checkpoint``. sweeps runs both
unchanged (``sweeps.loop.worker`` serves Tune's function API to a ``tune`` loop); a Tune
function is one process, so its trials take one worker (``scaling.num_workers`` unset: 1).

What is refused here, before the module is imported: docs/experiments.md#from-ray-tune. The
scan reads the module's syntax, not its comments or strings. Imports no Ray.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
from typing import Any

from sweeps.errors import ConfigError

__all__ = ["TRAIN", "TUNE", "check_trainable_class", "loop_api", "settle_workers"]

TRAIN, TUNE = "train", "tune"
KEY = "experiment.trainable"
# What marks a loop as one or the other (get_context and the Checkpoint class alone do not:
# a Train loop may read Tune's context, a Tune driver may build a TorchTrainer)
_CALLS = {TUNE: ("report", "get_checkpoint"),
          TRAIN: ("report", "get_checkpoint", "get_dataset_shard", "torch")}
_TRAIN_NAMES = {"RayTrainReportCallback", "prepare_model", "prepare_data_loader",
                "TrialSession"}  # a Train loop's helpers (Ray's, and sweeps')


def _source(module_name: str) -> tuple[str, str] | None:
    """(source, file) of a module without importing it (its packages are imported); None
    when it cannot be found or read (validation then says why it does not import)."""
    try:
        spec = importlib.util.find_spec(module_name)
    except Exception:  # its package raised on import: validation says so, in one line
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    try:
        with open(spec.origin, encoding="utf-8") as f:
            return f.read(), spec.origin
    except OSError:
        return None


def _dotted(node: ast.AST) -> str:
    """``ray.tune.report`` for an attribute chain, ``report`` for a name, else ""."""
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return node.id if isinstance(node, ast.Name) else ""


def _uses(tree: ast.Module) -> dict[str, set[str]]:
    """The Train and Tune API names the module uses: ``tune.report``/``ray.tune.report`` (under
    any alias), ``from ray.tune import report``, Tune's reporting callbacks
    (``ray.tune.integration.*``), and the same for ``train`` (``ray.train.torch`` too)."""
    found: dict[str, set[str]] = {TRAIN: set(), TUNE: set()}
    aliases = {TUNE: TUNE, TRAIN: TRAIN}  # names bound to them (from ray import tune as rt)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases.update({a.asname: a.name[4:] for a in node.names
                            if a.asname and a.name in ("ray.tune", "ray.train")})
        elif isinstance(node, ast.ImportFrom) and node.module == "ray":
            aliases.update({a.asname or a.name: a.name for a in node.names
                            if a.name in (TUNE, TRAIN)})
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("ray.tune", "ray.train",
                                                               "ray.train.torch"):
            api = TUNE if node.module == "ray.tune" else TRAIN
            found[api] |= {a.name for a in node.names if a.name in _CALLS[api]
                           or (api == TRAIN and node.module == "ray.train.torch")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "ray.tune.integration"):  # TuneReportCheckpointCallback: tune.report inside
            found[TUNE] |= {a.name for a in node.names if a.name.startswith("TuneReport")}
        elif isinstance(node, ast.Attribute):
            parts = _dotted(node).split(".")
            api = (parts[-2] if parts[0] == "ray" and len(parts) > 2
                   else aliases.get(parts[0]) if len(parts) == 2 else None)
            if api in _CALLS and parts[-1] in _CALLS[api]:
                found[api].add(parts[-1])
        if isinstance(node, ast.Name | ast.Attribute | ast.alias):
            name = node.attr if isinstance(node, ast.Attribute) else getattr(
                node, "id", getattr(node, "name", ""))
            if name in _TRAIN_NAMES:
                found[TRAIN].add(name)
    return found


def _hands_back_values(tree: ast.Module, name: str) -> bool:
    """Whether the module's function ``name`` yields or returns a value (not under a nested
    def): how a Tune function of Tune's older style reports."""
    def walk(node: ast.AST) -> bool:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
                          | ast.ClassDef):
                continue
            if isinstance(child, ast.Yield | ast.YieldFrom) or (
                    isinstance(child, ast.Return) and child.value is not None
                    and not (isinstance(child.value, ast.Constant)
                             and child.value.value is None)) or walk(child):
                return True
        return False

    return any(walk(node) for node in tree.body
               if isinstance(node, ast.FunctionDef) and node.name == name)


def _runs_at_import(tree: ast.Module) -> ast.Call | None:
    """A call at the module's top level (not under a def, a class or ``if __name__``) that
    trains or starts Ray: a tuner's or trainer's ``.fit()``, ``tune.run()``, ``ray.init()``."""
    def guarded(stmt: ast.stmt) -> bool:
        return isinstance(stmt, ast.If) and "__name__" in ast.unparse(stmt.test)

    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) or guarded(stmt):
            continue
        for node in ast.walk(stmt):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            on = ast.unparse(node.func.value)
            if (node.func.attr == "fit" and re.search("tuner|trainer", on, re.I)) or \
                    _dotted(node.func) in ("tune.run", "ray.tune.run", "ray.init"):
                return node
    return None


def loop_api(trainable: str) -> str:
    """``tune`` when the loop's module uses Tune's function API and not Train's, else
    ``train``; ``ConfigError`` for a module that trains at import or mixes the two.

    Example:
        >>> loop_api("trainables.digits:train_mlp")
        'train'
    """
    found = _source(trainable.partition(":")[0])
    return TRAIN if found is None else _classified(trainable, *found)


@functools.lru_cache(maxsize=32)  # asked by the config, the backends and the plan: parse once
def _classified(trainable: str, source: str, path: str) -> str:
    try:
        tree = ast.parse(source, path)
    except SyntaxError:
        return TRAIN  # importing it says where (sweeps.config.usercode)
    call = _runs_at_import(tree)
    if call is not None:
        raise ConfigError(KEY, trainable,
                          f"is in a module that runs `{ast.unparse(call)}` when it is imported "
                          f"({path}:{call.lineno}), which would train inside the sweep's driver",
                          "put that code under `if __name__ == \"__main__\":` (the sweep "
                          "imports the module and calls only the function it names)")
    uses = _uses(tree)
    if not uses[TRAIN] and _hands_back_values(tree, trainable.partition(":")[2]):
        uses[TUNE].add("return/yield")  # Tune's older style: it reports what comes back
    if uses[TUNE] and uses[TRAIN]:
        raise ConfigError(KEY, trainable,
                          f"is in a module that uses both Ray Tune's function API (tune."
                          f"{', tune.'.join(sorted(uses[TUNE]))}) and Ray Train's (train."
                          f"{', train.'.join(sorted(uses[TRAIN]))}); Ray ignores "
                          "ray.tune.report in a Train worker and refuses ray.train.report in "
                          "a Tune function, so one of them is lost",
                          "report with one API: ray.tune.report in a Tune function (one "
                          "process per trial), ray.train.report in a Ray Train loop (DDP "
                          "workers); or put the two loops in separate modules")
    return TUNE if uses[TUNE] else TRAIN


def check_trainable_class(trainable: str, fn: Any) -> None:
    """Refuse a class (``tune.Trainable``'s subclass, or any other) named as the loop.

    Example:
        >>> check_trainable_class("m:Job", type("Job", (), {}))
        Traceback (most recent call last):
        ...
        sweeps.errors.ConfigError: experiment.trainable: 'm:Job' is a class, not a function; ...
    """
    if not isinstance(fn, type):
        return
    kind = ("a ray.tune.Trainable class (setup/step/save_checkpoint)"
            if any(c.__name__ == "Trainable" and c.__module__.startswith("ray.tune")
                   for c in fn.__mro__) else "a class")
    raise ConfigError(KEY, trainable, f"is {kind}, not a function; sweeps runs function "
                      "trainables only (Ray Tune's function API or a Ray Train loop)",
                      "write it as `def objective(config):` that loops over its step() body "
                      "and calls ray.tune.report(metrics, checkpoint=...) each iteration")


def settle_workers(num_workers: Any, trainable: str) -> Any:
    """``scaling.num_workers`` for this loop: unset (None) is 1 for a Tune function and 2
    for a Ray Train loop; more than one worker for a Tune function is refused.

    Example:
        >>> settle_workers(None, "trainables.digits:train_mlp"), settle_workers(4, "m:f")
        (2, 4)
    """
    api = loop_api(trainable)
    if num_workers is None:
        return 1 if api == TUNE else 2
    if api == TUNE and num_workers != 1:
        raise ConfigError("scaling.num_workers", num_workers,
                          f"asks for DDP workers, but {trainable} is a Ray Tune function "
                          "(it calls ray.tune.report), which runs as one process per trial",
                          "leave scaling.num_workers unset (or 1); for several workers per "
                          "trial, write the loop for Ray Train (ray.train.report, "
                          "prepare_model)")
    return num_workers
