"""The sentinel topology: three real Sentinels (`redis-server --sentinel`) behind the proxy.

What matters is that everything Sentinel hands out leads through the fault proxy (else a
client slips past every fault), that a failover is Sentinel's own doing and clients find
the new primary by asking, that a reset puts the original roles back, and that
parameters that cannot work are refused before anything starts.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis

from chaos.cluster import start_cluster
from chaos.cluster.endpoint import Endpoint
from chaos.cluster.errors import MissingBinary, Unsupported
from chaos.cluster.sentinel import ENV, SentinelSpec, UnknownTopology, parse_topology, sentinel_binary
from chaos.cluster.sentinels import DEFAULT_DOWN_AFTER_MS
from chaos.cluster.sentinel_client import redis_client
from chaos.errors import BadArguments
from chaos.workload.link import exchange
from faults.interface import FaultError
from faults.local import FaultThread, LocalContext
from faults.registry import get_fault
from faults.sentinel_failover import VOTER_DOWN_AFTER_MS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sentinels():
    topology = start_cluster(None, f"sentinel-test-{os.getpid()}", topology="sentinel")
    try:
        yield topology
    finally:
        topology.close()


@pytest.fixture
def sentinel_cluster(sentinels):
    sentinels.reset()
    return sentinels


def _pairs(reply) -> dict:
    return dict(zip(reply[::2], reply[1::2]))


def _proxy_ports(cluster) -> dict[str, int]:
    return {name: cluster.proxy_endpoint(proxy).port for name, proxy in cluster.links.items()}


def test_sentinels_hand_out_proxy_addresses_only(sentinel_cluster):
    cluster = sentinel_cluster
    ports = _proxy_ports(cluster)
    direct = {cluster.direct_redis("primary").connection_pool.connection_kwargs["port"],
              cluster.direct_redis("replica").connection_pool.connection_kwargs["port"]}
    for address in cluster.sentinel_addresses():
        host, port = address.rsplit(":", 1)
        assert int(port) in {ports[f"sentinel-{i}"] for i in (1, 2, 3)}
        with redis.Redis(host=host, port=int(port), decode_responses=True, protocol=2) as sentinel:
            master = sentinel.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", cluster.master_name)
            replicas = [_pairs(r) for r in sentinel.execute_command("SENTINEL", "REPLICAS", cluster.master_name)]
            peers = [_pairs(r) for r in sentinel.execute_command("SENTINEL", "SENTINELS", cluster.master_name)]
        assert int(master[1]) == ports["redis"], f"Sentinel names {master}, not node a's proxy {ports['redis']}"
        assert [int(r["port"]) for r in replicas] == [ports["replica"]]
        assert sorted(int(p["port"]) for p in peers) == sorted(
            ports[f"sentinel-{i}"] for i in (1, 2, 3) if f"{host}:{ports[f'sentinel-{i}']}" != address)
        assert not direct & {int(master[1]), *(int(r["port"]) for r in replicas)}, "a direct server port leaked"
    info = cluster.direct_redis("primary").info("replication")
    assert info["slave0"]["port"] == ports["replica"], f"the primary lists its replica as {info['slave0']}"
    links = cluster.worker_links("W1")
    assert links.master_name == cluster.master_name and links.sentinels == cluster.sentinel_addresses()


def test_clients_find_the_new_primary_by_asking_sentinel(sentinel_cluster):
    """A manual SENTINEL FAILOVER: the client was told node a's proxy, then node b's, and
    the old primary is demoted; the proxies were never repointed."""
    cluster = sentinel_cluster
    ports = _proxy_ports(cluster)
    upstreams = {name: proxy["upstream"] for name, proxy in cluster.api.proxies().items()}
    told: list[str] = []
    client = redis_client(redis_url="", sentinels=cluster.sentinel_addresses(), master_name=cluster.master_name,
                          on_master=told.append, decode_responses=True, protocol=2, socket_timeout=1)
    client.set("k", "before")
    ctx = LocalContext(cluster)
    with FaultThread(get_fault("sentinel-failover:mode=manual,after_entries=0,at_ms=0"), ctx):
        pass
    deadline = time.monotonic() + 10
    while True:       # the first write after the failover may meet the demoted node (READONLY): ask again
        try:
            client.set("k", "after")
            break
        except redis.ConnectionError:
            assert time.monotonic() < deadline, f"the client never found the new primary; told {told}"
            time.sleep(0.05)
    assert told[0].endswith(f":{ports['redis']}") and told[-1].endswith(f":{ports['replica']}"), told
    assert cluster.direct_redis("primary").get("k") == "after"
    assert cluster.node_role("a") == "slave" and cluster.node_role("b") == "master"
    assert {name: proxy["upstream"] for name, proxy in cluster.api.proxies().items()} == upstreams
    stop = ctx.ops[-1]["value"]
    assert stop["new_primary"] == "b" and stop["promote_s"] > 0 and "+switch-master" in stop["sentinel_events"]
    client.close()


def _down_after(cluster) -> list[int]:
    out = []
    for client in cluster.sentinel_clients():
        reply = client.execute_command("SENTINEL", "MASTER", cluster.master_name)
        fields = dict(zip(reply[::2], reply[1::2]))
        out.append(int(fields.get("down-after-milliseconds", fields.get(b"down-after-milliseconds"))))
    return out


def test_reset_restores_the_original_roles(sentinel_cluster):
    cluster = sentinel_cluster
    ctx = LocalContext(cluster, time_scale=0.2)
    with FaultThread(get_fault("sentinel-failover:mode=kill,after_entries=0,at_ms=0"), ctx):
        pass
    assert cluster.failed_over and str(cluster.sentinel_master()).endswith(f":{_proxy_ports(cluster)['replica']}")
    # once the failover is done no Sentinel judges the new primary down again within the run
    # (a starved new primary was failed over a second time beside two CPU hogs)
    assert ctx.ops[-1]["value"]["calmed"] == len(cluster.sentinel_clients())
    assert set(_down_after(cluster)) == {VOTER_DOWN_AFTER_MS}
    started = time.monotonic()
    cluster.reset()
    took = time.monotonic() - started
    assert set(_down_after(cluster)) == {DEFAULT_DOWN_AFTER_MS}, "the reset gives the Sentinels their own timing back"
    assert cluster.node_role("a") == "master" and cluster.node_role("b") == "slave"
    assert cluster.sentinel_master() == cluster.node_address("a")
    assert not cluster.sentinels.problem()
    print(f"reset after a Sentinel failover: {took:.3f} s")


def test_a_sentinel_that_never_elects_fails_the_fault_with_its_log(sentinel_cluster):
    """Two of three Sentinels stopped: no quorum, no promotion; the fault errors (the run's
    verdict is unknown) with the Sentinels' logs, and heal brings the killed primary back."""
    cluster = sentinel_cluster
    stopped = cluster.sentinel_procs[1:]
    for proc in stopped:
        os.kill(proc.pid, signal.SIGSTOP)
    try:
        fault = get_fault("sentinel-failover:mode=kill,after_entries=0,at_ms=0,down_after_ms=100,elect_timeout_ms=1200")
        with pytest.raises(FaultError) as err:
            with FaultThread(fault, LocalContext(cluster)):
                pass
    finally:
        for proc in stopped:
            os.kill(proc.pid, signal.SIGCONT)
    text = str(err.value)
    assert "did not promote" in text and "Sentinel logs" in text and "+sdown" in text, text[:2000]
    assert cluster.node_role("a") == "master", "heal must start the killed primary again"


def test_a_cell_names_the_topology_it_ran_on_not_the_shells(sentinel_cluster, chaos_options, monkeypatch):
    """A cell's CellSpec takes its backend, topology and server from the cluster it runs on, so a
    suite standing on a topology of its own (suites/sentinel) replays on it, whatever the shell says."""
    import shutil

    from chaos import cellrun
    monkeypatch.setenv(ENV, "replica")
    outcome = cellrun.run(cellrun.as_cell("s1", runs=1), sentinel_cluster, chaos_options, fixed_runs=True,
                          expected=False)
    shutil.rmtree(outcome.run_root, ignore_errors=True)
    assert (outcome.spec.backend, outcome.spec.topology, outcome.spec.server) == (
        "native", "sentinel", sentinel_cluster.server)
    assert "--backend native --topology sentinel" in outcome.row["reproduce"], outcome.row["reproduce"]


def test_promote_replica_is_refused_on_the_sentinel_topology(sentinel_cluster):
    with pytest.raises(Unsupported, match="sentinel-failover"):
        sentinel_cluster.promote_replica()


# -- bad input, refused before anything starts -------------------------------------------------
def test_parameters_that_cannot_work_are_refused():
    assert parse_topology("sentinel") == ("sentinel", SentinelSpec())
    assert parse_topology("sentinel:quorum=3")[1].quorum == 3
    with pytest.raises(UnknownTopology, match="quorum=4 with 3 Sentinels can never be reached"):
        parse_topology("sentinel:quorum=4")
    with pytest.raises(UnknownTopology, match="quorum=0"):
        parse_topology("sentinel:quorum=0")
    with pytest.raises(UnknownTopology, match="not one of"):
        parse_topology("sentinel:qorum=2")
    with pytest.raises(UnknownTopology, match="unknown topology 'cluster'"):
        parse_topology("cluster")
    with pytest.raises(BadArguments, match="down_after_ms=20000 is not shorter than elect_timeout_ms=15000"):
        get_fault("sentinel-failover:down_after_ms=20000")
    with pytest.raises(BadArguments, match="longer than a run gives a fault"):
        get_fault("sentinel-failover:elect_timeout_ms=40000")


def test_cli_refuses_an_impossible_quorum_before_starting_anything():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(ENV, None)
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "chaos", "run", "--topology", "sentinel:quorum=5", "--preset", "s1",
                          "--fault", "sentinel-failover"], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 254, out.stderr
    assert "quorum=5 with 3 Sentinels" in out.stderr
    assert time.monotonic() - started < 20


def test_no_sentinel_binary_names_the_package(monkeypatch):
    monkeypatch.delenv("CHAOS_SERVER", raising=False)
    monkeypatch.setenv("CHAOS_REDIS_SERVER", "/nonexistent/redis-server")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(MissingBinary) as err:
        sentinel_binary()
    assert "apt-get install -y redis-sentinel" in str(err.value) and "redis-server --sentinel" in str(err.value)
    with pytest.raises(MissingBinary):
        start_cluster(None, "never-started", topology="sentinel")


def test_the_sentinel_topology_runs_on_the_native_backend_only():
    with pytest.raises(Unsupported, match="native backend only"):
        start_cluster("compose", "never-started", topology="sentinel")


def test_min_replicas_refuses_writes_once_the_replica_stops_acking():
    """`sentinel:min_replicas=1`: with replication held both ways the primary soon answers
    NOREPLICAS (what a producer must retry), and takes writes again once the hold goes."""
    cluster = start_cluster(None, f"sentinel-minrep-{os.getpid()}", topology="sentinel:min_replicas=1")
    try:
        primary = cluster.direct_redis("primary")
        assert primary.config_get("min-replicas-to-write")["min-replicas-to-write"] == "1"
        primary.xadd("s", {"n": 0})
        link = cluster.links["replication"]
        for stream in ("downstream", "upstream"):
            cluster.api.add_toxic(link, "timeout", stream=stream, name=f"hold-{stream}", timeout=0)
        accepted, refused, deadline = 0, None, time.monotonic() + 10
        while refused is None and time.monotonic() < deadline:
            try:
                primary.xadd("s", {"n": accepted})
                accepted += 1
            except redis.ResponseError as exc:
                refused = str(exc)
            time.sleep(0.01)
        assert refused and refused.startswith("NOREPLICAS"), f"no refusal after {accepted} writes: {refused}"
        # Through Sentinel a NOREPLICAS reply drops the pooled connection, so the next call asks
        # Sentinel for the primary again: a fenced old primary can be named to a client just
        # before the switch (chaos.workload.link.exchange; redis-py itself does so for READONLY).
        via = redis_client(redis_url="", sentinels=cluster.sentinel_addresses(), master_name=cluster.master_name)
        with pytest.raises(redis.ResponseError, match="NOREPLICAS"):
            exchange(via, [("XADD", "s", "*", "n", "via")])
        pooled = via.connection_pool._available_connections
        assert pooled and all(conn._sock is None for conn in pooled), "the fenced primary's connection was kept"
        via.close()
        for stream in ("downstream", "upstream"):
            cluster.api.remove_toxic(link, f"hold-{stream}")
        cluster.reset()
        cluster.direct_redis("primary").xadd("s", {"n": "after"})
    finally:
        cluster.close()
