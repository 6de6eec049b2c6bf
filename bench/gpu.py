"""python -m bench.gpu [--trials 4] [--epochs 3] [--images 10000] [--batch-size 256]
[--width 64] [--gpus-per-trial N ...] [--sides plain,default,train,packed] [--repeats 1]
[--cap-s 300] [--out bench/results/gpu.json] [--cpu]

Sweeps on GPUs against plain Ray Tune + Train V2, with the same loop (``bench.gpu_loop``, a
ResNet-18 on synthetic 32x32 images written as Ray Train's docs write one), the same trials
(random ``lr``), ``--trials`` x ``--epochs``, each side in its own process and Ray instance:

- ``plain``: the docs' pattern: a Tuner over a driver function that runs a ``TorchTrainer``
  (``use_gpu=True``) with ``TuneReportCallback``, ``max_concurrent_trials`` = GPUs / GPUs per
  trial (the docs' advice), Ray's defaults otherwise (the dashboard on);
- ``default``: ``python -m sweeps --config-dir bench/conf +experiment=gpu_resnet`` as it comes
  (``trial.executor=auto``: a 1-GPU trial runs inline, several GPUs as a Train run);
- ``train``: the same with ``trial.executor=train``;
- ``packed`` (1 GPU per trial only): the same with ``scaling.gpus_per_worker=0.25``, four
  trials sharing each GPU.

Each side stops at ``--cap-s`` seconds (Tune's ``time_budget_s``, sweeps'
``sweep.budget.wall``) and says how many trials completed. While a side runs, this process
samples ``nvidia-smi`` every 0.2 s: how often the GPUs were busy (utilization above 0), their
mean utilization and peak memory. Overhead per trial is (wall - training) / completed trials,
training being every epoch's ``epoch_time_s``; for ``packed`` trials overlap, so it is not
given. ``--gpus-per-trial`` defaults to 1 and, on a machine with more, all of them. Medians of
``--repeats`` runs, the sides alternating. ``--cpu`` runs the same on CPUs (no sampling, no
``packed``), tiny sizes advised: the smoke check. JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SIDES = ("plain", "default", "train", "packed")


class GpuSampler:
    """``nvidia-smi`` every ``period_s`` in a thread: (time, utilization %, memory MiB) per
    GPU; nothing when there is no ``nvidia-smi``."""

    def __init__(self, period_s: float = 0.2) -> None:
        self.samples: list[tuple[float, list[float], list[float]]] = []
        self._period_ms = int(period_s * 1000)
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> GpuSampler:
        try:
            self._proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=utilization.gpu,memory.used",
                 "--format=csv,noheader,nounits", f"-lms={self._period_ms}"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except FileNotFoundError:
            return self
        threading.Thread(target=self._read, daemon=True).start()
        return self

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        gpus = _gpu_count()
        row: tuple[list[float], list[float]] = ([], [])
        for line in self._proc.stdout:
            parsed = parse_smi_line(line)
            if parsed is None:
                continue
            row[0].append(parsed[0])
            row[1].append(parsed[1])
            if len(row[0]) == gpus:  # one line per GPU per sample
                self.samples.append((time.time(), *row))
                row = ([], [])

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait()

    def summary(self) -> dict[str, float | None]:
        return summarize_samples([(u, m) for _, u, m in self.samples])


def parse_smi_line(line: str) -> tuple[float, float] | None:
    """(utilization %, memory MiB) of one ``nvidia-smi --format=csv,noheader,nounits`` line.

    Example:
        >>> parse_smi_line("87, 10240\\n")
        (87.0, 10240.0)
        >>> parse_smi_line("[N/A], 10") is None
        True
    """
    try:
        util, mem = (float(part) for part in line.strip().split(","))
    except ValueError:
        return None
    return util, mem


def summarize_samples(samples: list[tuple[list[float], list[float]]]) -> dict[str, float | None]:
    """Over every sample: the share in which any GPU was busy, the mean utilization over the
    GPUs, and the peak memory used on one GPU.

    Example:
        >>> got = summarize_samples([([0.0], [500.0]), ([80.0], [900.0]), ([100.0], [700.0])])
        >>> got["gpu_busy"], got["gpu_util_mean"], got["gpu_mem_peak_mib"]
        (0.6666666666666666, 60.0, 900.0)
    """
    if not samples:
        return {"samples": 0, "gpu_busy": None, "gpu_util_mean": None, "gpu_mem_peak_mib": None}
    return {"samples": len(samples),
            "gpu_busy": sum(max(u) > 0 for u, _ in samples) / len(samples),
            "gpu_util_mean": statistics.mean(statistics.mean(u) for u, _ in samples),
            "gpu_mem_peak_mib": max(max(m) for _, m in samples)}


def _gpu_count() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return 0
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines())


def _trial_rows(results: Any) -> list[list[dict[str, Any]]]:
    """Each trial's reports, from Tune's ResultGrid."""
    rows = []
    for result in results:
        frame = result.metrics_dataframe
        rows.append([] if frame is None else frame.to_dict("records"))
    return rows


def _outcome(results: Any, epochs: int, called: float) -> dict[str, Any]:
    """What a side did, now that it returned; ``called``: ``time.time()`` when it began.
    ``first_report_s`` (call -> first report) and ``tail_s`` (last report -> return) come from
    Tune's whole-second ``timestamp`` of each report, so they are +-1 s."""
    returned = time.time()
    rows = _trial_rows(results)
    done = [r for r in rows if r and int(r[-1].get("epoch", -1)) == epochs - 1]
    stamps = [float(x["timestamp"]) for r in rows for x in r if x.get("timestamp")]
    return {"wall_s": returned - called, "completed": len(done),
            "trials_started": sum(bool(r) for r in rows),
            "first_report_s": min(stamps) - called if stamps else None,
            "tail_s": returned - max(stamps) if stamps else None,
            "training_s": sum(float(x.get("epoch_time_s") or 0.0) for r in rows for x in r),
            "trial_peak_mib": max((float(x.get("gpu_peak_mib") or 0.0) for r in rows for x in r),
                                  default=0.0),
            "best_accuracy": max((float(x.get("accuracy") or 0.0) for r in rows for x in r),
                                 default=0.0)}


def run_plain(spec: dict[str, Any], storage: str) -> Any:
    """Ray's docs: Tune over a driver function that runs a TorchTrainer per trial."""
    import ray
    from ray import train, tune
    from ray.train.torch import TorchTrainer
    from ray.tune.integration.ray_train import TuneReportCallback

    from bench.gpu_loop import train_func

    per_trial, use_gpu = spec["gpus_per_trial"], not spec["cpu"]

    def train_driver_fn(config: dict[str, Any]) -> None:
        trainer = TorchTrainer(
            train_func, train_loop_config=config,
            scaling_config=train.ScalingConfig(num_workers=per_trial, use_gpu=use_gpu),
            run_config=train.RunConfig(name=f"train-{tune.get_context().get_trial_id()}",
                                       storage_path=storage, callbacks=[TuneReportCallback()]))
        trainer.fit()

    ray.init()
    try:
        gpus = int(ray.cluster_resources().get("GPU", 0))
        space = {"lr": tune.loguniform(1e-3, 0.1), "batch_size": spec["batch_size"],
                 "images": spec["images"], "width": spec["width"], "epochs": spec["epochs"]}
        tuner = tune.Tuner(train_driver_fn, param_space=space, tune_config=tune.TuneConfig(
            num_samples=spec["trials"], max_concurrent_trials=max(1, gpus // per_trial),
            time_budget_s=spec["cap_s"]),
            run_config=tune.RunConfig(storage_path=storage, name="plain"))
        return tuner.fit()
    finally:
        ray.shutdown()


def run_sweeps(side: str, spec: dict[str, Any], storage: str) -> Any:
    """``python -m sweeps --config-dir bench/conf +experiment=gpu_resnet``, the side's way."""
    from sweeps import compose, run_sweep

    overrides = [
        "search=random", "scheduler=none", f"search.num_samples={spec['trials']}",
        f"scheduler.max_t={spec['epochs']}", f"sweep.dir={storage}/sweep",
        f"tracking.uri=sqlite:///{storage}/mlflow.db", f"sweep.budget.wall={spec['cap_s']}",
        f"scaling.num_workers={spec['gpus_per_trial']}",
        f"scaling.use_gpu={'false' if spec['cpu'] else 'true'}",
        *(f"experiment.params.{key}={spec[arg]}" for key, arg in (
            ("batch_size", "batch_size"), ("images", "images"), ("width", "width"),
            ("epochs", "epochs"))),
        *{"train": ["trial.executor=train"],
          "packed": ["scaling.gpus_per_worker=0.25"]}.get(side, [])]
    cfg = compose("gpu_resnet", overrides, config_dir=ROOT / "bench" / "conf")
    return run_sweep(cfg).results


def _child(side: str, spec: dict[str, Any], out: str) -> None:
    """One side, timed alike: from before it imports Ray, Train or torch to after its Ray
    instance shut down."""
    called = time.time()
    with tempfile.TemporaryDirectory() as storage:
        results = (run_plain(spec, storage) if side == "plain"
                   else run_sweeps(side, spec, storage))
        got = _outcome(results, spec["epochs"], called)
    Path(out).write_text(json.dumps(got))


def run_side(side: str, spec: dict[str, Any]) -> dict[str, Any]:
    """One side in its own process (its own Ray instance and CUDA contexts), sampled."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    with tempfile.NamedTemporaryFile(suffix=".json") as out, GpuSampler() as sampler:
        began = time.time()
        try:
            rc = subprocess.run(
                [sys.executable, "-m", "bench.gpu", "--side", side, "--spec", json.dumps(spec),
                 "--side-out", out.name], cwd=ROOT, env=env, timeout=spec["cap_s"] + 300,
            ).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        elapsed = time.time() - began
        text = Path(out.name).read_text()
    got: dict[str, Any] = json.loads(text) if rc == 0 and text else {}
    got.update(rc=rc, process_s=elapsed, **sampler.summary())
    if got.get("completed"):
        got["overhead_per_trial_s"] = (None if side == "packed"
                                       else (got["wall_s"] - got["training_s"]) / got["completed"])
    return got


def _machine() -> dict[str, Any]:
    import ray
    import torch

    names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                           capture_output=True, text=True).stdout.split("\n") \
        if _gpu_count() else []
    return {"gpus": [n for n in names if n], "cpus": os.cpu_count(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "ray": ray.__version__,
            "python": sys.version.split()[0]}


def measure(spec: dict[str, Any], sides: list[str], gpus_per_trial: list[int],
            repeats: int, save: Any = None) -> dict[str, Any]:
    """Every side for every GPUs-per-trial count, alternating, ``repeats`` times; medians.
    ``save(result)`` is called after each side, so a run cut short keeps what it measured."""
    runs: dict[str, list[dict[str, Any]]] = {}
    result: dict[str, Any] = {}
    for _ in range(repeats):
        for per_trial in gpus_per_trial:
            for side in sides:
                if side == "packed" and (per_trial != 1 or spec["cpu"]):
                    continue
                key = f"{side}/{per_trial}"
                print(f"bench.gpu: {key} ...", flush=True)
                got = run_side(side, {**spec, "gpus_per_trial": per_trial})
                print(f"bench.gpu: {key}: {json.dumps(got)}", flush=True)
                runs.setdefault(key, []).append(got)
                result = _medians(spec, sides, gpus_per_trial, repeats, runs)
                if save is not None:
                    save(result)
    return result


def _medians(spec: dict[str, Any], sides: list[str], gpus_per_trial: list[int], repeats: int,
             runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    median: dict[str, dict[str, Any]] = {}
    for key, rs in runs.items():
        median[key] = {}
        for field in ("wall_s", "completed", "first_report_s", "tail_s", "training_s",
                      "overhead_per_trial_s", "gpu_busy", "gpu_util_mean", "gpu_mem_peak_mib",
                      "trial_peak_mib", "best_accuracy"):
            values = [r[field] for r in rs if r.get(field) is not None]
            median[key][field] = statistics.median(values) if values else None
    return {"spec": spec, "sides": sides, "gpus_per_trial": gpus_per_trial, "repeats": repeats,
            "runs": runs, "median": median}


def format_table(result: dict[str, Any]) -> str:
    rows = [f"{'side/GPUs per trial':<20} {'wall s':>7} {'done':>5} {'overhead/trial s':>17} "
            f"{'GPU busy':>9} {'util %':>7} {'mem MiB':>8} {'wall/plain':>11}"]
    median = result["median"]

    def cell(value: float | None, fmt: str, width: int) -> str:
        return f"{'-':>{width}}" if value is None else f"{value:>{width}{fmt}}"

    for key, m in median.items():
        plain = median.get(f"plain/{key.split('/')[1]}", {})
        ratio = (m["wall_s"] / plain["wall_s"] if m.get("wall_s") and plain.get("wall_s")
                 else None)
        rows.append(f"{key:<20} {cell(m['wall_s'], '.1f', 7)} {cell(m['completed'], '.0f', 5)} "
                    f"{cell(m['overhead_per_trial_s'], '.1f', 17)} "
                    f"{cell(m['gpu_busy'], '.0%', 9)} {cell(m['gpu_util_mean'], '.0f', 7)} "
                    f"{cell(m['gpu_mem_peak_mib'], '.0f', 8)} {cell(ratio, '.2f', 11)}")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--images", type=int, default=10_000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--gpus-per-trial", type=int, nargs="+", default=None)
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--cap-s", type=int, default=300)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "gpu.json")
    parser.add_argument("--cpu", action="store_true", help="CPUs only: the smoke check")
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--side-out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        _child(args.side, json.loads(args.spec), args.side_out)
        return
    sides = [s for s in args.sides.split(",") if s]
    unknown = sorted(set(sides) - set(SIDES))
    if unknown:
        parser.error(f"--sides: {unknown} are not sides; choose from {','.join(SIDES)}")
    gpus = _gpu_count()
    if not args.cpu and not gpus:
        parser.error("no GPU visible (nvidia-smi -L lists none); --cpu runs the smoke check")
    per_trial = args.gpus_per_trial or ([1] if args.cpu else sorted({1, gpus}))
    if not args.cpu and max(per_trial) > gpus:
        parser.error(f"--gpus-per-trial {max(per_trial)}: this machine has {gpus} GPU(s)")
    spec = {"trials": args.trials, "epochs": args.epochs, "images": args.images,
            "batch_size": args.batch_size, "width": args.width, "cap_s": args.cap_s,
            "cpu": args.cpu}
    machine = _machine()
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def save(result: dict[str, Any]) -> None:
        args.out.write_text(json.dumps({"machine": machine, **result}, indent=2))

    print(format_table(measure(spec, sides, per_trial, args.repeats, save)))


if __name__ == "__main__":
    main()
