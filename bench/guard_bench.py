"""What one apply costs PostgreSQL and the consumer, guard by guard; prints JSON.

Each guard applies N events (K orders, versions in order, cost 0) through a worker's own
proxy, as a consumer does, bound to a minimal environment (no history, no failpoints armed).
Per apply: round trips to PostgreSQL (the ReadyForQuery replies in a libpq protocol trace of
a separate pass, so tracing costs nothing in the timed one), the PostgreSQL backend's CPU
(its process's user + system time) plus the WAL writer's, the client's CPU and the wall time.
`lock` and `setnx-dedupe` also talk to Redis (not counted as PostgreSQL round trips).

The machine is shared: the load average is recorded; CPU figures are less at its mercy than
wall time. A/B against another checkout: run its copy of this file the same way.

    python bench/guard_bench.py [--events 5000] [--keys 100] [--guards plain,inbox:cas=1,...]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil  # noqa: E402
import psycopg  # noqa: E402
import redis  # noqa: E402

import chaos.strategies  # noqa: E402,F401 - parts load in dependency order
from chaos.cluster import start_cluster  # noqa: E402
from chaos.events import Event  # noqa: E402
from chaos.strategies.guards import GUARDS  # noqa: E402
from chaos.workload.schema import ensure_schema, seed_rows, truncate_all  # noqa: E402

DEFAULT_GUARDS = ("plain,lock,setnx-dedupe,inbox,inbox:cas=1,cas,cas:isolation=rr,state-carried,"
                  "reorder-buffer")


class _Failpoints:
    armed: dict[str, Any] = {}

    def hit(self, *_: Any, **__: Any) -> None:
        pass


class _Env:
    """The part of a consumer's environment a guard uses (chaos.strategies.guards.base.GuardEnv)."""

    def __init__(self, pg: psycopg.Connection, r: redis.Redis) -> None:
        self._pg, self._redis = pg, r
        self.failpoints, self.rng = _Failpoints(), random.Random(0)

    def pg(self) -> psycopg.Connection:
        return self._pg

    def redis(self, **_: Any) -> redis.Redis:
        return self._redis

    def op(self, *_: Any, **__: Any) -> dict:
        return {}

    def scaled_ms(self, ms: float) -> float:
        return ms

    def sleep_ms(self, ms: float) -> None:
        if ms > 0:
            time.sleep(ms / 1000)


def _guard(spec: str) -> Any:
    name, _, params = spec.partition(":")
    if name not in GUARDS:
        raise SystemExit(f"unknown guard {name!r}: guards are {', '.join(GUARDS)}")
    return GUARDS[name](**dict(p.split("=", 1) for p in params.split(",") if p))


def _events(n: int, keys: int) -> list[Event]:
    return [Event.from_dict({"key": f"k{i % keys}", "version": i // keys + 1, "etype": f"step-{i // keys + 1}",
                             "event_id": f"e{i}"}) for i in range(n)]


def _cpu(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


def _walwriter(backend: psutil.Process) -> psutil.Process | None:
    for child in backend.parent().children():
        if "walwriter" in " ".join(child.cmdline()):
            return child
    return None


def _apply_all(guard: Any, events: list[Event]) -> dict[str, int]:
    effects: dict[str, int] = {}
    for ev in events:
        try:
            outcome = guard.apply(ev, "1-0", lambda: None)
        finally:
            guard.after_apply()
        effects[outcome.effect] = effects.get(outcome.effect, 0) + 1
    return effects


def measure(cluster: Any, admin: psycopg.Connection, spec: str, events: list[Event], keys: int) -> dict[str, Any]:
    guard = _guard(spec)
    if guard.schema:
        admin.execute(guard.schema)
    r = redis.Redis.from_url(cluster.redis_url(), decode_responses=True, protocol=2)
    dsn = cluster.worker_links("C1").pg_dsn
    out: dict[str, Any] = {}
    # pass 1: round trips, from a protocol trace (one ReadyForQuery per round trip outside a pipeline)
    truncate_all(admin)
    if guard.seeds_rows:
        seed_rows(admin, [ev.key for ev in events])
    r.flushdb()
    sample = events[:min(len(events), 500)]
    with psycopg.connect(dsn, autocommit=True) as conn, tempfile.TemporaryFile() as trace:
        guard.bind(_Env(conn, r))
        conn.pgconn.trace(trace.fileno())
        _apply_all(guard, sample)
        conn.pgconn.untrace()
        trace.seek(0)
        replies = sum(1 for line in trace.read().decode(errors="replace").splitlines() if "\tReadyForQuery\t" in line)
    out["pg_round_trips_per_apply"] = round(replies / len(sample), 2)
    # pass 2: CPU and wall time, untraced
    truncate_all(admin)
    if guard.seeds_rows:
        seed_rows(admin, [ev.key for ev in events])
    r.flushdb()
    with psycopg.connect(dsn, autocommit=True) as conn:
        guard = _guard(spec).bind(_Env(conn, r))
        backend = psutil.Process(conn.info.backend_pid)
        walwriter = _walwriter(backend)
        b0, w0 = _cpu(backend), _cpu(walwriter) if walwriter else 0.0
        c0, t0 = time.process_time(), time.perf_counter()
        effects = _apply_all(guard, events)
        wall, client = time.perf_counter() - t0, time.process_time() - c0
        server = _cpu(backend) - b0 + ((_cpu(walwriter) - w0) if walwriter else 0.0)
    r.close()
    n = len(events)
    out.update({"pg_server_cpu_us_per_apply": round(server / n * 1e6, 1),
                "client_cpu_us_per_apply": round(client / n * 1e6, 1),
                "wall_us_per_apply": round(wall / n * 1e6, 1), "effects": effects})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--guards", default=DEFAULT_GUARDS, help="comma-separated guard specs; ';' separates "
                        "a guard's params (cas:isolation=rr)")
    args = parser.parse_args()
    specs = [s.replace(";", ",") for s in _split(args.guards)]
    for spec in specs:
        _guard(spec)   # bad input refused before anything starts
    if args.events < 1 or args.keys < 1:
        raise SystemExit("--events and --keys must be >= 1")
    events = _events(args.events, args.keys)
    out: dict[str, Any] = {"bench": "guard", "events": args.events, "keys": args.keys,
                           "machine": {"cpus": os.cpu_count(), "load_average_at_start": os.getloadavg()[0]},
                           "guards": {}}
    cluster = start_cluster("native", f"guardbench-{os.getpid()}")
    try:
        with cluster.pg_connect() as admin:
            ensure_schema(admin)
            for spec in specs:
                out["guards"][spec] = measure(cluster, admin, spec, events, args.keys)
    finally:
        cluster.close()
    out["machine"]["load_average_at_end"] = os.getloadavg()[0]
    print(json.dumps(out))


def _split(text: str) -> list[str]:
    """Guard specs split on commas that start a new guard (a name from the registry), so
    `inbox:cas=1,cas` is two specs and `cas:isolation=rr` one."""
    specs: list[str] = []
    for part in text.split(","):
        if specs and "=" in part and part.partition(":")[0] not in GUARDS:
            specs[-1] += ";" + part
        else:
            specs.append(part)
    return [s for s in specs if s]


if __name__ == "__main__":
    main()
