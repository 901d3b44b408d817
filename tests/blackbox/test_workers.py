"""The worker contract and its bad inputs: exits at once, never connects, not runnable."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from chaos.blackbox.config import WorkerSpec
from chaos.blackbox.errors import ConfigError, WorkerError
from chaos.blackbox.workers import WorkerPool, parse_command

PY = sys.executable


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] == "Z"
    except FileNotFoundError:
        return True


def pool(cluster, tmp_path: Path, code: str, **spec) -> WorkerPool:
    return WorkerPool([PY, "-c", code], WorkerSpec(**{"processes": 2, "ready_timeout_s": 30, **spec}),
                      cluster.worker_links, tmp_path / "workers")


@pytest.mark.parametrize("command, words", [("", ["empty"]), ("no-such-consumer --x", ["not on PATH"])])
def test_command_that_cannot_run(command: str, words: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        parse_command(command)
    assert all(w in str(info.value) for w in words)


def test_worker_that_exits_at_once(cluster, tmp_path: Path) -> None:
    p = pool(cluster, tmp_path, "import sys; print('config missing: ORDERS_DB'); sys.exit(3)")
    with pytest.raises(WorkerError) as info:
        p.start()
    assert info.value.exit_code == 3 and "config missing: ORDERS_DB" in str(info.value)
    assert "exit code 3" in str(info.value)
    assert all(gone(w.pid) for w in p.workers)


def test_worker_that_never_connects(cluster, tmp_path: Path) -> None:
    p = pool(cluster, tmp_path, "import time; print('waiting for a queue that is not there', flush=True); "
                                "time.sleep(60)", ready_timeout_s=3.0)   # 1 s: a loaded machine had not printed yet
    t0 = time.monotonic()
    with pytest.raises(WorkerError) as info:
        p.start()
    assert time.monotonic() - t0 < 30   # the ready timeout ended it, not the worker's 60 s
    assert "did not connect" in str(info.value) and "waiting for a queue" in str(info.value)
    assert all(gone(w.pid) for w in p.workers)  # stopped before the error was raised


def test_workers_get_their_own_links_and_names(cluster, tmp_path: Path) -> None:
    code = ("import os, redis, time; r = redis.Redis.from_url(os.environ['CHAOS_REDIS_URL']); "
            "r.rpush('seen', '|'.join(os.environ[k] for k in ('CHAOS_CONSUMER', 'CHAOS_STREAM', 'CHAOS_GROUP', "
            "'CHAOS_REDIS_URL', 'CHAOS_PG_DSN'))); time.sleep(60)")
    p = pool(cluster, tmp_path, code, ready_timeout_s=30)  # importing redis on a loaded machine
    p.start()
    try:
        r = cluster.direct_redis()
        deadline = time.monotonic() + 5
        while r.llen("seen") < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        seen = sorted(r.lrange("seen", 0, -1))
        assert [s.split("|")[0] for s in seen] == ["C1", "C2"]
        for line in seen:
            name, stream, group, url, dsn = line.split("|")
            links = cluster.worker_links(name)
            assert (url, dsn, stream, group) == (links.redis_url, links.pg_dsn, "orders", "workers")
        assert seen[0].split("|")[3] != seen[1].split("|")[3]  # one proxy per worker
    finally:
        pids = [w.pid for w in p.workers]
        p.stop()
    assert all(gone(pid) for pid in pids)
    assert p.unexpected_exits() == []
