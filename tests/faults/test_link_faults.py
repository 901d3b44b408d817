"""Link and server faults against the real topology (proxies, redis-server), no workers."""
from __future__ import annotations

import time

import pytest
import redis

from faults import get_fault
from faults.interface import FaultError
from faults.local import FaultThread, LocalContext


def client(url: str, timeout: float = 1.0) -> redis.Redis:
    return redis.Redis.from_url(url, decode_responses=True, protocol=2, socket_timeout=timeout,
                                socket_connect_timeout=timeout, retry_on_timeout=False,
                                retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0))


def timed_ping(r: redis.Redis) -> float:
    t = time.monotonic()
    r.ping()
    return time.monotonic() - t


def test_latency_slows_the_shared_link_then_heals(cluster) -> None:
    r = client(cluster.redis_url(), timeout=5)
    r.ping()
    ctx = LocalContext(cluster, seed=1)
    thread = FaultThread(get_fault("latency:link=redis,latency_ms=150,duration_ms=1500"), ctx).start()
    slow = timed_ping(r)
    thread.join(10)
    fast = timed_ping(r)
    assert 0.3 <= slow < 3.0, f"PING under 150 ms each way took {slow:.3f} s"
    assert fast < 0.1, f"PING after heal took {fast:.3f} s"
    assert cluster.api.toxics(cluster.links["redis"]) == []


def test_partition_cuts_one_workers_link_only(cluster) -> None:
    c1 = cluster.worker_links("C1")
    c2 = cluster.worker_links("C2")
    r1, r2 = client(c1.redis_url), client(c2.redis_url)
    r1.ping(), r2.ping()
    ctx = LocalContext(cluster, seed=1)
    thread = FaultThread(get_fault("partition:link=redis,target=C1,duration_ms=800"), ctx).start()
    with pytest.raises(redis.ConnectionError):
        r1.ping()
    assert r2.ping()
    thread.join(10)
    assert client(c1.redis_url).ping()
    assert cluster.api.get_proxy(c1.proxies["redis"])["enabled"] is True


def test_publish_blip_upstream_drops_the_xadd_of_one_producer(cluster) -> None:
    order, payment = cluster.worker_links("P-order"), cluster.worker_links("P-payment")
    ro, rp = client(order.redis_url), client(payment.redis_url)
    ro.ping(), rp.ping()
    ctx = LocalContext(cluster, seed=1)
    thread = FaultThread(get_fault("publish-blip:duration_ms=600"), ctx).start()
    with pytest.raises((redis.ConnectionError, redis.TimeoutError)):
        ro.xadd("orders", {"etype": "created"})
    rp.xadd("orders", {"etype": "paid"})
    thread.join(10)
    ro = client(order.redis_url)
    ro.xadd("orders", {"etype": "created"})
    types = [f["etype"] for _, f in cluster.direct_redis().xrange("orders")]
    assert types == ["paid", "created"], f"the blipped XADD reached Redis: {types}"


def test_publish_blip_downstream_applies_the_xadd_but_loses_the_reply(cluster) -> None:
    order = cluster.worker_links("P-order")
    ro = client(order.redis_url, timeout=0.3)
    ro.ping()
    ctx = LocalContext(cluster, seed=1)
    thread = FaultThread(get_fault("publish-blip:stream=downstream,duration_ms=500"), ctx).start()
    with pytest.raises((redis.ConnectionError, redis.TimeoutError)):
        ro.xadd("orders", {"etype": "created"})
    thread.join(10)
    assert cluster.direct_redis().xlen("orders") == 1, "Redis should have applied the XADD"


def test_a_link_the_topology_lacks_is_a_fault_error(cluster) -> None:
    cluster_links = dict(cluster.links)
    ctx = LocalContext(cluster, seed=1)
    try:
        del cluster.links["replication"]   # a topology without a replica link (e.g. an external one)
        with pytest.raises(FaultError, match="no shared link 'replication'"):
            FaultThread(get_fault("latency:link=replication,duration_ms=10"), ctx).start().join(10)
    finally:
        cluster.links.update(cluster_links)


def test_maxlen_trim_drops_pending_entries_and_xautoclaim_reports_them(cluster) -> None:
    r = cluster.direct_redis()
    r.xgroup_create("orders", "g", id="0", mkstream=True)
    ids = [r.xadd("orders", {"n": str(i)}) for i in range(30)]
    r.xreadgroup("g", "c1", {"orders": ">"}, count=20)
    ctx = LocalContext(cluster, seed=1)
    FaultThread(get_fault("maxlen-trim:at_ms=0,maxlen=5"), ctx).start().join(10)
    _, claimed, deleted = r.xautoclaim("orders", "g", "c2", 0, "0-0", count=100)
    assert r.xlen("orders") == 5
    assert sorted(deleted) == sorted(ids[:20]), f"deleted ids reported: {len(deleted)}"
    assert claimed == [] and r.xpending("orders", "g")["pending"] == 0
    trimmed = [op["value"]["trimmed"] for op in ctx.ops if op["value"]["phase"] == "start"][0]
    assert trimmed == {"orders": 25}


def test_redis_restart_keeps_what_the_aof_fsynced(cluster) -> None:
    r = cluster.direct_redis()
    r.xgroup_create("orders", "g", id="0", mkstream=True)
    ctx = LocalContext(cluster, seed=1)
    fault = get_fault("redis-restart:at_ms=1500")
    thread = FaultThread(fault, ctx).start()      # arm: AOF on
    for i in range(100):
        r.xadd("orders", {"n": str(i)})
    r.xreadgroup("g", "c1", {"orders": ">"}, count=40)
    thread.join(30)                               # 1.5 s later: SIGKILL + start from the AOF
    after = cluster.direct_redis()
    assert after.xlen("orders") == 100, "writes older than a second must survive everysec"
    assert after.xpending("orders", "g")["pending"] == 40
    assert ctx.phases("redis-restart") == ["start", "stop"]
