"""What a worker process has at hand: its history, links, clock scale, rng, failpoints, signals.

Built from the WorkerSpec the orchestrator sent through the fork server (``worker``: its
typed fields; ``spec``: the role's own keys). SIGTERM asks the
worker to stop after the job in hand; SIGUSR1 switches it to drain mode (consumers
start recovering other consumers' pending entries with XAUTOCLAIM).
"""
from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import psycopg
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from chaos.history import HistoryWriter
from chaos.workload.failpoints import Failpoints
from chaos.workload.workerspec import WorkerSpec


def ready_marker(run_dir: Path, process: str) -> Path:
    """Where a gated worker says it is ready to start."""
    return Path(run_dir) / "ready" / process


class WorkerEnv:
    """One worker process's environment (see module doc)."""

    def __init__(self, spec: WorkerSpec | Mapping[str, Any]) -> None:
        self.worker = worker = WorkerSpec.of(spec)
        self.spec: Mapping[str, Any] = worker.role_spec   # the role's own keys (streams, group, guard, ...)
        self.name: str = worker.name
        self.run_dir = Path(worker.run_dir)
        self.scale: float = worker.time_scale
        self.t0: float = time.monotonic() if worker.t0 is None else float(worker.t0)
        self.rng = random.Random(f"{worker.seed}:{self.name}")
        self.history = HistoryWriter.for_run(self.run_dir, self.name)
        self.op = self.history.op   # (the writer's own method: one call less per op, see op below)
        self.failpoints = Failpoints.from_spec(dict(worker.failpoints), process=self.name,
                                               run_dir=self.run_dir, record=self.op, sleep_ms=self.sleep_ms)
        self.stopping = False
        self.on_term: Callable[[], None] | None = None   # also called by a SIGTERM (ends a blocking wait)
        self.draining = worker.draining
        self._redis: redis.Redis | None = None
        self._pg: psycopg.Connection | None = None
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGUSR1, self._on_drain)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})  # a drain signal sent meanwhile lands now

    def _on_term(self, *_: object) -> None:
        self.stopping = True
        if self.on_term is not None:
            self.on_term()

    def _on_drain(self, *_: object) -> None:
        self.draining = True

    def await_start(self) -> None:
        """With `gate` in the spec: say ready, then wait for the orchestrator's SIGUSR2 and take
        its arrival as t0, so the schedule does not include this process's own start-up. A
        SIGTERM instead (the run ended at its arm: a fault that could not start, a broken rig)
        ends the process at once, before it did anything; the wait did not see it, and the stop
        sat out its 2 s grace before a SIGKILL."""
        if not self.worker.gate:
            return
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2, signal.SIGTERM})
        if self.stopping:
            raise SystemExit(0)
        marker = ready_marker(self.run_dir, self.name)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
        if signal.sigwait({signal.SIGUSR2, signal.SIGTERM}) == signal.SIGTERM:
            raise SystemExit(0)
        self.t0 = time.monotonic()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})   # one sent since lands now

    def op(self, type: str, f: str, **fields: Any) -> dict:
        return self.history.op(type, f, **fields)

    def scaled_ms(self, ms: float) -> float:
        return ms * self.scale

    def seconds(self, ms: float) -> float:
        return ms * self.scale / 1000.0

    def sleep_ms(self, ms: float) -> None:
        if ms > 0:
            time.sleep(self.seconds(ms))

    def sleep_until(self, offset_ms: float) -> None:
        """Sleep until `offset_ms` (scaled) after the run's common start t0."""
        delay = self.t0 + self.seconds(offset_ms) - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    def redis(self, *, timeout_ms: float | None = None) -> redis.Redis:
        """This process's client through its own proxy (or, in the sentinel topology, to the primary
        the Sentinels name, recorded as an `info sentinel` op); no silent client-side retries."""
        if self._redis is None:
            timeout = None if timeout_ms is None else max(0.001, self.seconds(timeout_ms))
            self._redis = self.new_redis(
                lambda address: self.op("info", "sentinel", value={"master": address}),
                decode_responses=True, protocol=2,
                retry=Retry(NoBackoff(), 0), socket_timeout=timeout if timeout else 30.0,
                socket_connect_timeout=timeout if timeout else 5.0, health_check_interval=0)
        return self._redis

    def new_redis(self, on_master: Callable[[str], None] | None = None, **kwargs: Any) -> redis.Redis:
        """A new client of this process's links (through Sentinel in that topology)."""
        from chaos.cluster.sentinel_client import redis_client
        w = self.worker
        return redis_client(redis_url=w.redis_url, sentinels=w.sentinels, master_name=w.master_name,
                            on_master=on_master, **kwargs)

    def pg(self) -> psycopg.Connection:
        if self._pg is None or self._pg.closed:
            self._pg = psycopg.connect(self.worker.pg_dsn, autocommit=True, connect_timeout=10)
        return self._pg

    def close(self) -> None:
        for conn in (self._redis, self._pg):
            try:
                if conn is not None:
                    conn.close()
            except Exception:  # noqa: BLE001 - closing after a fault may fail; nothing to save
                pass
        self.history.close()
