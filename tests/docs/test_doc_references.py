"""What the README and docs/ point a reader at exists: the files they name, the
`python -m <module>` entry points they show, the `chaos.x.y` names and the import lines of
their Python examples, the `--chaos-*` pytest options, the `CHAOS_*` variables and the
paths their `pytest` commands run.

All are read out of the documents themselves (not listed here), so a moved module, a
deleted entry point, a renamed option or test file fails here before a reader follows it.
(`python -m chaos ...` commands are parsed by the CLI's own parser in test_doc_commands.py.)
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]

# Top-level entries a path written in a document may start with.
TOP = ("chaos/", "faults/", "suites/", "tests/", "docs/", "examples/", "bench/", "compose/", "scripts/",
       "reports/", ".github/", ".ci/")
ROOT_FILES = ("README.md", "CONTRIBUTING.md", "CHANGELOG.md", "LICENSE", "pyproject.toml", "conftest.py")
# Written by a run, not committed: a document may name them though no checkout holds them.
GENERATED = {"reports/allure-results", "reports/allure-report", "reports/matrix.html", "reports/matrix.json",
             "reports/nightly", "cell.json", "final_state.json", "trace.txt", "history.txt", "owner.json",
             "executor.json", "durations.json", "summary.json", "reports/scorecard", "scorecard.json"}
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


def _code_blocks(text: str, lang: str = "[a-z]*") -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def documented_names() -> list[tuple[str, str]]:
    """(document, dotted name) for every `chaos.x.y` / `faults.x.y` code span (a call's
    arguments dropped): a module, or an attribute of one."""
    found = set()
    for doc in DOCUMENTS:
        for name in re.findall(r"`((?:chaos|faults)(?:\.\w+)+)(?:\([^`]*\))?`", doc.read_text()):
            found.add((doc.name, name))
    return sorted(found)


NAMES = documented_names()


def _resolve(name: str) -> object:
    """The module or attribute `name` names; raises when neither exists."""
    import importlib
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(name)


def test_a_missing_name_is_caught():
    assert _resolve("chaos.run.Phase") is not None
    with pytest.raises((ModuleNotFoundError, AttributeError)):
        _resolve("faults.base.Fault")
    with pytest.raises((ModuleNotFoundError, AttributeError)):
        _resolve("chaos.run.NoSuchThing")


@pytest.mark.parametrize(("doc", "name"), NAMES, ids=[f"{d}:{n}" for d, n in NAMES])
def test_documented_name_resolves(doc, name):
    try:
        _resolve(name)
    except (ImportError, AttributeError) as exc:
        pytest.fail(f"{doc} names `{name}`, which does not resolve ({exc!r}): moved or renamed?")


def documented_imports() -> list[tuple[str, str]]:
    """(document, line) for every `from chaos... import ...` / `from faults...` line of a python block."""
    found = set()
    for doc in DOCUMENTS:
        for block in _code_blocks(doc.read_text(), "python"):
            for line in block.splitlines():
                if re.match(r"(from|import) (chaos|faults)\b", line.strip()):
                    found.add((doc.name, line.strip()))
    return sorted(found)


IMPORTS = documented_imports()


@pytest.mark.parametrize(("doc", "line"), IMPORTS, ids=[f"{d}:{line}" for d, line in IMPORTS])
def test_documented_import_works(doc, line):
    try:
        exec(line, {})  # noqa: S102 - an import line taken from our own documents
    except ImportError as exc:
        pytest.fail(f"{doc}: `{line}` fails: {exc}")


def _documented(pattern: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for doc in DOCUMENTS:
        for match in re.findall(pattern, doc.read_text()):
            found.setdefault(match, set()).add(doc.name)
    return found


def test_documented_pytest_options_exist():
    """Every `--chaos-*` option a document names is one `pytest --help` lists."""
    options = _documented(r"(--chaos-[a-z][a-z-]*[a-z])")
    assert options, "no --chaos-* option in the documents: did the extraction break?"
    done = subprocess.run([sys.executable, "-m", "pytest", "--help"], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-1500:]
    missing = {o: sorted(d) for o, d in options.items() if not re.search(rf"{re.escape(o)}\b", done.stdout)}
    assert not missing, f"options the documents name that pytest does not have: {missing}"


def test_documented_environment_variables_are_read_somewhere():
    """Every `CHAOS_*` variable a document names appears in the code (or the CI and set-up scripts)."""
    variables = _documented(r"\b(CHAOS_[A-Z0-9_]*[A-Z0-9])\b")
    assert variables
    code = "\n".join(p.read_text(errors="replace") for top in ("chaos", "faults", "scripts", "examples", ".github")
                     for p in (ROOT / top).rglob("*") if p.is_file() and p.suffix in (".py", ".sh", ".yml", ".toml"))
    missing = {v: sorted(d) for v, d in variables.items() if v not in code}
    assert not missing, f"variables the documents name that no code reads: {missing}"


def documented_test_paths() -> list[tuple[str, str]]:
    """(document, path) for every path a `pytest ...` command in a document runs."""
    found = set()
    for doc in DOCUMENTS:
        text = doc.read_text()
        lines = [line for block in _code_blocks(text) for line in block.replace("\\\n", " ").splitlines()]
        lines += re.findall(r"`([^`]*pytest [^`]*)`", text)
        for line in lines:
            match = re.search(r"\bpytest (.*)$", line.split("  #", 1)[0])
            for token in (match.group(1).split() if match else []):
                token = token.rstrip(",;").split("::", 1)[0]
                if token.startswith(("suites", "tests", "examples", "bench")) and "$" not in token:
                    found.add((doc.name, token))
    return sorted(found)


TEST_PATHS = documented_test_paths()


@pytest.mark.parametrize(("doc", "path"), TEST_PATHS, ids=[f"{d}:{p}" for d, p in TEST_PATHS])
def test_documented_pytest_path_exists(doc, path):
    assert (ROOT / path).exists(), f"{doc} runs `pytest {path}`, which does not exist"


def test_section_references_point_at_sections():
    """`docs/INTERFACES.md section N` written in code or docs names a section that exists."""
    headings = set(re.findall(r"^## (\d+)\. ", (ROOT / "docs" / "INTERFACES.md").read_text(), flags=re.M))
    refs = []
    for top in ("chaos", "faults", "docs", "tests", "suites"):
        for path in (ROOT / top).rglob("*"):
            if path.suffix in (".py", ".md") and path.is_file():
                refs += [(str(path.relative_to(ROOT)), n)
                         for n in re.findall(r"INTERFACES\.md,? section (\d+)", path.read_text(errors="replace"))]
    assert refs, "no section reference found: did the extraction break?"
    bad = [(path, n) for path, n in refs if n not in headings]
    assert not bad, f"references to sections docs/INTERFACES.md does not have ({sorted(headings)}): {bad}"


def readme_layout() -> list[str]:
    """The paths of the README's Layout block: top-level entries, and entries indented under
    the `chaos/` line as paths inside it."""
    text = (ROOT / "README.md").read_text().split("## Layout", 1)[1]
    block = re.search(r"```\n(.*?)```", text, flags=re.S).group(1)
    paths, parent = [], ""
    for line in block.splitlines():
        match = re.match(r"( {0,2})(\S+)\s", line + " ")
        if not match or "/" not in match.group(2) and "." not in match.group(2):
            continue  # a continuation of the previous line's description (indented further)
        name = match.group(2)
        if match.group(1):
            paths.append(parent + name)
        else:
            parent = name if name.endswith("/") else ""
            paths.append(name)
    return paths


def test_readme_layout_names_what_exists():
    paths = readme_layout()
    assert "chaos/" in paths and "chaos/run.py" in paths, paths
    missing = [p for p in paths if not any(ROOT.glob(p.rstrip("/")))]
    assert not missing, f"README's Layout names {missing}, which are not in the repository"
    packages = {f"chaos/{p.parent.name}/" for p in (ROOT / "chaos").glob("*/__init__.py")}
    unlisted = sorted(packages - set(paths))
    assert not unlisted, f"README's Layout does not list the packages {unlisted}"
