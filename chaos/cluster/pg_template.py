"""PostgreSQL data dirs: ``initdb`` once per machine into a cached template, ``cp -a`` after.

initdb costs ~0.4 s; a copy ~0.1 s. The template lives under ``<base>/.cache`` (never
swept), keyed by the binaries and flags, and is built under an flock so that four
xdist workers starting together run initdb once. ``cp -a`` keeps the `postgres`
owner (shutil.copytree as root would not, and postgres then refuses the dir).
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from chaos.cluster import spawner
from chaos.cluster.errors import ServerStartError
from chaos.cluster.rundirs import CACHE_DIR, base_dir

DATABASES = ("chaos", "chaos_spare")           # made once in the template: a start creates none
INITDB_FLAGS = ["-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-instructions",
                "--no-sync", "--wal-segsize=1"]   # 1 MB WAL segments: 15 MB less to copy per cluster
RUN_AS = "postgres"                                 # the server refuses to run as root


def run_as_user() -> str | None:
    """The user to run PostgreSQL as: `postgres` when we are root, else ourselves."""
    return RUN_AS if os.geteuid() == 0 else None


def template_path(bin_dir: Path) -> Path:
    initdb = bin_dir / "initdb"
    key = hashlib.sha1(f"{initdb.resolve()}|{initdb.stat().st_mtime_ns}|{INITDB_FLAGS}|{DATABASES}".encode()).hexdigest()[:12]
    return base_dir() / CACHE_DIR / f"pg-template-{key}"


def ensure_template(bin_dir: Path) -> tuple[Path, bool]:
    """The template data dir for ``bin_dir``, made now if missing; returns (path, created)."""
    path = template_path(bin_dir)
    if (path / "PG_VERSION").exists():
        return path, False
    cache = path.parent
    cache.mkdir(mode=0o755, parents=True, exist_ok=True)
    os.chmod(cache, 0o755)
    with open(cache / f"{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (path / "PG_VERSION").exists():        # another worker made it while we waited
            return path, False
        building = cache / f"{path.name}.building-{os.getpid()}"
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir(mode=0o700)
        user = run_as_user()
        if user:
            shutil.chown(building, user, user)
        log = cache / f"{path.name}.initdb.log"
        proc = spawner.spawn([str(bin_dir / "initdb"), "-D", str(building), *INITDB_FLAGS],
                             log=log, cwd=cache, user=user, env=_pg_env())
        _check(proc.wait(120), "initdb", log, building)
        _create_databases(bin_dir, building, user, log)
        building.rename(path)
        return path, True


def _create_databases(bin_dir: Path, data: Path, user: str | None, log: Path) -> None:
    """CREATE DATABASE in single-user mode: no port, no socket, exits cleanly at end of input."""
    script = "".join(f"CREATE DATABASE {name};\n" for name in DATABASES).encode()
    proc = spawner.spawn([str(bin_dir / "postgres"), "--single", "-D", str(data), "-c", "fsync=off", "postgres"],
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
