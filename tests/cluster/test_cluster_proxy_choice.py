"""The proxy server a cluster uses: its own toxiproxy-server binary, or a shared one at TOXIPROXY_URL."""
from __future__ import annotations

import sys

import pytest
import redis

from chaos.cluster import MissingBinary
from chaos.cluster.native import NativeCluster


def test_a_toxiproxy_server_binary_is_started_with_its_own_flags(tmp_path, monkeypatch):
    # A stand-in with toxiproxy-server's command line (-host H -port P) that runs the embedded server.
    shim = tmp_path / "toxiproxy-server"
    shim.write_text(f'#!/bin/sh\n[ "$1" = -host ] && [ "$3" = -port ] || exit 9\n'
                    f'exec {sys.executable} -m chaos.proxy serve --host "$2" --port "$4"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("CHAOS_PROXY_SERVER", str(shim))
    with NativeCluster.start(f"shim-{tmp_path.name[-12:]}") as cluster:
        assert cluster._procs["proxy"].kind == "toxiproxy"
        with redis.Redis.from_url(cluster.redis_url(), decode_responses=True) as client:
            assert client.set("through", "the binary's proxies")
        cluster.wait_replication()


def test_a_missing_toxiproxy_server_says_where_to_get_it(monkeypatch):
    monkeypatch.setenv("CHAOS_PROXY_SERVER", "toxiproxy-server-that-is-not-installed")
    with pytest.raises(MissingBinary, match="github.com/Shopify/toxiproxy/releases"):
        NativeCluster.start("never-started")


def test_a_shared_proxy_server_gets_prefixed_proxies_and_is_left_as_found(chaos_cluster, monkeypatch):
    shared = chaos_cluster.api
    monkeypatch.setenv("TOXIPROXY_URL", shared.url)
    before = set(shared.proxies())
    with NativeCluster.start(f"{chaos_cluster.name}-shared") as guest:
        assert "proxy" not in guest._procs                       # no server process of its own
        prefix = f"{chaos_cluster.name}-shared."
        assert all(name.startswith(prefix) for name in guest.links.values())
        guest.api.add_toxic(guest.links["redis"], "latency", latency=1)
        guest.worker_links("C9")
        guest.reset()
        mine = {n for n in shared.proxies() if n.startswith(prefix)}
        assert mine == set(guest.links.values())
        assert set(shared.proxies()) - mine == before             # the host cluster's proxies untouched
    assert set(shared.proxies()) == before
