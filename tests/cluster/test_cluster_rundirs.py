"""The sweep removes what dead runs left, and nothing else (pure file-system logic, real processes)."""
from __future__ import annotations

import json
import os
import subprocess
import time

import psutil

from chaos.cluster.rundirs import ClusterDir, sweep


def dead_pid() -> tuple[int, float]:
    proc = subprocess.Popen(["true"])
    created = psutil.Process(proc.pid).create_time()
    proc.wait()
    return proc.pid, created


def test_sweep_removes_dirs_of_dead_owners_and_kills_their_survivors(tmp_path):
    dead = tmp_path / "run1-gw0"
    dead.mkdir()
    survivor = subprocess.Popen(["sleep", "60"], start_new_session=True)
    pid, created = dead_pid()
    owner = {"pid": pid, "create_time": created,
             "processes": [{"pid": survivor.pid, "create_time": psutil.Process(survivor.pid).create_time(),
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


def test_sweep_never_kills_a_reused_pid(tmp_path):
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        pid, created = dead_pid()
        record = {"pid": stranger.pid, "create_time": psutil.Process(stranger.pid).create_time() - 100, "name": "x"}
        (tmp_path / "run3").mkdir()
        (tmp_path / "run3" / "owner.json").write_text(json.dumps({"pid": pid, "create_time": created,
                                                                   "processes": [record]}))
        sweep(tmp_path)
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()


def test_kept_run_dirs_are_capped_newest_first(tmp_path, monkeypatch):
    import chaos.cluster.rundirs as rundirs
    monkeypatch.setattr(rundirs, "KEPT_MAX", 2)
    kept = tmp_path / ".kept"
    for age, name in enumerate(["new", "mid", "old"]):
        (kept / name).mkdir(parents=True)
        stamp = time.time() - 100 * age
        os.utime(kept / name, (stamp, stamp))
    assert sweep(tmp_path) == [kept / "old"]
    assert sorted(p.name for p in kept.iterdir()) == ["mid", "new"]
