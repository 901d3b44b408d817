"""Cluster dirs under one 0755 base, the sweep of what dead runs left behind, and the
retention of kept run dirs.

The base must be 0755 (user `postgres` must traverse it), so pytest's 0700 tmp dirs
cannot be used. A SIGKILLed run cannot delete its dir: each dir records its owner
(pid + start time) and the servers it started, and the next start anywhere sweeps
dirs whose owner is gone, killing any recorded server that somehow survived.

Run dirs (histories, worker logs) go to ``<base>/.kept/<cluster>/`` from the start, so the
path a failure message names stays valid after the session. What passed is removed by its
runner (and by the plugin's per-test tidy); what is left is bounded by ``retain``: the newest
CHAOS_KEPT_DIRS cluster dirs, at most CHAOS_KEPT_MB in all, none older than CHAOS_KEPT_DAYS
(the base is RAM on /dev/shm). It runs at every cluster start and close. The CLI's runs root
(``--run-dir``, $CHAOS_RUNS_DIR, <tmp>/chaos-runs) is bounded by the same policy after every cell
(``retain_kept``, one function for both roots).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Iterable, Mapping

import psutil

from chaos.errors import BadArguments

MEMORY_BASE = "/dev/shm/chaos-clusters"   # tmpfs: a data dir copy takes 0.09 s there, 0.8-1.8 s on a busy disk
DISK_BASE = "/tmp/chaos-clusters"
MEMORY_MIN_FREE = 1 << 30                 # Docker's default /dev/shm is 64 MB: too small, use the disk
OWNER_FILE = "owner.json"
CACHE_DIR = ".cache"     # dirs starting with "." (the PostgreSQL template cache) are never swept
KEPT_DIR = ".kept"       # run dirs, one dir per cluster (see runs_dir); bounded by Retention
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
    create_time: float     # process_started(pid): seconds since boot
    name: str


@dataclass
class Owner:
    pid: int
    create_time: float     # process_started(pid): seconds since boot
    processes: list[ProcessRecord] = field(default_factory=list)


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_started(pid: int) -> float | None:
    """When ``pid`` started, in seconds since boot (None when it is gone): with the pid, a
    process's identity.

    Read from /proc/<pid>/stat's start time in clock ticks, which never changes. Not psutil's
    create_time(): that adds /proc/stat's btime, a whole second recomputed from the wall clock,
    which steps by 1 s when the clock is adjusted; every live owner then looked dead and the
    sweep removed the dirs of running clusters (PostgreSQL: "could not open file
    global/pg_filenode.map"). Elsewhere than Linux, psutil's time.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return int(fields[19]) / _CLOCK_TICKS      # field 22, starttime; fields[0] is field 3
    except FileNotFoundError:
        return None
    except (OSError, IndexError, ValueError):
        pass
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def same_process(pid: int, started: float) -> bool:
    """``pid`` is still the process that `process_started` described as `started`."""
    found = process_started(pid)
    return found is not None and abs(found - started) < 0.005



class ClusterDir:
    """One cluster's dir and its owner record (rewritten whenever a server starts)."""

    def __init__(self, path: Path):
        self.path = path
        me = os.getpid()
        self.owner = Owner(me, process_started(me) or 0.0)
        self._save()

    def _create(self) -> None:
        """Make the dir with its owner record already in it: made under a dot-name (which no
        `retain` or sweep touches) and renamed into place, so another session never sees it
        ownerless and empty, which its retention removes. A dir already there (a reopen after a
        rebuild) is kept as it is and gets the record."""
        tmp = self.path.parent / f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.new"
        tmp.mkdir(mode=0o755, parents=True, exist_ok=True)
        os.chmod(tmp, 0o755)
        (tmp / OWNER_FILE).write_text(json.dumps(asdict(self.owner)))
        try:
            tmp.rename(self.path)
        except OSError:          # the dir is there, with what it keeps
            shutil.rmtree(tmp, ignore_errors=True)

    def record(self, pid: int, name: str) -> None:
        self.owner.processes = [p for p in self.owner.processes if p.name != name]
        self.owner.processes.append(ProcessRecord(pid, process_started(pid) or 0.0, name))
        self._save()

    def _save(self) -> None:
        # a name of its own per writer: two threads (or a process and its child) saving at once
        # must not rename each other's file away
        tmp = self.path / f"{OWNER_FILE}.{os.getpid()}.{threading.get_ident()}.tmp"
        for attempt in range(3):
            if not self.path.is_dir():
                self._create()
            try:
                tmp.write_text(json.dumps(asdict(self.owner)))
                tmp.replace(self.path / OWNER_FILE)
                return
            except FileNotFoundError:
                # The dir went between the look and the write (a retention that had read it
                # ownerless just before): make it again, record first.
                if attempt == 2:
                    raise

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
        elif same_process(owner.pid, owner.create_time):
            continue
        else:
            for proc in owner.processes:
                _kill_survivor(proc)
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed + retain(base)


def _read_owner(path: Path) -> Owner | None:
    try:
        data = json.loads((path / OWNER_FILE).read_text())
        return Owner(data["pid"], data["create_time"], [ProcessRecord(**p) for p in data["processes"]])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _kill_survivor(record: ProcessRecord) -> None:
    """SIGKILL a server a dead run started, only if it is provably that same process."""
    if not same_process(record.pid, record.create_time):
        return
    try:
        os.killpg(record.pid, 9)
    except OSError:
        try:
            os.kill(record.pid, 9)
        except OSError:
            pass


# ---------------------------------------------------------------------------------------------
# kept run dirs and their retention
# ---------------------------------------------------------------------------------------------
class BadRetention(BadArguments, ValueError):
    """A CHAOS_KEPT_* variable that is not a number >= 0 (the CLI exits 254, pytest a usage error)."""


@dataclass(frozen=True)
class Retention:
    """How much of ``<base>/.kept`` survives: the newest `dirs` cluster dirs, at most `max_mb`
    in all (the newest is never dropped for size), none older than `max_days`."""

    dirs: int = 20
    max_mb: float = 256.0
    max_days: float = 7.0

    ENV: ClassVar[dict[str, str]] = {"dirs": "CHAOS_KEPT_DIRS", "max_mb": "CHAOS_KEPT_MB",
                                     "max_days": "CHAOS_KEPT_DAYS"}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Retention":
        """The defaults, overridden by CHAOS_KEPT_DIRS / CHAOS_KEPT_MB / CHAOS_KEPT_DAYS; a bad
        value raises BadRetention naming the variable and what to give."""
        env = os.environ if environ is None else environ
        values: dict[str, float] = {}
        for name, var in cls.ENV.items():
            raw = env.get(var)
            if raw is None or raw == "":
                continue
            try:
                value = int(raw) if name == "dirs" else float(raw)
            except ValueError:
                value = -1
            if value < 0:
                kind = "a whole number" if name == "dirs" else "a number"
                raise BadRetention(f"{var}={raw!r}: give {kind} >= 0 (0 keeps nothing), "
                                 f"or unset it for the default {getattr(cls, name)}")
            values[name] = value
        return cls(**values)


def kept_root(base: Path | None = None) -> Path:
    return (base or base_dir()) / KEPT_DIR


def open_runs_dir(cluster: str, base: Path | None = None) -> ClusterDir:
    """``<base>/.kept/<cluster>/``, owned by this process while the cluster lives (so no other
    session's `retain` removes it); reopening after a rebuild keeps what is there."""
    root = kept_root(base)
    root.mkdir(parents=True, exist_ok=True)
    return ClusterDir(root / cluster)


def close_runs_dir(path: Path, base: Path | None = None) -> list[Path]:
    """The cluster is done with `path`: drop its owner record (it becomes subject to
    retention), remove it if nothing was kept, then apply the retention."""
    (path / OWNER_FILE).unlink(missing_ok=True)
    try:
        path.rmdir()
    except OSError:
        pass                      # not empty (kept runs) or already gone
    return retain(base)


class KeptRuns:
    """A cluster's runs dir ``<base>/.kept/<cluster>/``, opened when first asked for, so the path a
    failure names outlives the cluster; ``close`` hands it to retention."""

    def __init__(self, cluster: str, cluster_dir: Path):
        self.cluster, self.cluster_dir = cluster, cluster_dir
        self._path: Path | None = None

    @property
    def path(self) -> Path:
        if self._path is None:
            self._path = open_runs_dir(self.cluster).path
        return self._path

    def close(self) -> None:
        """Run dirs written to the cluster dir itself (``<cluster dir>/runs``) are moved in first."""
        legacy = self.cluster_dir / "runs"
        if legacy.is_dir() and any(legacy.iterdir()):
            for child in legacy.iterdir():
                shutil.move(str(child), str(self.path / child.name))
        path, self._path = self._path, None
        if path is not None:
            close_runs_dir(path)


def runs_dir(cluster: Any) -> Path:
    """Where a cluster's run dirs go: its ``runs_dir`` (``.kept/<cluster>``), else
    ``<cluster dir>/runs`` for topologies that do not have one."""
    path = getattr(cluster, "runs_dir", None)
    return Path(path) if path is not None else Path(cluster.base_dir) / "runs"


def retain(base: Path | None = None, policy: Retention | None = None) -> list[Path]:
    """Remove what `policy` (default: from the environment) does not keep in ``<base>/.kept``;
    return what was removed. Dirs of live clusters are never touched."""
    return retain_kept(kept_root(base), policy)


def retain_kept(root: Path, policy: Retention | None = None, *, spare: Iterable[Path] = (),
                names: re.Pattern[str] | None = None) -> list[Path]:
    """Bound a root of kept run dirs by `policy` (default: from the environment): the newest
    `dirs` entries, at most `max_mb` in all, none older than `max_days`; return what was removed.

    The one retention of both sides: pytest's ``<base>/.kept`` and the CLI's runs root. Never
    touched: entries whose owner file names a live process (a run under way), the paths in
    `spare` (what the current command has just named), names starting with "." and, when
    `names` is given, anything whose name it does not match (the CLI's root may be a dir the
    user also keeps other things in).
    """
    policy = policy or Retention.from_env()
    spared = {Path(p).resolve() for p in spare}
    entries = []
    try:
        children = list(root.iterdir())
    except OSError:
        return []
    for path in children:
        if path.name.startswith(".") or (names is not None and not names.fullmatch(path.name)):
            continue
        if path.is_symlink() or not (path.is_dir() or (names is not None and path.is_file())):
            continue
        if path.is_dir():
            owner = _read_owner(path)
            if owner is not None and same_process(owner.pid, owner.create_time):
                continue
            if owner is None and _empty(path):
                try:
                    path.rmdir()      # an empty runs dir of a closed cluster: nothing was kept
                except OSError:
                    pass
                continue
        try:
            entries.append((path.stat().st_mtime, path))
        except FileNotFoundError:
            continue
    entries.sort(key=lambda e: (e[0], e[1].name), reverse=True)   # newest first
    now, budget, removed = time.time(), policy.max_mb * (1 << 20), []
    used = 0
    for position, (mtime, path) in enumerate(entries):
        used += _size(path)
        if path.resolve() in spared:
            continue
        too_many = position >= policy.dirs
        too_old = now - mtime > policy.max_days * 86400
        too_big = used > budget and position > 0
        if too_many or too_old or too_big:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def _empty(path: Path) -> bool:
    try:
        return not any(path.iterdir())
    except OSError:
        return False


def _size(path: Path) -> int:
    if not path.is_dir():
        try:
            return path.stat().st_size
        except OSError:
            return 0
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total
