"""Parameters are explicit: the backend, topology, server and load size are read from the
environment at the edges only and passed on as values below them (a CellSpec's fields, a
cluster's `backend`/`topology_text`/`server`, ChaosOptions, a WorkerSpec across the fork
server). A module below an edge that read $CHAOS_TOPOLOGY itself would make a cell depend on
the shell it runs in, and its replay on a shell the user no longer has.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAMES = {"CHAOS_BACKEND", "CHAOS_TOPOLOGY", "CHAOS_SERVER", "CHAOS_LOAD_SIZE"}
EDGES = {
    "chaos/cluster/__init__.py": "backend configuration: `configured`, the one reader of the backend, topology and server",
    "chaos/pytest_plugin/core.py": "the plugin's options -> ChaosOptions",
    "chaos/pytest_plugin/exported.py": "the plugin's options exported for xdist workers and the processes tests start",
}
# the modules whose constants spell those names (imported as ENV, SERVER_ENV, ...)
SPELLERS = ("chaos.cluster", "chaos.cluster.servers", "chaos.cluster.sentinel", "chaos.replay",
            "chaos.expectations.load", "chaos.pytest_plugin.exported")


def _reads_environment(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "putenv") \
                and isinstance(node.value, ast.Name) and node.value.id == "os":
            return True
    return False


def _names_a_variable(tree: ast.AST) -> set[str]:
    named = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value in NAMES}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in SPELLERS:
            named |= {f"{node.module}.{a.name}" for a in node.names if a.name == "ENV" or a.name.endswith("_ENV")}
    return named


def offenders() -> list[str]:
    found = []
    for folder in ("chaos", "faults"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"), name)
            named = _names_a_variable(tree)
            if named and _reads_environment(tree) and name not in EDGES:
                found.append(f"{name}: {', '.join(sorted(named))}")
    return found


def test_the_backend_topology_server_and_size_are_read_at_the_edges_only() -> None:
    bad = offenders()
    assert not bad, ("read at an edge (chaos.cluster.configured, the plugin's ChaosOptions, the CLI's args) and "
                     "pass the value on, or add the module to EDGES with the reason it is an edge:\n" + "\n".join(bad))


def test_every_edge_still_reads_one() -> None:
    """An edge that no longer reads any of them would keep an allowance nobody needs."""
    stale = [name for name in EDGES if not (_names_a_variable(tree := ast.parse((ROOT / name).read_text()))
                                            and _reads_environment(tree))]
    assert not stale, f"drop these from EDGES: {stale}"


def test_the_rule_finds_a_deep_read() -> None:
    """The rule can fail: a module that reads $CHAOS_TOPOLOGY itself is named."""
    tree = ast.parse('import os\nTOPOLOGY = os.environ.get("CHAOS_TOPOLOGY")\n')
    assert _reads_environment(tree) and _names_a_variable(tree) == {"CHAOS_TOPOLOGY"}
    tree = ast.parse('import os\nfrom chaos.cluster.servers import ENV as SERVER_ENV\nos.environ.get(SERVER_ENV)\n')
    assert _reads_environment(tree) and _names_a_variable(tree) == {"chaos.cluster.servers.ENV"}
