"""PostgreSQL data dirs: ``initdb`` once per machine into a cached template, ``cp -a`` after.

initdb costs ~0.4 s; a copy ~0.05 s on tmpfs. The template lives under ``<base>/.cache``
(never swept), keyed by the binaries and flags, and is built under an flock so that four
xdist workers starting together run initdb once. It comes in two steps: the plain initdb
output (all a first start waits for), then a baked copy with the databases inside (made in
the background, so later starts create no database). ``cp -a`` keeps the `postgres`
owner (shutil.copytree as root would not, and postgres then refuses the dir).
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import pwd
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Iterator

from chaos.cluster import spawner
from chaos.cluster.errors import ClusterError, ServerStartError
from chaos.cluster.rundirs import CACHE_DIR, base_dir

DATABASES = ("chaos", "chaos_spare")           # made once in the template: a start creates none
INITDB_FLAGS = ["-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-instructions",
                "--no-sync", "--wal-segsize=1"]   # 1 MB WAL segments: 15 MB less to copy per cluster
RUN_AS = "postgres"                                 # the server refuses to run as root


def run_as_user() -> str | None:
    """The user to run PostgreSQL as: `postgres` when we are root, else ourselves."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(RUN_AS)
    except KeyError:
        raise ClusterError(f"running as root, PostgreSQL needs an OS user {RUN_AS!r} to run as (it refuses root): "
                           f"`apt-get install -y postgresql` creates it, or `useradd --system {RUN_AS}`") from None
    return RUN_AS


def template_path(bin_dir: Path) -> Path:
    initdb = bin_dir / "initdb"
    recipe = f"{initdb.resolve()}|{initdb.stat().st_mtime_ns}|{INITDB_FLAGS}|{DATABASES}"
    key = hashlib.sha1(recipe.encode()).hexdigest()[:12]
    return base_dir() / CACHE_DIR / f"pg-template-{key}"


def ensure_template(bin_dir: Path) -> tuple[Path, bool]:
    """A data dir to copy for ``bin_dir``; returns (path, created now).

    The baked template (databases inside) once it exists; before that the plain initdb output,
    made now if missing. So a first start waits only for initdb: the cluster then creates its
    databases itself, and ``bake_template`` makes the baked one later, while tests run.
    """
    baked, plain = template_path(bin_dir), _plain(bin_dir)
    for path in (baked, plain):
        if (path / "PG_VERSION").exists():
            return path, False
    with _locked(baked, blocking=True):
        for path in (baked, plain):
            if (path / "PG_VERSION").exists():   # another worker made it while we waited
                return path, False
        user = run_as_user()
        building = _fresh_dir(plain.with_name(plain.name + ".building"), user)
        log = plain.with_name(plain.name + ".initdb.log")
        proc = spawner.spawn([str(bin_dir / "initdb"), "-D", str(building), *INITDB_FLAGS],
                             log=log, cwd=building.parent, user=user, env=_pg_env())
        _check(proc.wait(120), "initdb", log, building)
        building.rename(plain)
        return plain, True


def bake_template(bin_dir: Path) -> None:
    """Make the baked template from the plain one; a no-op if it exists or another process is at it."""
    baked, plain = template_path(bin_dir), _plain(bin_dir)
    if (baked / "PG_VERSION").exists() or not (plain / "PG_VERSION").exists():
        return
    with _locked(baked, blocking=False) as got:
        if not got or (baked / "PG_VERSION").exists():
            return
        building = baked.with_name(baked.name + ".building")
        shutil.rmtree(building, ignore_errors=True)
        log = baked.with_name(baked.name + ".bake.log")
        if spawner.spawn(["cp", "-a", str(plain), str(building)], log=log).wait(120) != 0:
            return
        _create_databases(bin_dir, building, run_as_user(), log)
        building.rename(baked)


def bake_in_background(bin_dir: Path) -> None:
    """``bake_template`` on a daemon thread (a failure just leaves later starts on the plain dir)."""
    def bake() -> None:
        try:
            bake_template(bin_dir)
        except (ServerStartError, OSError):
            pass                   # the log stays in the cache dir (or the cache dir itself went away)
    thread = threading.Thread(target=bake, name="chaos-pg-bake", daemon=True)
    _BAKES.append(thread)
    thread.start()


def wait_for_bakes(timeout: float = 120.0) -> None:
    """Join the background bakes of this process (benchmarks: no stray work between measurements)."""
    while _BAKES:
        _BAKES.pop().join(timeout)


_BAKES: list[threading.Thread] = []


def is_baked(path: Path) -> bool:
    return not path.name.endswith("-plain")


def _plain(bin_dir: Path) -> Path:
    baked = template_path(bin_dir)
    return baked.with_name(baked.name + "-plain")


@contextlib.contextmanager
def _locked(template: Path, blocking: bool) -> Iterator[bool]:
    cache = template.parent
    cache.mkdir(mode=0o755, parents=True, exist_ok=True)
    os.chmod(cache, 0o755)
    with open(cache / f"{template.name}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True


def _fresh_dir(path: Path, user: str | None) -> Path:
    shutil.rmtree(path, ignore_errors=True)      # a build a killed run left (we hold the lock)
    path.mkdir(mode=0o700)
    if user:
        shutil.chown(path, user, user)
    return path


def single_user_argv(bin_dir: Path, data: Path) -> list[str]:
    """`postgres --single` on `data`, its dynamic shared memory in the data dir (mmap), not /dev/shm:
    a single-user backend killed mid-bake (a test session SIGKILLed, an xdist worker gone) left its
    two segments (26,976 B and 1 MiB) in /dev/shm for good, where nothing removes them."""
    return [str(bin_dir / "postgres"), "--single", "-D", str(data), "-c", "fsync=off",
            "-c", "dynamic_shared_memory_type=mmap", "postgres"]


def _create_databases(bin_dir: Path, data: Path, user: str | None, log: Path) -> None:
    """CREATE DATABASE in single-user mode: no port, no socket, exits cleanly at end of input."""
    script = "".join(f"CREATE DATABASE {name};\n" for name in DATABASES).encode()
    proc = spawner.spawn(single_user_argv(bin_dir, data),
                         log=log, cwd=data.parent, user=user, env=_pg_env(), stdin=subprocess.PIPE)
    proc.communicate(script, timeout=120)
    _check(proc.returncode, "postgres --single (CREATE DATABASE)", log, data)


def _check(code: int, what: str, log: Path, building: Path) -> None:
    if code != 0:
        shutil.rmtree(building, ignore_errors=True)
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
        raise ServerStartError(f"{what} failed (exit {code}) making the PostgreSQL template; log tail:\n{tail}")


def copy_template(template: Path, dest: Path) -> subprocess.Popen:
    """Start ``cp -a template dest`` (the caller waits, so other servers start meanwhile)."""
    return spawner.spawn(["cp", "-a", str(template), str(dest)], log=dest.parent / "cp.log")


def _pg_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "LANG": "C"}
