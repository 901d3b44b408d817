"""chaos/cluster/health.py on real processes: a healthy topology names nothing; a SIGKILLed
or SIGSTOPped server is named (and only it), with its log tail; a spared kind is not."""
from __future__ import annotations

import os
import signal
import time

import pytest

from chaos.cluster import start_cluster
from chaos.cluster.health import Component, rig_problems
from rig_helpers import breakable_cluster


@pytest.fixture
def own_cluster(request):
    """A topology of this test's own: the test breaks it."""
    with breakable_cluster(f"rig-health-{os.getpid()}-{request.node.name[-20:]}",
                           lambda name: start_cluster("native", name)) as cluster:
        yield cluster


def _wait_dead(pid: int) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)


def test_a_healthy_topology_names_nothing(own_cluster):
    components = own_cluster.components()
    assert [c.kind for c in components] == ["proxy", "redis", "redis", "postgres"]
    assert {c.name for c in components} == {"proxy server", "Redis node a (primary)", "Redis node b (replica)",
                                            "PostgreSQL"}
    assert all(c.pid for c in components)
    assert rig_problems(own_cluster, set()) == []
    assert rig_problems(own_cluster, set(), deep=True) == []


def test_a_killed_and_a_stopped_server_are_named_with_their_log(own_cluster):
    procs = own_cluster._procs
    pg_pid = procs["postgres"].pid
    os.kill(pg_pid, signal.SIGKILL)
    os.kill(procs["proxy"].pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5
    while len(rig_problems(own_cluster, set())) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    problems = rig_problems(own_cluster, set())
    assert len(problems) == 2, problems
    by_name = {p.split(" (pid")[0]: p for p in problems}
    assert by_name["PostgreSQL"].startswith(f"PostgreSQL (pid {pg_pid}) died: killed by SIGKILL; log tail:\n")
    assert "postgres.log" in by_name["PostgreSQL"]
    assert by_name["proxy server"].startswith(f"proxy server (pid {procs['proxy'].pid}) stopped (SIGSTOP)")
    assert rig_problems(own_cluster, {"postgres", "proxy server"}) == []


def test_a_killed_replica_is_named_as_the_replica(own_cluster):
    own_cluster.redis_pid("replica")
    pid = own_cluster._procs["b"].pid
    os.kill(pid, signal.SIGKILL)
    _wait_dead(pid)
    problems = rig_problems(own_cluster, ())
    assert len(problems) == 1 and problems[0].startswith(f"Redis node b (replica) (pid {pid}) died: killed by SIGKILL")
    assert rig_problems(own_cluster, {"redis"}) == []


def test_an_unreachable_endpoint_is_named_by_its_probe():
    """The network check the compose and external backends get: a port nothing listens on."""
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    from chaos.cluster.health import redis_probe
    component = Component("Redis node a (primary)", "redis", address=f"127.0.0.1:{port}",
                          probe=redis_probe("127.0.0.1", port))
    assert component.problem(remote=False) == ""          # a frequent check skips the probe
    found = component.problem()
    assert found.startswith(f"unreachable at 127.0.0.1:{port}: ConnectionRefusedError"), found
