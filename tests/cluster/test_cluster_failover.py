"""Failover moves every client link to the promoted replica; reset() restores the original topology."""
from __future__ import annotations

import psutil
import psycopg
import pytest
import redis

from chaos.cluster import ClusterError
from chaos.cluster.spawner import wait_until


def test_promote_replica_repoints_client_proxies(cluster, toxiproxy, redis_proxy, worker_links):
    original_primary, original_replica = cluster.primary, cluster.replica
    links = worker_links("C1")
    cluster.kill_primary()
    assert cluster.redis_pid("primary") is None
    cluster.promote_replica()

    assert cluster.failed_over
    assert cluster.primary == original_replica
    assert toxiproxy.get_proxy(redis_proxy)["upstream"] == str(original_replica)
    assert toxiproxy.get_proxy(links.proxies["redis"])["upstream"] == str(original_replica)
    # Clients keep their address, as behind a virtual IP, and now write to the promoted node.
    client = redis.Redis.from_url(links.redis_url, decode_responses=True, protocol=2)
    assert client.set("after-failover", "1")
    assert client.info("replication")["role"] == "master"
    assert cluster.direct_redis("primary").get("after-failover") == "1"
    assert original_primary != cluster.primary


def test_unreplicated_writes_are_lost_at_failover(cluster, toxiproxy, replication_proxy, redis_primary):
    redis_primary.set("replicated", "1")
    cluster.wait_replication()
    toxiproxy.update_proxy(replication_proxy, enabled=False)   # hold the link: loopback loses nothing else
    with cluster.direct_redis("replica") as replica:
        assert wait_until(lambda: replica.info("replication")["master_link_status"] == "down", timeout=5)
    redis_primary.set("acknowledged-but-lost", "1")
    cluster.kill_primary()
    cluster.promote_replica()
    with cluster.direct_redis("primary") as promoted:
        assert promoted.get("replicated") == "1"
        assert promoted.get("acknowledged-but-lost") is None


def test_reset_after_failover_restores_the_original_topology(chaos_cluster):
    cluster = chaos_cluster
    cluster.reset()
    a, b = cluster.primary, cluster.replica
    pid_b = cluster.redis_pid("replica")
    cluster.worker_links("W1")
    cluster.kill_primary()
    cluster.promote_replica()
    cluster.direct_redis("primary").set("written-on-b", "1")

    cluster.reset()

    assert not cluster.failed_over
    assert (cluster.primary, cluster.replica) == (a, b)
    assert cluster.redis_pid("replica") == pid_b            # the replica was re-attached, not restarted
    assert cluster.redis_pid("primary") is not None          # the killed primary runs again
    info = cluster.replication_info()
    assert info["primary"]["role"] == "master" and info["replica"]["role"] == "slave"
    assert info["replica"]["master_link_status"] == "up"
    proxies = cluster.api.proxies()
    assert proxies[cluster.links["redis"]]["upstream"] == str(a)
    assert proxies[cluster.links["replication"]]["upstream"] == str(a)
    assert not any(name.startswith("W1.") for name in proxies)
    with redis.Redis.from_url(cluster.redis_url(), decode_responses=True, protocol=2) as client:
        assert client.get("written-on-b") is None            # both nodes flushed
        client.set("k", "v")
    cluster.wait_replication()
    assert cluster.direct_redis("replica").get("k") == "v"


def test_reset_removes_toxics_and_re_enables_proxies(chaos_cluster):
    cluster = chaos_cluster
    cluster.reset()
    api = cluster.api
    api.add_toxic(cluster.links["redis"], "latency", latency=500)
    api.update_proxy(cluster.links["postgres"], enabled=False)
    with cluster.pg_connect() as conn:
        conn.execute("CREATE TABLE leftover (id int)")
    cluster.direct_redis().set("leftover", "1")

    cluster.reset()

    proxies = api.proxies()
    assert all(p["enabled"] for p in proxies.values())
    assert api.toxics(cluster.links["redis"]) == []
    with cluster.pg_connect() as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE tablename = 'leftover'").fetchone()[0] == 0
    assert cluster.direct_redis().dbsize() == 0


def test_restart_primary_with_aof_keeps_written_data(cluster, redis_primary):
    cluster.restart_primary(appendonly=True, appendfsync="always", kill=False)   # arms the AOF
    redis_primary.set("durable", "1")
    pid = cluster.redis_pid()
    cluster.restart_primary(appendonly=True, appendfsync="always", kill=True)    # a crash with AOF on
    assert cluster.redis_pid() != pid
    with cluster.direct_redis() as client:
        assert client.get("durable") == "1"
        assert client.config_get("appendonly")["appendonly"] == "yes"
    cluster.reset()
    with cluster.direct_redis() as client:
        assert client.config_get("appendonly")["appendonly"] == "no"
        assert client.dbsize() == 0


def test_restart_primary_without_persistence_loses_everything(cluster, redis_primary):
    redis_primary.set("volatile", "1")
    cluster.restart_primary(kill=True)
    with cluster.direct_redis() as client:
        assert client.get("volatile") is None


def test_a_reset_that_cannot_heal_says_so_and_rebuild_replaces_the_servers(chaos_cluster):
    cluster = chaos_cluster
    cluster.reset()
    old_pid = cluster.redis_pid()
    cluster.api.delete_proxy(cluster.links["postgres"])
    with pytest.raises(ClusterError, match="must be rebuilt"):
        cluster.reset()
    with pytest.warns(UserWarning, match="rebuilt: test"):
        cluster.rebuild(reason="test")
    assert cluster.redis_pid() != old_pid and not psutil.pid_exists(old_pid)
    with psycopg.connect(cluster.pg_dsn(), autocommit=True) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    cluster.reset()


def test_a_restart_whose_port_was_taken_moves_and_repoints_the_proxies(cluster, toxiproxy, redis_proxy):
    import socket
    old = cluster.primary
    cluster.kill_primary()
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # the killed server's TIME_WAITs
    squatter.bind((old.host, old.port))       # another program grabs the port meanwhile
    squatter.listen()
    try:
        cluster.restart_primary(kill=False)
        assert cluster.primary != old
        assert toxiproxy.get_proxy(redis_proxy)["upstream"] == str(cluster.primary)
        with redis.Redis.from_url(cluster.redis_url(), decode_responses=True) as client:
            assert client.set("moved", "1")
    finally:
        squatter.close()
    cluster.reset()
    assert cluster.replication_info()["replica"]["master_link_status"] == "up"


def test_reset_resumes_servers_a_test_left_stopped(chaos_cluster):
    import os
    import signal
    cluster = chaos_cluster
    cluster.reset()
    os.kill(cluster.redis_pid("replica"), signal.SIGSTOP)
    os.kill(cluster.redis_pid("primary"), signal.SIGSTOP)
    cluster.reset()
    assert psutil.Process(cluster.redis_pid("replica")).status() != psutil.STATUS_STOPPED
    assert cluster.replication_info()["replica"]["master_link_status"] == "up"
