"""The template's single-user backend keeps its dynamic shared memory in its data dir: one killed
mid-bake (a test session SIGKILLed, an xdist worker gone) left two segments in /dev/shm for good
(26,976 B and 1 MiB each; 42 of them had piled up on this machine), where nothing removes them."""
from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from chaos.cluster.binaries import pg_bin_dir
from chaos.cluster.pg_template import _pg_env, ensure_template, run_as_user, single_user_argv
from chaos.cluster.rundirs import base_dir
from chaos.cluster import spawner


def test_a_killed_single_user_backend_leaves_its_shared_memory_in_the_data_dir():
    base = base_dir()
    base.mkdir(parents=True, exist_ok=True)
    tmp_path = Path(tempfile.mkdtemp(prefix="single-user-", dir=base))   # (the postgres user can reach it)
    try:
        _kill_a_single_user_backend(tmp_path)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def _kill_a_single_user_backend(tmp_path: Path) -> None:
    bin_dir = pg_bin_dir()
    template, _ = ensure_template(bin_dir)
    data = tmp_path / "data"
    shutil.copytree(template, data, symlinks=True)
    user = run_as_user()
    if user:
        shutil.chown(tmp_path, user, user)
        for path in [data, *data.rglob("*")]:
            shutil.chown(path, user, user)
    dynshmem = data / "pg_dynshmem"
    proc = spawner.spawn(single_user_argv(bin_dir, data), log=tmp_path / "single.log", cwd=tmp_path,
                         user=user, env=_pg_env(), stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not any(dynshmem.glob("mmap.*")) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        segments = sorted(p.name for p in dynshmem.glob("mmap.*"))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert segments, (f"the single-user backend made no segment in {dynshmem} (posix: /dev/shm, left there "
                      f"when it is killed); log: {(tmp_path / 'single.log').read_text()[-500:]}")
    assert sorted(p.name for p in dynshmem.glob("mmap.*")) == segments   # killed: still there, in the dir
