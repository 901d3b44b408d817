"""The house's layering, read from the code's own imports (ast, every import counts: at the
top, inside a function, under TYPE_CHECKING).

Layers point down: errors, params and events at the bottom; cluster and proxy; workload
and strategies; faults; the orchestrator and the checker; plugin, CLI and reports on top.
These tests fail on the first import that breaks a rule, naming the file and the line.
"""
from __future__ import annotations

import ast
import functools
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("chaos", "faults")


@dataclass(frozen=True)
class Import:
    path: str      # importing file, relative to the repository
    line: int
    module: str    # the imported module (for `from a import b`: a.b when a.b is a module, else a)

    def __str__(self) -> str:
        return f"{self.path}:{self.line} imports {self.module}"


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


@functools.lru_cache(maxsize=None)
def imports() -> tuple[Import, ...]:
    """Every import of a module of this repository by a file under chaos/ or faults/. Parsed
    once per process (each parse of chaos/ and faults/ is ~0.7 CPU s; ten tests read it)."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = _module_of(path)
            here = module if path.name == "__init__.py" else module.rpartition(".")[0]
            rel = str(path.relative_to(ROOT))
            for node in ast.walk(ast.parse(path.read_text(), rel)):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    if node.level:
                        anchor = here.split(".")[: len(here.split(".")) - node.level + 1]
                        base = ".".join(anchor + ([node.module] if node.module else []))
                    subs = [f"{base}.{a.name}" for a in node.names if _is_module(f"{base}.{a.name}")]
                    names = subs or [base]
                for name in names:
                    if name.split(".")[0] in PACKAGES and name != module:
                        found.append(Import(rel, node.lineno, name))
    return tuple(found)


def unit(module: str) -> str:
    """The part of the house a module belongs to: `faults`, `chaos.<subpackage>` or `chaos.<module>`."""
    parts = module.split(".")
    return "faults" if parts[0] == "faults" else ".".join(parts[:2])


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


# The layer table of docs/INTERFACES.md section 0, bottom first: a part may import its own
# layer and those below it, never one above. A new part gets its row here and there.
LAYERS: dict[str, tuple[str, ...]] = {
    "bottom": ("chaos.errors", "chaos.params", "chaos.events", "chaos.results", "chaos.history", "chaos.trace",
               "chaos.replay", "chaos.cellspec", "chaos.encoders", "chaos.vanished", "chaos.extensions"),
    "servers": ("chaos.proxy", "chaos.cluster"),
    "worker side": ("chaos.strategies", "chaos.workload"),
    "faults": ("faults",),
    "judging and running": ("chaos.checker", "chaos.checkstore", "chaos.unknown_applies", "chaos.expectations",
                            "chaos.orchestrator", "chaos.run", "chaos.blackbox"),
    "top": ("chaos.cellrun", "chaos.plugin", "chaos.pytest_plugin", "chaos.report", "chaos.cli", "chaos.__main__",
            "chaos.mutants", "chaos.scorecard", "chaos.blackbox.pytest_api"),
}
RANK = {part: rank for rank, parts in enumerate(LAYERS.values()) for part in parts}


def layer_rank(module: str, rank: dict[str, int]) -> int | None:
    """The layer of a module: its longest prefix in the table (a module may sit above its package)."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in rank:
            return rank[".".join(parts[:n])]
    return None


def upward(found: Iterable[Import], rank: dict[str, int]) -> list[str]:
    """The imports that point to a higher layer than their own part's."""
    bad = []
    names = list(LAYERS)
    for i in found:
        a, b = layer_rank(_module_of(ROOT / i.path), rank), layer_rank(i.module, rank)
        if a is not None and b is not None and b > a:
            bad.append(f"{i} ({names[a]} -> {names[b]})")
    return bad


def test_every_part_has_a_layer() -> None:
    parts = {unit(_module_of(ROOT / i.path)) for i in imports()} | {unit(i.module) for i in imports()}
    missing = sorted(parts - set(RANK) - {"chaos"})
    assert not missing, ("parts with no row in the layer table (docs/INTERFACES.md section 0 and LAYERS "
                         f"here): {missing}")


def test_every_import_points_down_the_layer_table() -> None:
    bad = upward(imports(), RANK)
    assert not bad, "imports that point up the layer table:\n" + "\n".join(bad)


def test_the_layer_rule_finds_an_upward_import() -> None:
    """The rule above can fail: a results-leaf import of the checker is named, the reverse is not."""
    up = Import("chaos/results.py", 1, "chaos.checker")
    down = Import("chaos/checker.py", 1, "chaos.results")
    assert upward([up, down], RANK) == ["chaos/results.py:1 imports chaos.checker (bottom -> judging and running)"]


def test_nothing_below_the_cli_imports_it() -> None:
    bad = [i for i in imports() if _within(i.module, "chaos.cli") and not i.path.startswith("chaos/cli/")
           and i.path != "chaos/__main__.py"]
    assert not bad, "the CLI is the top floor; move what these need below it:\n" + "\n".join(map(str, bad))


def test_faults_know_neither_the_orchestrator_nor_the_expectations() -> None:
    bad = [i for i in imports() if i.path.startswith("faults/")
           and any(_within(i.module, m) for m in ("chaos.run", "chaos.orchestrator", "chaos.expectations"))]
    assert not bad, "a fault knows the fault interface and the cluster only:\n" + "\n".join(map(str, bad))


def test_strategies_do_not_import_the_workload() -> None:
    bad = [i for i in imports() if i.path.startswith("chaos/strategies/") and _within(i.module, "chaos.workload")]
    assert not bad, ("workload processes use strategies, not the other way round; move what a strategy "
                     "needs into chaos/strategies/ or below:\n" + "\n".join(map(str, bad)))


def test_reports_do_not_import_worker_modules() -> None:
    bad = [i for i in imports() if i.path.startswith("chaos/report/") and _within(i.module, "chaos.workload")]
    assert not bad, "reports read results and histories, not worker modules:\n" + "\n".join(map(str, bad))


def test_the_results_leaf_imports_nothing_of_the_house() -> None:
    bad = [i for i in imports() if i.path == "chaos/results.py"]
    assert not bad, ("chaos/results.py holds the result records at the bottom; it imports nothing of "
                     "the project:\n" + "\n".join(map(str, bad)))


def test_workers_do_not_import_the_checker() -> None:
    bad = [i for i in imports() if i.path.startswith("chaos/workload/") and _within(i.module, "chaos.checker")]
    assert not bad, ("worker processes write records (chaos.results), they never load the checker:\n"
                     + "\n".join(map(str, bad)))


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return out


def test_no_import_cycles_between_parts_of_the_house() -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    ties: dict[tuple[str, str], list[Import]] = defaultdict(list)
    for i in imports():
        a, b = unit(_module_of(ROOT / i.path)), unit(i.module)
        if a != b and b != "chaos":
            edges[a].add(b)
            ties[a, b].append(i)
    cycles = _cycles(edges)
    text = []
    for cycle in cycles:
        members = set(cycle)
        text.append(" <-> ".join(cycle) + ":\n" + "\n".join(
            f"  {i}" for (a, b), found in sorted(ties.items()) if a in members and b in members for i in found))
    assert not cycles, "parts of the house that import each other:\n" + "\n".join(text)


def test_no_import_cycles_between_modules() -> None:
    """Within a part too: two modules that import each other (even for a type only, under
    TYPE_CHECKING) are one module in two files; move what both need into a third."""
    edges: dict[str, set[str]] = defaultdict(set)
    for i in imports():
        edges[_module_of(ROOT / i.path)].add(i.module)
    cycles = _cycles(edges)
    assert not cycles, "modules that import each other: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The rule above can fail: a two-part loop and a three-part loop are found, a chain is not."""
    assert _cycles({"a": {"b"}, "b": {"a"}}) == [["a", "b"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": {"c"}}) == []


def docs_layers() -> dict[str, tuple[str, ...]]:
    """docs/INTERFACES.md section 0's table: layer -> the parts named (`chaos/x.py`, `chaos/x/`) as modules,
    in the order written; words in parentheses are the row's notes, not parts."""
    text = (ROOT / "docs" / "INTERFACES.md").read_text(encoding="utf-8")
    section = text.split("## 0. Layers", 1)[1].split("\n## ", 1)[0]
    table: dict[str, tuple[str, ...]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or cells[0] in ("layer", "---"):
            continue
        depth, parts = 0, []
        for piece in re.split(r"(\(|\)|`[^`]+`)", cells[1]):
            depth += (piece == "(") - (piece == ")")
            if depth == 0 and piece.startswith(("`chaos/", "`faults/")):
                parts.append(piece.strip("`").removesuffix("/").removesuffix(".py").replace("/", "."))
        table[cells[0]] = tuple(parts)
    return table


def test_the_docs_layer_table_is_this_table() -> None:
    """LAYERS is docs/INTERFACES.md section 0, row for row and part for part: the table the
    docs show is the one every import is checked against."""
    documented = docs_layers()
    assert list(documented) == list(LAYERS), f"layers in the docs {list(documented)} != here {list(LAYERS)}"
    for layer, parts in LAYERS.items():
        assert sorted(documented[layer]) == sorted(parts), (
            f"layer {layer!r}: docs/INTERFACES.md names {sorted(documented[layer])}, "
            f"tests/structure/test_layers.py LAYERS {sorted(parts)}; make them one table")
