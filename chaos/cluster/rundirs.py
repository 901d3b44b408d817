"""Cluster dirs under one 0755 base, and the sweep of what dead runs left behind.

The base must be 0755 (user `postgres` must traverse it), so pytest's 0700 tmp dirs
cannot be used. A SIGKILLed run cannot delete its dir: each dir records its owner
(pid + start time) and the servers it started, and the next start anywhere sweeps
dirs whose owner is gone, killing any recorded server that somehow survived.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

MEMORY_BASE = "/dev/shm/chaos-clusters"   # tmpfs: a data dir copy takes 0.09 s there, 0.8-1.8 s on a busy disk
DISK_BASE = "/tmp/chaos-clusters"
MEMORY_MIN_FREE = 1 << 30                 # Docker's default /dev/shm is 64 MB: too small, use the disk
OWNER_FILE = "owner.json"
CACHE_DIR = ".cache"     # dirs starting with "." (the PostgreSQL template cache) are never swept
KEPT_DIR = ".kept"       # run dirs that closed clusters kept (see Cluster.close); the newest KEPT_MAX stay
KEPT_MAX = int(os.environ.get("CHAOS_KEPT_MAX", "50"))
ORPHAN_GRACE_S = 60.0    # a dir without an owner file may be one being created right now


def base_dir() -> Path:
    """$CHAOS_CLUSTER_BASE, else /dev/shm/chaos-clusters if /dev/shm has room, else /tmp/chaos-clusters.

    Created 0755: user `postgres` must be able to traverse it.
    """
    base = Path(os.environ.get("CHAOS_CLUSTER_BASE") or _default_base())
    base.mkdir(parents=True, exist_ok=True)
    os.chmod(base, 0o755)
    return base


def _default_base() -> str:
    try:
        stat = os.statvfs("/dev/shm")
    except OSError:
        return DISK_BASE
    return MEMORY_BASE if stat.f_bavail * stat.f_frsize >= MEMORY_MIN_FREE else DISK_BASE


@dataclass
class ProcessRecord:
    pid: int
    create_time: float
    name: str


@dataclass
class Owner:
    pid: int
    create_time: float
    processes: list[ProcessRecord] = field(default_factory=list)


def _create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _alive(pid: int, create_time: float) -> bool:
    found = _create_time(pid)
    return found is not None and abs(found - create_time) < 0.05


class ClusterDir:
    """One cluster's dir and its owner record (rewritten whenever a server starts)."""

    def __init__(self, path: Path):
        self.path = path
        path.mkdir(mode=0o755, parents=True, exist_ok=True)
        os.chmod(path, 0o755)
        me = os.getpid()
        self.owner = Owner(me, _create_time(me) or 0.0)
        self._save()

    def record(self, pid: int, name: str) -> None:
        self.owner.processes = [p for p in self.owner.processes if p.name != name]
        self.owner.processes.append(ProcessRecord(pid, _create_time(pid) or 0.0, name))
        self._save()

    def _save(self) -> None:
        tmp = self.path / (OWNER_FILE + ".tmp")
        tmp.write_text(json.dumps(asdict(self.owner)))
        tmp.replace(self.path / OWNER_FILE)

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def new_cluster_dir(name: str) -> ClusterDir:
    """A fresh dir for cluster ``name``; sweeps dead runs' dirs first."""
    base = base_dir()
    sweep(base)
    path = base / name
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
    return ClusterDir(path)


def sweep(base: Path | None = None) -> list[Path]:
    """Remove the dirs of runs whose owner died; return what was removed."""
    base = base or base_dir()
    removed = []
    for path in sorted(base.iterdir()):
        if path.name.startswith(".") or not path.is_dir():
            continue
        owner = _read_owner(path)
        if owner is None:
            try:
                fresh = time.time() - path.stat().st_mtime < ORPHAN_GRACE_S
            except FileNotFoundError:
                continue
            if fresh:
                continue
        elif _alive(owner.pid, owner.create_time):
            continue
        else:
            for proc in owner.processes:
                _kill_survivor(proc)
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed + _prune_kept(base / KEPT_DIR)


def _prune_kept(kept: Path) -> list[Path]:
    """Kept run dirs live in memory (/dev/shm) by default: keep only the newest KEPT_MAX."""
    try:
        entries = sorted(kept.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return []
    for old in entries[KEPT_MAX:]:
        shutil.rmtree(old, ignore_errors=True)
    return entries[KEPT_MAX:]


def _read_owner(path: Path) -> Owner | None:
    try:
        data = json.loads((path / OWNER_FILE).read_text())
        return Owner(data["pid"], data["create_time"], [ProcessRecord(**p) for p in data["processes"]])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _kill_survivor(record: ProcessRecord) -> None:
    """SIGKILL a server a dead run started, only if it is provably that same process."""
    if not _alive(record.pid, record.create_time):
        return
    try:
        os.killpg(record.pid, 9)
    except OSError:
        try:
            os.kill(record.pid, 9)
        except OSError:
            pass
