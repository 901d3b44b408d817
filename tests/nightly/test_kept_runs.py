"""Kept run dirs on real sessions: a failing cell's dirs stay where its message says, a passing
cell's go (unless --chaos-keep-runs), and the retention bounds what piles up over sessions."""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from .helpers import run_pytest

CELLS = '''
from chaos.run import run_cell

def test_passing_cell(chaos_reset_cluster):
    cell = run_cell(chaos_reset_cluster, "baseline", runs=1, time_scale=0.2, keep_runs="always")
    assert cell.run_dirs[0].is_dir()
    print("PASSING ROOT", cell.run_root)

def test_failing_cell(chaos_reset_cluster):
    cell = run_cell(chaos_reset_cluster, "baseline", runs=1, time_scale=0.2, keep_runs="always")
    assert cell.counts.lost == -1, f"run dirs: {cell.run_root}"
'''


@pytest.fixture(scope="module")
def cluster_base():
    """A base of its own (0755, as `postgres` must traverse it), so these tests' retention
    never prunes what other sessions on the machine keep (one per module: one template build)."""
    base = Path(tempfile.mkdtemp(prefix="chaos-kept-test-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    os.chmod(base, 0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def session(tmp_path: Path, base: Path, *args: str, **env: str) -> tuple[str, list[Path]]:
    """Run the two cells in a child pytest; its output and the run dirs its failure names."""
    (tmp_path / "test_cells.py").write_text(CELLS)
    proc = run_pytest("-p", "no:cacheprovider", "-s", "test_cells.py", *args, cwd=tmp_path, timeout=300,
                      env={"CHAOS_CLUSTER_BASE": str(base), **env})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "1 failed, 1 passed" in out, out[-3000:]
    named = re.search(r"AssertionError: run dirs: (\S+)", out)
    assert named, out[-3000:]
    section = out.split("chaos run dirs (kept)", 1)[1].split("\n=", 1)[0]
    return out, [Path(named.group(1)), *[Path(line) for line in section.split() if line.startswith("/")]]


def observe(folder: Path, base: Path, *args: str, **env: str) -> dict:
    """One session of the two cells, and what it left, looked at right after it ended."""
    out, (named, *listed) = session(folder, base, *args, **env)
    passing = Path(re.search(r"PASSING ROOT (\S+)", out).group(1))
    return {"named": str(named), "listed": [str(p) for p in listed], "named_is_dir": named.is_dir(),
            "histories": bool(list(named.rglob("*.jsonl"))), "session_dir": sorted(p.name for p in named.parent.iterdir()),
            "passing_is_dir": passing.is_dir(), "cluster_dirs": [p.name for p in base.iterdir() if not p.name.startswith(".")]}


@pytest.fixture
def three_sessions(shared_once) -> dict:
    """Three sessions in one base, run once for the three tests that read them (each session
    starts a topology: seconds of CPU): plain, with --chaos-keep-runs, then with
    CHAOS_KEPT_DIRS=2, which must prune the first one's dirs."""
    def build(folder: Path) -> dict:
        base = Path(tempfile.mkdtemp(prefix="chaos-kept-test-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
        os.chmod(base, 0o755)
        try:
            seen = {"base": str(base), "plain": observe(folder, base), "keep": observe(folder, base, "--chaos-keep-runs"),
                    "bounded": observe(folder, base, CHAOS_KEPT_DIRS="2")}
            seen["kept_after"] = sorted(p.name for p in (base / ".kept").iterdir())
            return seen
        finally:
            shutil.rmtree(base, ignore_errors=True)
    return shared_once("kept-runs-sessions", build)


def test_a_failing_cell_keeps_its_dirs_where_the_message_says_and_a_passing_cell_keeps_none(three_sessions):
    plain = three_sessions["plain"]
    named = Path(plain["named"])
    assert plain["listed"] == [plain["named"]]
    assert plain["named_is_dir"] and named.parent.parent == Path(three_sessions["base"]) / ".kept"  # after the session ended
    assert plain["histories"], "the failed run's history is there"
    assert not plain["passing_is_dir"]
    assert plain["session_dir"] == [named.name], "only the failure's dirs, no owner file"
    assert plain["cluster_dirs"] == [], "cluster dirs are gone"


def test_a_session_of_passing_cells_keeps_nothing(tmp_path, cluster_base):
    """Under xdist (the same without xdist: test_a_suite_with_its_own_cluster_keeps_no_passing_dirs,
    and the passing cell of test_a_failing_cell_keeps_its_dirs_...)."""
    (tmp_path / "test_cells.py").write_text(CELLS)
    before = set((cluster_base / ".kept").iterdir()) if (cluster_base / ".kept").exists() else set()
    proc = run_pytest("-p", "no:cacheprovider", "test_cells.py", "-k", "passing", "-n", "2", cwd=tmp_path,
                      timeout=300, env={"CHAOS_CLUSTER_BASE": str(cluster_base)})
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert set((cluster_base / ".kept").iterdir()) == before


OWN_TOPOLOGY = '''
import pytest
from chaos.cluster import start_cluster
from chaos.pytest_plugin.core import cluster_name

@pytest.fixture(scope="session")
def chaos_cluster(pytestconfig, chaos_options):
    """A suite with a topology of its own, named like suites/sentinel's: <this name>-<topology>."""
    cluster = start_cluster(chaos_options.backend, f"{cluster_name(pytestconfig)}-own")
    try:
        yield cluster
    finally:
        cluster.close()
'''


def test_a_suite_with_its_own_cluster_keeps_no_passing_dirs(tmp_path, cluster_base):
    """suites/sentinel's cluster is `<name>-sentinel`: its passing cells' dirs were left behind."""
    (tmp_path / "test_cells.py").write_text(CELLS)
    (tmp_path / "conftest.py").write_text(OWN_TOPOLOGY)
    before = set((cluster_base / ".kept").iterdir()) if (cluster_base / ".kept").exists() else set()
    proc = run_pytest("-p", "no:cacheprovider", "-s", "test_cells.py", "-k", "passing", cwd=tmp_path,
                      timeout=300, env={"CHAOS_CLUSTER_BASE": str(cluster_base)})
    assert proc.returncode == 0, proc.stdout[-3000:]
    passing = Path(re.search(r"PASSING ROOT (\S+)", proc.stdout).group(1))
    assert passing.parent.name.endswith("-own"), passing
    assert not passing.exists()
    assert set((cluster_base / ".kept").iterdir()) == before


def test_keep_runs_keeps_a_passing_cell_s_dirs(three_sessions):
    keep = three_sessions["keep"]
    assert keep["passing_is_dir"] and keep["named_is_dir"]


def test_retention_bounds_what_sessions_keep(three_sessions):
    first, second, third = (Path(three_sessions[k]["named"]).parent for k in ("plain", "keep", "bounded"))
    assert three_sessions["keep"]["named_is_dir"] and three_sessions["bounded"]["named_is_dir"]
    assert three_sessions["kept_after"] == sorted([second.name, third.name])
    assert first.name not in three_sessions["kept_after"]


def test_a_bad_retention_setting_is_a_usage_error_before_anything_starts(tmp_path, cluster_base):
    (tmp_path / "test_cells.py").write_text(CELLS)
    proc = run_pytest("-p", "no:cacheprovider", "test_cells.py", cwd=tmp_path,
                      env={"CHAOS_CLUSTER_BASE": str(cluster_base), "CHAOS_KEPT_MB": "lots"})
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR
    assert "CHAOS_KEPT_MB='lots': give a number >= 0" in proc.stderr
    assert [p for p in cluster_base.iterdir() if not p.name.startswith(".")] == [], "no cluster was started"
