"""The CLI precheck: experiments from every search-path entry, one-line errors, exit code 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweeps import ConfigError
from sweeps.config.overrides import check_overrides
from sweeps.config.paths import CONF_DIR

ROOT = Path(__file__).resolve().parents[3]
SP = "hydra.searchpath"


@pytest.fixture
def user(tmp_path: Path) -> Path:
    """``tmp/conf/experiment/{mine,digits}.yaml``; the tests run in ``tmp``."""
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    for name in ("mine", "digits"):
        (tmp_path / "conf" / "experiment" / f"{name}.yaml").write_text("# @package _global_\n")
    return tmp_path


@pytest.mark.parametrize("argv", [
    ["--config-dir", "conf", "+experiment=mine"], ["-cd", "conf", "+experiment=mine"],
    ["--config-dir=conf", "+experiment=mine", "search.num_samples=2"],
    ["+experiment=mine", f"{SP}=[file://conf]"], ["+experiment=mine", f"{SP}=[conf]"],
    ["-cd", "conf", "+experiment=digits_cnn"], ["+experiment=digits"],
    ["-cd", "conf", "--cfg", "job"], ["--help"],
])
def test_experiments_of_every_entry_pass(user: Path, argv: list[str]) -> None:
    check_overrides(argv)


@pytest.mark.parametrize(
    ("argv", "key", "message"),
    [(["+experiment=mine"], "experiment",
      "experiment: 'mine' is not an experiment in experiment/ of {conf} (built-in); available: "
      "digits (built-in), digits_cnn (built-in), digits_data (built-in), digits_lightning "
      "(built-in), digits_multiobjective (built-in), hf_text (built-in), hf_vit (built-in)"),
     (["-cd", "conf", "+experiment=mien"], "experiment",
      "experiment: 'mien' is not an experiment in experiment/ of {t}/conf (--config-dir), {conf} "
      "(built-in); did you mean +experiment=mine? available: digits (--config-dir), digits_cnn "
      "(built-in), digits_data (built-in), digits_lightning (built-in), digits_multiobjective "
      "(built-in), hf_text (built-in), hf_vit (built-in), mine (--config-dir)"),
     ([f"{SP}=[file://gone,file://conf]", "+experiment=zzz"], "experiment",
      "experiment: 'zzz' is not an experiment in experiment/ of {t}/gone (hydra.searchpath, "
      "missing), {t}/conf (hydra.searchpath), {conf} (built-in); available: digits "
      "(hydra.searchpath), digits_cnn (built-in), digits_data (built-in), digits_lightning "
      "(built-in), digits_multiobjective (built-in), hf_text (built-in), hf_vit (built-in), mine "
      "(hydra.searchpath)"),
     (["--config-dir", "gone", "+experiment=mine"], "--config-dir",
      "--config-dir: '{t}/gone' is not a directory; pass the directory that holds your "
      "experiment/ folder, e.g. --config-dir ./conf for ./conf/experiment/NAME.yaml"),
     (["-cd", "conf", "+experiment=mine", "search.num_sample=2"], "search.num_sample",
      "search.num_sample: 2 is not a config key; did you mean search.num_samples?")],
)
def test_precheck_errors_name_every_place_looked(user: Path, argv: list[str], key: str,
                                                 message: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_overrides(argv)
    assert info.value.key == key
    assert str(info.value) == message.format(t=user, conf=CONF_DIR)


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [(["--config-dir", "gone", "+experiment=mine"], "--config-dir: '{t}/gone' is not a dir"),
     (["-cd", "conf", "+experiment=mien"], "did you mean +experiment=mine?"),
     # an unknown flag: named, not "experiment 'mine' is not in the built-in conf/" (the
     # --config-dir that Hydra's parser gave up on used to be dropped)
     (["-cd", "conf", "+experiment=mine", "--dry-run"],
      "command line: '--dry-run' is not a flag Hydra knows; options are key=value overrides "
      "(sweep.dry_run=true prints the plan)"),
     (["+experiment=mine", "--config-dir"], "expected one argument' (Hydra's parser)")],
)
def test_cli_refuses_in_one_line_with_exit_2(user: Path, argv: list[str], fragment: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": ""}
    proc = subprocess.run([sys.executable, "-m", "sweeps", *argv], cwd=user, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("sweeps: error: ")
    assert fragment.format(t=user) in proc.stderr
    assert proc.stdout == ""


def test_cli_help_lists_experiments_per_entry_without_ray_or_torch(user: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": ""}
    code = ("import runpy, sys\nsys.argv = ['sweeps', '-cd', 'conf', '--help']\ntry:\n"
            "    runpy.run_module('sweeps', run_name='__main__', alter_sys=True)\n"
            "except SystemExit as exc:\n    print('EXIT', exc.code)\n"
            "print('HEAVY', [m for m in ('ray', 'torch') if m in sys.modules])")
    proc = subprocess.run([sys.executable, "-c", code], cwd=user, env=env,
                          capture_output=True, text=True, timeout=120)
    lines = proc.stdout.splitlines()
    assert lines[-2:] == ["EXIT 0", "HEAVY []"], proc.stdout[-2000:] + proc.stderr
    for line in ["experiment: digits, digits_cnn, digits_data, digits_lightning, "
                 "digits_multiobjective, hf_text, hf_vit, mine",
                 "search: grid, optuna, random, tpe",
                 f"1. {user}/conf (--config-dir)", f"2. {CONF_DIR} (built-in)",
                 f"     digits  (shadowed by {user}/conf, --config-dir)", "     digits_cnn"]:
        assert line in lines, proc.stdout
    assert "sweep:\n  name: ${experiment.name}" in proc.stdout  # Hydra's config dump stays
