"""``sweeps template slurm|rayjob|raycluster``: what each template holds is checked here without
a cluster. The KubeRay manifests hold only fields KubeRay's CRDs declare, with their types, enums
and required fields (the CRDs of KubeRay v1.7.0, cut to what the manifests reach:
``tests/data/kuberay``; their CEL rules are not checked, and nothing here runs Kubernetes); the
sweep command in each template is a valid sweep's; the sbatch script is bash. The sbatch script
runs on a real Slurm in ``tests/integration/test_slurm.py``.
"""

from __future__ import annotations

import copy
import json
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from sweeps import compose
from sweeps.config.schema import to_config
from sweeps.templates import TEMPLATES, main, text

KUBERAY = Path(__file__).resolve().parents[1] / "data" / "kuberay"
TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "integer": int,
         "number": (int, float)}


def violations(value, schema: dict, path: str = "") -> list[str]:
    """Where ``value`` breaks ``schema`` (a CRD's openAPIV3Schema, cut by prune_crd.py)."""
    if not schema:  # a field the cut left out (the manifests did not use it then)
        return [f"{path}: not in the cut CRD; rerun tests/data/kuberay/prune_crd.py"]
    kind = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, int | str) or isinstance(value, bool):
            return [f"{path}: {value!r} is neither an integer nor a string"]
    elif kind and (not isinstance(value, TYPES[kind]) or
                   (kind in ("integer", "number") and isinstance(value, bool))):
        return [f"{path}: {value!r} is not of type {kind}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{path}: {value!r} is not one of {schema['enum']}"]
    found = []
    if isinstance(value, dict):
        found += [f"{path}.{name}: required by KubeRay" for name in schema.get("required", [])
                  if name not in value]
        for name, sub in value.items():
            if name in schema.get("properties", {}):
                found += violations(sub, schema["properties"][name], f"{path}.{name}")
            elif isinstance(schema.get("additionalProperties"), dict):
                found += violations(sub, schema["additionalProperties"], f"{path}.{name}")
            elif not schema.get("x-kubernetes-preserve-unknown-fields") and \
                    "properties" in schema:
                found.append(f"{path}.{name}: not a field KubeRay declares")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            found += violations(item, schema["items"], f"{path}[{i}]")
    return found


def _manifest(name: str) -> tuple[dict, dict]:
    data = json.loads((KUBERAY / f"{name}.json").read_text())
    assert data["kuberay"] == "v1.7.0"
    return yaml.safe_load(text(name)), data["schema"]


@pytest.mark.parametrize(("name", "kind"), [("rayjob", "RayJob"), ("raycluster", "RayCluster")])
def test_each_manifest_holds_only_what_kuberay_declares(name: str, kind: str) -> None:
    manifest, schema = _manifest(name)
    assert (manifest["apiVersion"], manifest["kind"]) == ("ray.io/v1", kind)
    assert violations(manifest, schema) == []


def test_a_field_kuberay_does_not_know_or_a_missing_one_is_caught() -> None:
    manifest, schema = _manifest("rayjob")
    broken = copy.deepcopy(manifest)
    cluster = broken["spec"]["rayClusterSpec"]
    cluster["headGroupSpec"]["replicas"] = 1  # only worker groups have replicas
    del cluster["workerGroupSpecs"][0]["maxReplicas"]
    cluster["workerGroupSpecs"][0]["minReplicas"] = "two"
    cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] = 0  # KubeRay wants strings here
    broken["spec"]["suspend"] = "yes"  # a field KubeRay has, which the cut does not describe
    assert sorted(violations(broken, schema)) == [
        ".spec.rayClusterSpec.headGroupSpec.rayStartParams.num-cpus: 0 is not of type string",
        ".spec.rayClusterSpec.headGroupSpec.replicas: not a field KubeRay declares",
        ".spec.rayClusterSpec.workerGroupSpecs[0].maxReplicas: required by KubeRay",
        ".spec.rayClusterSpec.workerGroupSpecs[0].minReplicas: 'two' is not of type integer",
        ".spec.suspend: not in the cut CRD; rerun tests/data/kuberay/prune_crd.py"]


def _overrides(command: str) -> list[str]:
    """The key=value overrides of a sweeps command line (its experiment is the user's)."""
    words = shlex.split(command)
    return [w for w in words[words.index("sweeps") + 1:]
            if "=" in w and not w.startswith(("+experiment=", "--"))]


def test_the_sweep_command_in_each_template_is_a_valid_sweeps() -> None:
    entrypoint = yaml.safe_load(text("rayjob"))["spec"]["entrypoint"]
    submitted = " ".join(line.lstrip("# ").rstrip("\\") for line in text("raycluster").splitlines()
                         if "python -m sweeps" in line or "sweep.dir=" in line)
    sbatch = next(line for line in text("slurm").splitlines() if "#   sbatch " in line)
    for command, expected in [(entrypoint, "auto"), (submitted, "auto"),
                              (sbatch.replace("sbatch sweep.sbatch", "python -m sweeps"), None)]:
        overrides = _overrides(command)
        assert any(o.startswith("sweep.dir=") for o in overrides), command
        cfg = to_config(compose("digits", overrides))
        assert cfg.ray.address == expected


def test_the_sbatch_script_is_bash_that_forwards_the_warning_and_requeues() -> None:
    script = text("slurm")
    done = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for line in ("#SBATCH --signal=B:TERM@120", "#SBATCH --requeue", "trap on_term TERM",
                 'scontrol requeue "$SLURM_JOB_ID"'):
        assert line in script


def test_the_command_prints_each_template_and_names_them_on_a_bad_one(capsys) -> None:
    for name in TEMPLATES:
        assert main([name]) == 0
        assert capsys.readouterr().out == text(name)
    assert main(["helm"]) == 2
    assert "sweeps template {slurm|rayjob|raycluster} > FILE (got helm)" in capsys.readouterr().err
