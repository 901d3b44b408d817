"""Start-up and reset of the topology against the same servers started bare; prints one JSON object.

    python bench/cluster_bench.py [--starts 5] [--resets 30]

* ``bare_first_s``: (median of --firsts) two redis-server + initdb + postgres, no proxies, launched in parallel,
  until all answer (initdb is the long pole).
* ``topology_first_s``: (median) the whole native topology on a machine with no template cache
  (a fresh base dir): initdb + copy + servers + proxy server + proxies + replication up.
* ``topology_cached_s``: median later start (template cached). Target < 0.5 s.
* ``reset_ms``: median and p90 of ``Cluster.reset()`` after a typical test (data in Redis and
  PostgreSQL, a worker's proxies, a toxic). Target < 100 ms. ``reset_after_failover_ms``
  after kill + promote. ``bare_reset_ms``: FLUSHALL + DROP/CREATE DATABASE on bare servers.
Targets: topology_first_s <= 1.5 x bare_first_s.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chaos.cluster.binaries import pg_bin_dir  # noqa: E402
from chaos.cluster.local_server import start_all  # noqa: E402
from chaos.cluster.pg_template import INITDB_FLAGS, run_as_user  # noqa: E402
from chaos.cluster.postgres_server import PostgresProcess, admin_connect  # noqa: E402
from chaos.cluster.redis_server import RedisProcess, admin_client  # noqa: E402
from chaos.cluster.spawner import spawn  # noqa: E402


def bare_start(root: Path) -> tuple[float, float]:
    """(start seconds, reset ms) of two redis-server + initdb + postgres, no proxies."""
    root.mkdir(mode=0o755)
    bin_dir = pg_bin_dir()
    started = time.perf_counter()
    redis = [RedisProcess(f"bare-{i}", root / f"redis-{i}") for i in (0, 1)]
    for server in redis:
        server.launch()
    pg = PostgresProcess("bare-pg", root / "pg", bin_dir)
    initdb = spawn([str(bin_dir / "initdb"), "-D", str(pg.data_dir), *INITDB_FLAGS], log=root / "initdb.log",
                   user=run_as_user(), cwd=root)
    if initdb.wait(120) != 0:
        raise SystemExit((root / "initdb.log").read_text())
    pg.launch()
    start_all([*redis, pg], launched=True)
    start_s = time.perf_counter() - started
    resets = []
    with admin_connect(pg.host, pg.port) as conn, admin_client(redis[0].host, redis[0].port) as client:
        conn.execute("CREATE DATABASE chaos")
        for _ in range(10):
            t = time.perf_counter()
            client.flushall()
            conn.execute("DROP DATABASE chaos WITH (FORCE)")
            conn.execute("CREATE DATABASE chaos")
            resets.append((time.perf_counter() - t) * 1000)
    for server in (*redis, pg):
        server.stop()
    return start_s, statistics.median(resets)


def dirty(cluster) -> None:
    """What a typical test leaves behind."""
    with cluster.direct_redis() as client:
        client.xadd("orders", {"id": "42", "status": "created"})
    with cluster.pg_connect() as conn:
        conn.execute("CREATE TABLE orders (id int PRIMARY KEY, status text, version int)")
    links = cluster.worker_links("C1")
    cluster.api.add_toxic(links.proxies["redis"], "latency", latency=10)


def topology_first(base: Path) -> dict:
    """A start on a machine without the template cache (a fresh base dir)."""
    os.environ["CHAOS_CLUSTER_BASE"] = str(base)
    from chaos.cluster.native import NativeCluster
    from chaos.cluster.pg_template import wait_for_bakes
    first = NativeCluster.start("bench-first")
    first.close()
    wait_for_bakes()               # the template's databases are baked in the background
    return dict(first.start_info)


def topology(base: Path, starts: int, resets: int) -> dict:
    os.environ["CHAOS_CLUSTER_BASE"] = str(base)
    from chaos.cluster.native import NativeCluster
    cached, infos = [], []
    for i in range(starts):
        cluster = NativeCluster.start(f"bench-{i}")
        cached.append(cluster.start_info["total_s"])
        infos.append(cluster.start_info)
        if i < starts - 1:
            cluster.close()
    reset_ms, failover_ms = [], []
    for i in range(resets):
        dirty(cluster)
        time.sleep(0.05)          # a test runs: the spare database is made meanwhile
        t = time.perf_counter()
        cluster.reset()
        reset_ms.append((time.perf_counter() - t) * 1000)
    for i in range(max(3, resets // 5)):
        cluster.kill_primary()
        cluster.promote_replica()
        time.sleep(0.05)
        t = time.perf_counter()
        cluster.reset()
        failover_ms.append((time.perf_counter() - t) * 1000)
    cluster.close()
    typical = infos[len(infos) // 2]
    return {"cached": cached, "cached_breakdown": typical,
            "reset_ms": reset_ms, "failover_ms": failover_ms}


def p90(values: list[float]) -> float:
    return sorted(values)[min(len(values) - 1, int(len(values) * 0.9))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--firsts", type=int, default=3, help="first starts (each on a fresh base), interleaved with bare ones")
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--resets", type=int, default=30)
    args = parser.parse_args()
    shm = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    with tempfile.TemporaryDirectory(prefix="chaos-bench-", dir=shm) as tmp:
        root = Path(tmp)
        os.chmod(root, 0o755)
        bare, firsts = [], []
        for i in range(args.firsts):
            bare.append(bare_start(root / f"bare-{i}"))
            firsts.append(topology_first(root / f"first-{i}"))
        result = topology(root / "clusters", args.starts, args.resets)
        subprocess.run(["rm", "-rf", str(root)], check=False)
    bare_s = statistics.median(b[0] for b in bare)
    bare_reset = statistics.median(b[1] for b in bare)
    first_s = statistics.median(f["total_s"] for f in firsts)
    first_breakdown = sorted(firsts, key=lambda f: f["total_s"])[len(firsts) // 2]
    print(json.dumps({
        "bench": "cluster",
        "proxy_server": os.environ.get("TOXIPROXY_URL") or os.environ.get("CHAOS_PROXY_SERVER") or "embedded",
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "bare_first_s": round(bare_s, 3),
        "topology_first_s": round(first_s, 3),
        "first_ratio": round(first_s / bare_s, 2),
        "bare_first_all_s": [round(b[0], 3) for b in bare],
        "topology_first_all_s": [round(f["total_s"], 3) for f in firsts],
        "first_breakdown_s": {k: round(float(v), 3) for k, v in first_breakdown.items()},
        "topology_cached_s": round(statistics.median(result["cached"]), 3),
        "topology_cached_all_s": [round(v, 3) for v in result["cached"]],
        "cached_breakdown_s": {k: round(float(v), 3) for k, v in result["cached_breakdown"].items()},
        "reset_ms": {"median": round(statistics.median(result["reset_ms"]), 1), "p90": round(p90(result["reset_ms"]), 1),
                     "n": len(result["reset_ms"])},
        "reset_after_failover_ms": {"median": round(statistics.median(result["failover_ms"]), 1),
                                    "n": len(result["failover_ms"])},
        "bare_reset_ms": round(bare_reset, 1),
        "targets": {"first_ratio_max": 1.5, "cached_s_max": 0.5, "reset_ms_max": 100},
    }))


if __name__ == "__main__":
    main()
