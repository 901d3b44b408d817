"""Replication runs through the replication proxy: cutting that proxy stops it."""
from __future__ import annotations

import time

from chaos.cluster.spawner import wait_until


def test_write_on_primary_is_readable_on_replica(cluster, redis_primary, redis_replica):
    redis_primary.xadd("orders", {"id": "42", "status": "created"})
    cluster.wait_replication()
    entries = redis_replica.xrange("orders")
    assert [fields for _, fields in entries] == [{"id": "42", "status": "created"}]
    assert redis_replica.info("replication")["role"] == "slave"


def test_replica_replicates_through_the_replication_proxy(cluster, toxiproxy, replication_proxy):
    info = cluster.replication_info()["replica"]
    listen = cluster.proxy_endpoint(replication_proxy)
    assert (info["master_host"], info["master_port"]) == (listen.host, listen.port)
    assert toxiproxy.get_proxy(replication_proxy)["upstream"] == str(cluster.primary)


def test_cutting_the_replication_proxy_stops_replication(cluster, toxiproxy, replication_proxy,
                                                         redis_primary, redis_replica):
    redis_primary.set("before", "1")
    cluster.wait_replication()
    toxiproxy.update_proxy(replication_proxy, enabled=False)
    assert wait_until(lambda: redis_replica.info("replication")["master_link_status"] == "down", timeout=5)
    redis_primary.set("during", "1")
    time.sleep(0.3)   # ample on loopback: a live link applies a SET in well under 10 ms
    assert redis_replica.get("during") is None
    assert redis_replica.get("before") == "1"

    toxiproxy.update_proxy(replication_proxy, enabled=True)
    cluster.wait_replication(timeout=10)   # the replica retries its link about once a second
    assert redis_replica.get("during") == "1"
    assert redis_replica.info("replication")["master_link_status"] == "up"
