"""python tests/data/kuberay/prune_crd.py CRD.yaml MANIFEST.yaml OUT.json

Writes the part of a KubeRay CRD's v1 schema (openAPIV3Schema) that a manifest of
``sweeps/templates`` reaches, for ``tests/unit/test_templates.py``: at every object the manifest
reaches, every property name the CRD declares (a subtree the manifest does not enter is kept as
``{}``), with ``required``, ``type``, ``enum`` and ``additionalProperties``. The files here were
made from KubeRay v1.7.0's ray-operator/config/crd/bases/ray.io_{rayjobs,rayclusters}.yaml.
"""

import json
import sys

import yaml

KEEP = ("type", "required", "enum", "x-kubernetes-int-or-string",
        "x-kubernetes-preserve-unknown-fields")


def prune(schema: dict, value) -> dict:
    out = {k: schema[k] for k in KEEP if k in schema}
    if isinstance(value, dict) and "properties" in schema:
        out["properties"] = {name: prune(sub, value[name]) if name in value else {}
                             for name, sub in schema["properties"].items()}
    if isinstance(value, dict) and isinstance(schema.get("additionalProperties"), dict):
        out["additionalProperties"] = prune(schema["additionalProperties"], None)
    if isinstance(value, list) and "items" in schema:
        out["items"] = {}
        for item in value:  # every item of the list is checked against the same schema
            out["items"] = _merge(out["items"], prune(schema["items"], item))
    return out


def _merge(a: dict, b: dict) -> dict:
    merged = {**a, **b}
    for key in ("properties",):
        if key in a and key in b:
            merged[key] = {k: _merge(a[key][k], b[key][k]) for k in a[key]}
    if "items" in a and "items" in b:
        merged["items"] = _merge(a["items"], b["items"])
    return merged


if __name__ == "__main__":
    crd, manifest, out = sys.argv[1:]
    version = next(v for v in yaml.safe_load(open(crd))["spec"]["versions"] if v["name"] == "v1")
    pruned = prune(version["schema"]["openAPIV3Schema"], yaml.safe_load(open(manifest)))
    with open(out, "w") as f:
        json.dump({"kuberay": "v1.7.0", "crd": crd.rsplit("/", 1)[-1], "schema": pruned}, f,
                  indent=1, sort_keys=True)
        f.write("\n")
