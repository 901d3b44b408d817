"""The sweep removes what dead runs left, and nothing else (pure file-system logic, real processes)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

import pytest

from chaos.errors import BadArguments
from chaos.cluster.rundirs import (ClusterDir, Retention, close_runs_dir, open_runs_dir, process_started, retain,
                                   sweep)

ROOT = Path(__file__).resolve().parents[2]


def dead_pid() -> tuple[int, float]:
    proc = subprocess.Popen(["true"])
    created = process_started(proc.pid)
    proc.wait()
    return proc.pid, created


def test_sweep_removes_dirs_of_dead_owners_and_kills_their_survivors(tmp_path):
    dead = tmp_path / "run1-gw0"
    dead.mkdir()
    survivor = subprocess.Popen(["sleep", "60"], start_new_session=True)
    pid, created = dead_pid()
    owner = {"pid": pid, "create_time": created,
             "processes": [{"pid": survivor.pid, "create_time": process_started(survivor.pid),
                            "name": "redis-a"}]}
    (dead / "owner.json").write_text(json.dumps(owner))
    try:
        assert sweep(tmp_path) == [dead]
        assert not dead.exists()
        assert survivor.wait(5) == -9
    finally:
        if survivor.poll() is None:
            survivor.kill()


def test_sweep_keeps_live_owners_cache_dirs_and_fresh_dirs(tmp_path):
    live = ClusterDir(tmp_path / "run2-gw1")            # owned by this process
    (tmp_path / ".cache").mkdir()
    fresh = tmp_path / "being-created"
    fresh.mkdir()
    assert sweep(tmp_path) == []
    assert live.path.exists() and (tmp_path / ".cache").exists() and fresh.exists()
    old = time.time() - 3600
    os.utime(fresh, (old, old))                          # no owner file for an hour: abandoned
    assert sweep(tmp_path) == [fresh]


def test_sweep_keeps_live_owners_when_the_wall_clock_steps(tmp_path, monkeypatch):
    """psutil's create_time adds /proc/stat's btime, which moves by a whole second when the
    clock is adjusted: every live owner looked dead and the sweep removed running clusters."""
    live = ClusterDir(tmp_path / "run4-gw2")
    server = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        live.record(server.pid, "redis-a")
        if hasattr(psutil, "_pslinux"):
            stepped = psutil._pslinux.boot_time() + 1.0
            monkeypatch.setattr(psutil._pslinux, "boot_time", lambda: stepped)
        assert sweep(tmp_path) == []
        assert live.path.exists() and server.poll() is None
    finally:
        server.kill()
        server.wait()


def test_sweep_never_kills_a_reused_pid(tmp_path):
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        pid, created = dead_pid()
        record = {"pid": stranger.pid, "create_time": process_started(stranger.pid) - 100, "name": "x"}
        (tmp_path / "run3").mkdir()
        (tmp_path / "run3" / "owner.json").write_text(json.dumps({"pid": pid, "create_time": created,
                                                                   "processes": [record]}))
        sweep(tmp_path)
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()


def kept_dirs(base, *specs):
    """`.kept/<name>` dirs of `size` bytes, `age` seconds old: specs are (name, age, size)."""
    for name, age, size in specs:
        path = base / ".kept" / name / "run-0"
        path.mkdir(parents=True)
        (path / "history.jsonl").write_bytes(b"x" * size)
        stamp = time.time() - age
        os.utime(path.parent, (stamp, stamp))
    return base / ".kept"


def test_retention_keeps_the_newest_dirs_by_count(tmp_path):
    kept = kept_dirs(tmp_path, ("new", 0, 10), ("mid", 100, 10), ("old", 200, 10))
    assert retain(tmp_path, Retention(dirs=2)) == [kept / "old"]
    assert sorted(p.name for p in kept.iterdir()) == ["mid", "new"]


def test_retention_drops_what_is_too_old_or_past_the_size_budget(tmp_path):
    mb = 1 << 20
    kept = kept_dirs(tmp_path, ("new", 0, mb), ("mid", 100, mb), ("old", 200, 10), ("ancient", 3 * 86400, 10))
    removed = retain(tmp_path, Retention(dirs=10, max_mb=1.5, max_days=2))
    assert removed == [kept / "mid", kept / "old", kept / "ancient"]   # the newest dirs up to 1.5 MB
    kept2 = kept_dirs(tmp_path / "b", ("huge", 0, 2 * mb))
    assert retain(tmp_path / "b", Retention(max_mb=1)) == [] and (kept2 / "huge").exists(), \
        "the newest dir is never dropped for size"


def test_retention_never_touches_a_live_cluster_s_runs_dir(tmp_path):
    live = open_runs_dir("live-gw0", tmp_path)            # owned by this process
    kept = kept_dirs(tmp_path, ("done", 0, 10))
    assert retain(tmp_path, Retention(dirs=0)) == [kept / "done"]
    assert live.path.exists()
    assert close_runs_dir(live.path, tmp_path) == []      # empty: removed, not "retained"
    assert not live.path.exists()


def test_retention_settings_come_from_the_environment_and_bad_ones_name_the_fix():
    assert Retention.from_env({"CHAOS_KEPT_DIRS": "3", "CHAOS_KEPT_MB": "0.5", "CHAOS_KEPT_DAYS": ""}) == \
        Retention(dirs=3, max_mb=0.5, max_days=Retention().max_days)
    for var, raw in (("CHAOS_KEPT_DIRS", "many"), ("CHAOS_KEPT_MB", "-1"), ("CHAOS_KEPT_DAYS", "a week")):
        with pytest.raises(BadArguments, match=f"{var}='{raw}': give .* or unset it for the default"):
            Retention.from_env({var: raw})   # the CLI's exit 254, before any server starts


def test_owner_record_saved_from_two_threads_at_once(tmp_path):
    """The run's thread and the rig watch may both record a server: neither may rename the
    other's file away (a shared tmp name raised FileNotFoundError)."""
    import threading

    owned = ClusterDir(tmp_path / "run5-gw0")
    errors: list[BaseException] = []

    def record(name: str) -> None:
        try:
            for _ in range(300):
                owned.record(os.getpid(), name)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=record, args=(f"server-{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert json.loads((owned.path / "owner.json").read_text())["pid"] == os.getpid()
    assert sorted(p.name for p in owned.path.iterdir()) == ["owner.json"]


def test_a_runs_dir_opened_while_another_session_retains_gets_its_owner_record(tmp_path):
    """An xdist worker reopens its runs dir (after a rebuild) while another worker closes its own
    and applies the retention: between the mkdir and the owner record the dir is ownerless and
    empty, and that retention removed it, so the record's write failed (FileNotFoundError in a
    quiet `-n 6` run). Another process retains with a policy that keeps nothing, in a loop,
    while this one opens 1,500 runs dirs: each must end owned by this process."""
    retainer = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from chaos.cluster.rundirs import Retention, retain\n"
        "base, end = Path(sys.argv[1]), time.monotonic() + 30\n"
        "print('ready', flush=True)\n"
        "while time.monotonic() < end and not (base / 'stop').exists():\n"
        "    retain(base, Retention(dirs=0))\n"), str(tmp_path)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert retainer.stdout.readline().strip() == "ready"
        for i in range(1500):
            owned = open_runs_dir(f"race-{i}-gw0", tmp_path)       # raised before the fix
            owner = json.loads((owned.path / "owner.json").read_text())
            assert owner["pid"] == os.getpid()
    finally:
        (tmp_path / "stop").touch()
        retainer.wait(timeout=60)
