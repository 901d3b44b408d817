"""What the README and docs/ point a reader at exists: the files they name and the
`python -m <module>` entry points they show.

Both are read out of the documents themselves (not listed here), so a moved module, a
deleted entry point or a renamed test file fails here before a reader follows it.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Top-level entries a path written in a document may start with.
TOP = ("chaos/", "faults/", "suites/", "tests/", "docs/", "examples/", "bench/", "compose/", "scripts/",
       "reports/", ".github/", ".ci/")
ROOT_FILES = ("README.md", "pyproject.toml", "conftest.py")
# Written by a run, not committed: a document may name them though no checkout holds them.
GENERATED = {"reports/allure-results", "reports/allure-report", "reports/matrix.html", "reports/matrix.json",
             "reports/nightly", "cell.json", "final_state.json", "trace.txt", "history.txt", "owner.json",
             "executor.json", "durations.json", "summary.json"}
FILE_SUFFIX = re.compile(r"\.(py|md|toml|ya?ml|json|sql|sh|cfg|ini)$")
CODE_SPAN = re.compile(r"`([^`\s]+)`")


def _expand(path: str) -> list[str]:
    """`chaos/{a,b}.py` -> [`chaos/a.py`, `chaos/b.py`] (one brace group, as the docs write them)."""
    match = re.search(r"\{([^{}]*)\}", path)
    if not match:
        return [path]
    return [out for alt in match.group(1).split(",")
            for out in _expand(path[:match.start()] + alt + path[match.end():])]


def documented_paths() -> list[tuple[str, str]]:
    """(document, path) for every repository path written in a code span of a document."""
    found = []
    for doc in DOCUMENTS:
        for token in CODE_SPAN.findall(doc.read_text()):
            token = token.rstrip(".,:;)")
            if "<" in token or "://" in token or token.startswith(("/", "..", "~")):
                continue  # a placeholder, a URL, a path outside the repository
            if token.startswith(TOP) or token in ROOT_FILES or (FILE_SUFFIX.search(token) and "/" not in token):
                found.extend((doc.name, path) for path in _expand(token))
    return sorted(set(found))


PATHS = documented_paths()
REPO_NAMES = {Path(p).name for p in subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                                                     check=True).stdout.split()} if (ROOT / ".git").exists() else set()


def _exists(path: str) -> bool:
    if Path(path).name in GENERATED or any(path == g or path.startswith(g + "/") for g in GENERATED):
        return True
    if "/" not in path.rstrip("/") and path not in ROOT_FILES:   # a bare file name: somewhere in the repository
        return path in REPO_NAMES or any(ROOT.rglob(path))
    if any(c in path for c in "*?["):
        return any(ROOT.glob(path))
    return (ROOT / path).exists()


def test_the_documents_name_paths():
    assert len(PATHS) >= 30, PATHS  # the extraction itself works


def test_a_missing_path_is_caught():
    assert not _exists("chaos/cluster/proxy_main.py") and not _exists("faults/base.py")
    assert _expand("chaos/expectations/{failover,outbox}.py") == ["chaos/expectations/failover.py",
                                                                  "chaos/expectations/outbox.py"]
    assert _exists("faults/registry.py") and _exists("chaos/proxy/toxics/*.py")


@pytest.mark.parametrize(("doc", "path"), PATHS, ids=[f"{d}:{p}" for d, p in PATHS])
def test_documented_path_exists(doc, path):
    assert _exists(path), f"{doc} names `{path}`, which is not in the repository (moved or renamed?)"


def documented_modules() -> list[tuple[str, str]]:
    """(document, module) for every `python -m <module>` in a document, except `chaos` itself
    (tests/docs/test_doc_commands.py parses those with the CLI's own parser)."""
    found = set()
    for doc in DOCUMENTS:
        for module in re.findall(r"python3? -m ([A-Za-z_][\w.]*)", doc.read_text()):
            if module.startswith("chaos.") or module.startswith("faults."):
                found.add((doc.name, module))
    return sorted(found)


MODULES = documented_modules()


def test_the_documents_show_module_entry_points():
    assert MODULES, "no `python -m chaos.<module>` in the documents: did the extraction break?"


@pytest.mark.parametrize(("doc", "module"), MODULES, ids=[f"{d}:{m}" for d, m in MODULES])
def test_documented_module_entry_point_runs(doc, module):
    """`python -m <module> --help` exits 0: the module exists and is runnable (`-h` is answered
    by argparse before anything starts)."""
    done = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=60,
                          cwd=ROOT)
    assert done.returncode == 0, (f"{doc} shows `python -m {module}`, but `python -m {module} --help` exits "
                                  f"{done.returncode}: {done.stderr[-1500:]}")
    assert "usage" in done.stdout.lower(), f"`python -m {module} --help` prints no usage: {done.stdout[:500]}"
