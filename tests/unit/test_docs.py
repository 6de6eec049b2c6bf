"""The user docs keep their promises: every command is run by a test or says why not.

    python -m pytest tests/unit/test_docs.py -q

Reads README.md and docs/*.md (CONVENTIONS item 10); no Ray, no network. The marker convention:
every fenced block carries a language tag (``sh``/``console`` for commands, ``text`` for sample
output, ``yaml``, ``python``), and a command block has an HTML comment on the line right before
its fence::

    <!-- run by: tests/integration/test_cli.py::test_name[, path[::test_name]...][; note] -->
    <!-- not run: the reason -->

A ``run by:`` reference is a path from the repository root (a test file, or ``.ci/run`` for what
CI runs) with an optional ``::function``; the file must exist and define that function. Also
checked: relative links and their ``#anchors`` (GitHub's slug rules), the README's length and
section order, and that no commit hash sits in prose (trial ids in code blocks are fine).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
COMMAND_LANGS = frozenset({"sh", "bash", "shell", "console", "zsh"})
README_MAX_LINES = 300
# The README's contract, in this order (other sections may sit between them).
README_SECTIONS = ["Quickstart", "Your own training loop, in your own project",
                   "Comparing trials: MLflow and TensorBoard", "Resuming", "Documentation"]

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)")
_MARKER = re.compile(r"^\s*<!--\s*(run by|not run):\s*(.*?)\s*-->\s*$")
_REF = re.compile(r"^[\w./-]+(::\w+)?$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
_HEXISH = re.compile(r"\b[0-9a-f]{7,40}\b")


@dataclass(frozen=True)
class Fence:
    """One fenced block: where it opens (1-based), its tag, its lines, the line above it."""

    line: int
    lang: str
    body: list[str]
    above: str


def fences(text: str) -> tuple[list[Fence], list[str]]:
    """Every fenced block of a Markdown text, and the problems with how they are fenced.

    Example:
        >>> found, problems = fences("<!-- not run: x -->\\n```sh\\nls\\n```\\n")
        >>> (found[0].lang, found[0].body, found[0].above, problems)
        ('sh', ['ls'], '<!-- not run: x -->', [])
    """
    lines, found, problems = text.splitlines(), [], []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        mark, start = opening.group(1), i
        end = next((j for j in range(i + 1, len(lines))
                    if re.fullmatch(rf" {{0,3}}{mark[0]}{{{len(mark)},}}\s*", lines[j])), None)
        if end is None:
            problems.append(f"line {start + 1}: a {mark} fence that is never closed")
            end = len(lines)
        found.append(Fence(start + 1, opening.group(2).lower(), lines[start + 1:end],
                           lines[start - 1] if start else ""))
        i = end + 1
    return found, problems


def prose(text: str) -> str:
    """The text with fenced blocks blanked out (line numbers kept).

    Example:
        >>> prose("a\\n```\\nb\\n```\\nc")
        'a\\n\\n\\n\\nc'
    """
    lines = text.splitlines()
    for fence in fences(text)[0]:
        for k in range(fence.line - 1, min(fence.line + len(fence.body) + 1, len(lines))):
            lines[k] = ""
    return "\n".join(lines)


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lowercase, punctuation but ``-``/``_`` dropped,
    spaces to ``-``.

    Example:
        >>> github_anchor("Your own training loop, in your own project")
        'your-own-training-loop-in-your-own-project'
    """
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor a page has: its headings' (``-1``, ``-2`` for repeats) and HTML ones.

    Example:
        >>> sorted(anchors("# A\\n## A\\n```\\n# not a heading\\n```\\n"))
        ['a', 'a-1']
    """
    found: set[str] = set(_HTML_ANCHOR.findall(text))
    seen: dict[str, int] = {}
    for line in prose(text).splitlines():
        heading = _HEADING.match(line)
        if heading:
            slug = github_anchor(heading.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def marker_problems(fence: Fence, root: Path) -> list[str]:
    """What is wrong with a command block's marker (nothing for other blocks).

    Example:
        >>> marker_problems(Fence(3, "sh", ["ls"], "<!-- not run: lists files -->"), ROOT)
        []
    """
    if fence.lang not in COMMAND_LANGS:
        return []
    where = f"line {fence.line}"
    marker = _MARKER.match(fence.above)
    if not marker:
        return [f"{where}: a {fence.lang} block needs a marker on the line before its fence: "
                "<!-- run by: tests/...py::test_name --> or <!-- not run: the reason -->"]
    kind, rest = marker.groups()
    if kind == "not run":
        return [] if rest else [f"{where}: 'not run:' needs a reason"]
    refs = [ref.strip() for ref in rest.split(";", 1)[0].split(",")]
    problems = []
    for ref in refs:
        if not _REF.match(ref):
            problems.append(f"{where}: {ref!r} is not a reference: write path or path::test_name "
                            "(a note goes after ';')")
            continue
        path, _, name = ref.partition("::")
        target = root / path
        if not target.is_file():
            problems.append(f"{where}: {path} (run by) does not exist")
        elif name and not re.search(rf"^\s*(?:async\s+)?def {re.escape(name)}\(",
                                    target.read_text(), re.M):
            problems.append(f"{where}: {path} has no test {name}")
    return problems


def link_problems(page: Path, text: str) -> list[str]:
    """Relative links (and images) whose file or ``#anchor`` does not exist.

    Example:
        >>> link_problems(README, "[x](#nowhere) [y](https://example.com)")
        ["line 1: '#nowhere': README.md has no heading with anchor 'nowhere'"]
    """
    problems = []
    for number, line in enumerate(prose(text).splitlines(), 1):
        for target in _LINK.findall(_INLINE_CODE.sub("", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            name = file.relative_to(ROOT) if file.is_relative_to(ROOT) else file
            if not file.exists():
                problems.append(f"line {number}: {target!r}: {name} does not exist")
            elif anchor and anchor not in anchors(file.read_text()):
                problems.append(f"line {number}: {target!r}: {name} has no heading with "
                                f"anchor {anchor!r}")
    return problems


def hash_problems(text: str) -> list[str]:
    """Commit-hash-like tokens in prose: 7-40 hex characters with a digit and a letter.

    Code blocks are skipped (trial ids in sample output are 8 hex characters); inline code is
    not, since a hash in backticks is still a hash.

    Example:
        >>> hash_problems("fixed in d23063b; deadbeef and 1234567 are words\\n```\\n9a6685fe\\n```")
        ["line 1: 'd23063b' looks like a commit hash"]
    """
    return [f"line {number}: {token!r} looks like a commit hash"
            for number, line in enumerate(prose(text).splitlines(), 1)
            for token in _HEXISH.findall(line)
            if re.search(r"\d", token) and re.search(r"[a-f]", token)]


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_command_block_is_run_by_a_test_or_marked_not_run(page: Path) -> None:
    found, problems = fences(page.read_text())
    problems += [f"line {f.line}: a fence without a language tag (sh or console for commands, "
                 "text for sample output)" for f in found if not f.lang]
    for fence in found:
        problems += marker_problems(fence, ROOT)
    assert not problems, f"{_name(page)}:\n" + "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_relative_links_and_anchors_resolve(page: Path) -> None:
    problems = link_problems(page, page.read_text())
    assert not problems, f"{_name(page)}:\n" + "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_no_commit_hash_in_prose(page: Path) -> None:
    problems = hash_problems(page.read_text())
    assert not problems, f"{_name(page)}:\n" + "\n".join(problems)


def test_readme_is_a_page_with_its_sections_in_order() -> None:
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}); move detail to docs/")
    headings = [m.group(2) for m in map(_HEADING.match, prose(text).splitlines())
                if m and len(m.group(1)) == 2]
    missing = [s for s in README_SECTIONS if s not in headings]
    assert not missing, f"README.md lacks the section(s) {missing}; it has {headings}"
    order = [headings.index(s) for s in README_SECTIONS]
    assert order == sorted(order), f"README.md's sections are out of order: {headings}"


def test_readme_links_every_docs_page() -> None:
    documentation = README.read_text().split("\n## Documentation\n", 1)[1]
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)\)", documentation))
    pages = {_name(p) for p in PAGES[1:]}
    assert pages <= linked, f"not in the README's Documentation list: {sorted(pages - linked)}"


def test_quickstart_test_command_is_what_ci_runs() -> None:
    """``make test`` starts a line of a README command block, and .ci/run calls it."""
    blocks = [f.body for f in fences(README.read_text())[0] if f.lang in COMMAND_LANGS]
    assert any("make test" in body for body in blocks), "README: no 'make test' line"
    assert re.search(r"^make test\s*$", (ROOT / ".ci" / "run").read_text(), re.M)


@pytest.mark.parametrize(("heading", "anchor"), [
    ("Resuming", "resuming"),
    ("Your own training loop, in your own project", "your-own-training-loop-in-your-own-project"),
    ("Cost as a sweep grows (`bench.scale`)", "cost-as-a-sweep-grows-benchscale"),
    ("Against Hydra's Optuna sweeper (`bench.search_efficiency --hydra-only`)",
     "against-hydras-optuna-sweeper-benchsearch_efficiency---hydra-only"),
    ("Trial backends: inline or a Ray Train run", "trial-backends-inline-or-a-ray-train-run"),
    ("The short path, `TrialSession`", "the-short-path-trialsession"),
    ("  Ray Data: datasets built once ", "ray-data-datasets-built-once"),
])
def test_github_anchor(heading: str, anchor: str) -> None:
    assert github_anchor(heading) == anchor


@pytest.mark.parametrize(("above", "lang", "problem"), [
    ("<!-- run by: tests/unit/test_docs.py::test_github_anchor -->", "sh", None),
    ("<!-- run by: .ci/run; CI's command -->", "sh", None),
    ("<!-- run by: tests/unit/test_docs.py, .ci/run -->", "console", None),
    ("<!-- not run: needs a Ray cluster -->", "sh", None),
    ("", "yaml", None),
    ("", "text", None),
    ("", "sh", "needs a marker"),
    ("<!-- runs: tests/unit/test_docs.py -->", "bash", "needs a marker"),
    ("<!-- not run: -->", "sh", "needs a reason"),
    ("<!-- run by: tests/unit/nope.py::test_x -->", "sh", "tests/unit/nope.py (run by) does not"),
    ("<!-- run by: tests/unit/test_docs.py::test_nope -->", "sh", "has no test test_nope"),
    ("<!-- run by: the CI -->", "sh", "'the CI' is not a reference"),
])
def test_marker_problems(above: str, lang: str, problem: str | None) -> None:
    found = marker_problems(Fence(7, lang, ["make demo"], above), ROOT)
    if problem is None:
        assert found == []
    else:
        assert len(found) == 1 and found[0].startswith("line 7: ") and problem in found[0], found


@pytest.mark.parametrize(("text", "problems"), [
    ("```sh\nls\n```\n", []),
    ("~~~text\n```\nnested\n```\n~~~\n", []),
    ("para\n```python\nx = 1\n", ["line 2: a ``` fence that is never closed"]),
])
def test_fences_report_unclosed_blocks(text: str, problems: list[str]) -> None:
    assert fences(text)[1] == problems


@pytest.mark.parametrize(("text", "flagged"), [
    ("measured at d49b4e8", ["d49b4e8"]),
    ("see `70412dc` for the fix", ["70412dc"]),
    ("a full hash 554a099f1c2b3d4e5f60718293a4b5c6d7e8f901 here", [
        "554a099f1c2b3d4e5f60718293a4b5c6d7e8f901"]),
    ("deadbeef, 1234567, 0.19644563572959983 and ray#30838", []),
    ("```text\n[ 10s] trial 9a6685fe completed\n```", []),
    ("the word decade or facade", []),
])
def test_hash_problems(text: str, flagged: list[str]) -> None:
    assert [p.split("'")[1] for p in hash_problems(text)] == flagged


@pytest.mark.parametrize(("text", "problem"), [
    ("[ok](#resuming)", None),
    ("[ok](docs/running.md#resuming-in-detail)", None),
    ("![img](docs/mlflow_runs.png)", None),
    ("[web](https://docs.ray.io/x#y) and `[code](#not-a-link)`", None),
    ("[gone](docs/nowhere.md)", "docs/nowhere.md does not exist"),
    ("[bad anchor](docs/running.md#no-such)", "docs/running.md has no heading with anchor"),
    ("[bad](#no-such-section)", "README.md has no heading with anchor 'no-such-section'"),
])
def test_link_problems(text: str, problem: str | None) -> None:
    found = link_problems(README, text)
    if problem is None:
        assert found == []
    else:
        assert len(found) == 1 and problem in found[0], found
