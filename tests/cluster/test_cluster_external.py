"""The external backend's configuration errors, and a real run against servers started elsewhere."""
from __future__ import annotations

import pytest

from chaos.cluster import ClusterError
from chaos.cluster.external import ExternalCluster, read_environment


def test_missing_variables_are_all_named_with_examples():
    with pytest.raises(ClusterError, match=r"CHAOS_REDIS_PRIMARY \(e\.g\. 10\.0\.0\.5:6379\).*TOXIPROXY_URL"):
        read_environment({})


def test_parallel_workers_are_refused():
    env = {"CHAOS_REDIS_PRIMARY": "h:1", "CHAOS_REDIS_REPLICA": "h:2", "CHAOS_POSTGRES": "h:3",
           "TOXIPROXY_URL": "http://h:4", "CHAOS_EXTERNAL_WIPE": "yes", "PYTEST_XDIST_WORKER_COUNT": "4"}
    with pytest.raises(ClusterError, match="-n 0"):
        read_environment(env)


def test_wiping_a_staging_cluster_must_be_confirmed():
    env = {"CHAOS_REDIS_PRIMARY": "h:1", "CHAOS_REDIS_REPLICA": "h:2", "CHAOS_POSTGRES": "h:3",
           "TOXIPROXY_URL": "http://h:4"}
    with pytest.raises(ClusterError, match="CHAOS_EXTERNAL_WIPE=yes"):
        read_environment(env)
    with pytest.raises(ClusterError, match="CHAOS_POSTGRES: bad address 'h'"):
        read_environment({**env, "CHAOS_POSTGRES": "h", "CHAOS_EXTERNAL_WIPE": "yes"})


def test_external_backend_drives_servers_it_did_not_start(chaos_cluster, monkeypatch):
    """This worker's native servers play the staging cluster; the shared proxy server plays its Toxiproxy."""
    native = chaos_cluster
    native.reset()
    native._database.wait_idle()          # its spare database is made in the background after a reset
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "1")
    monkeypatch.setenv("CHAOS_REDIS_PRIMARY", str(native.primary))
    monkeypatch.setenv("CHAOS_REDIS_REPLICA", str(native.replica))
    monkeypatch.setenv("CHAOS_POSTGRES", str(native.postgres))
    monkeypatch.setenv("TOXIPROXY_URL", native.api.url)
    monkeypatch.setenv("CHAOS_EXTERNAL_WIPE", "yes")
    with ExternalCluster.start(f"{native.name}-ext") as staging:
        assert all(name.startswith(f"{native.name}-ext.") for name in staging.links.values())
        with staging.direct_redis() as client:
            client.set("k", "v")
        staging.wait_replication()
        with staging.direct_redis("replica") as client:
            assert client.get("k") == "v"
        staging.worker_links("C1")
        staging.reset()
        assert not any(n.startswith(f"{native.name}-ext.C1") for n in native.api.proxies())
        assert native.links["redis"] in native.api.proxies()       # the other user's proxies are untouched
    assert not any(n.startswith(f"{native.name}-ext.") for n in native.api.proxies())
    native.reset()        # give this worker's cluster back in its original shape
