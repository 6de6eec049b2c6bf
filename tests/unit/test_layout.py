"""The layout rules of CONTRIBUTING.md, checked on the tree: no import cycle among the modules of
``sweeps/`` (imports inside functions and edges to a package's ``__init__`` counted too), no
module over 320 lines, and ``import sweeps`` loading none of Ray, torch or MLflow."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 320


def _modules(package: Path) -> dict[str, Path]:
    """Dotted name -> file, for every module of ``package`` (a package is its ``__init__``)."""
    found = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports, anywhere in its source."""
    modules = _modules(package)

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = name.split(".") if path.name == "__init__.py" \
                        else name.split(".")[:-1]
                    anchor = anchor[:len(anchor) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for target in targets:
                found = resolve(target)
                if found is not None and found != name:
                    graph[name].add(found)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_in_sweeps() -> None:
    graph = import_graph(ROOT / "sweeps")
    assert len(graph) > 100 and sum(map(len, graph.values())) > 300  # the walk found them
    assert cycles(graph) == []


def test_a_cycle_through_a_function_level_import_is_found(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "low").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low" / "__init__.py").write_text("from pkg.low.base import x\n")
    (pkg / "low" / "base.py").write_text("def x():\n    from ..high import y\n")
    (pkg / "high.py").write_text("from pkg.low import x\ny = 1\n")
    (pkg / "alone.py").write_text("import pkg.high\n")
    assert cycles(import_graph(pkg)) == [["pkg.high", "pkg.low", "pkg.low.base"]]


def test_no_module_over_320_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "sweeps").rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_importing_sweeps_loads_no_ray_torch_or_mlflow() -> None:
    heavy = ("ray", "torch", "mlflow", "pandas")
    proc = subprocess.run(
        [sys.executable, "-c", "import sys, sweeps; "
         f"print([m for m in {heavy!r} if m in sys.modules])"],
        capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_a_torch_that_does_not_import_fails_the_gpu_tests(pytester: pytest.Pytester) -> None:
    """tests/conftest.py: no CUDA GPU skips the ``gpu`` tests; a broken torch fails them."""
    pytester.makeini("[pytest]\nmarkers =\n    gpu: needs a CUDA GPU\n")
    pytester.makeconftest((ROOT / "tests" / "conftest.py").read_text())
    pytester.makepyfile(test_it="import pytest\n\n@pytest.mark.gpu\ndef test_on_gpu():\n"
                                "    pass\n\ndef test_on_cpu():\n    pass\n")
    torch = pytester.mkpydir("torch")
    (torch / "__init__.py").write_text(
        "raise OSError('libcudart.so.12: cannot open shared object file')\n")
    broken = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    broken.assert_outcomes(passed=1, errors=1)
    broken.stdout.fnmatch_lines(["*torch does not import, so the gpu tests cannot run: "
                                 "OSError: libcudart.so.12*"])
    (torch / "__init__.py").write_text(
        "class cuda:\n    @staticmethod\n    def is_available():\n        return False\n")
    no_gpu = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    no_gpu.assert_outcomes(passed=1, skipped=1)
