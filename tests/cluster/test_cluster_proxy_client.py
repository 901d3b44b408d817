"""chaos.proxy.client against the cluster's real proxy server (embedded or Toxiproxy)."""
from __future__ import annotations

import time

import pytest
import redis

from chaos.cluster.ports import free_port
from chaos.proxy.client import ToxiproxyClient, ToxiproxyError


def test_proxy_life_cycle(cluster, toxiproxy):
    upstream = str(cluster.primary)
    made = toxiproxy.create_proxy("t.life", upstream)
    assert made["upstream"] == upstream and made["enabled"] is True
    assert made["listen"] != "127.0.0.1:0"                  # the real bound address comes back
    assert toxiproxy.get_proxy("t.life")["listen"] == made["listen"]
    assert "t.life" in toxiproxy.proxies()
    updated = toxiproxy.update_proxy("t.life", upstream=str(cluster.replica), enabled=False)
    assert (updated["upstream"], updated["enabled"]) == (str(cluster.replica), False)
    toxiproxy.delete_proxy("t.life")
    assert "t.life" not in toxiproxy.proxies()


def test_errors_carry_status_and_server_message(cluster, toxiproxy):
    with pytest.raises(ToxiproxyError) as missing:
        toxiproxy.get_proxy("t.nope")
    assert missing.value.status == 404 and "not found" in missing.value.message
    toxiproxy.create_proxy("t.dup", str(cluster.primary))
    with pytest.raises(ToxiproxyError) as dup:
        toxiproxy.create_proxy("t.dup", str(cluster.primary))
    assert dup.value.status == 409


def test_toxic_life_cycle_changes_real_traffic(cluster, toxiproxy, redis_proxy, redis_primary):
    toxic = toxiproxy.add_toxic(redis_proxy, "latency", latency=150)
    assert toxic["name"] == "latency_downstream" and toxic["attributes"]["latency"] == 150
    redis_primary.ping()                                 # a connection opened before timing
    started = time.perf_counter()
    redis_primary.ping()
    assert time.perf_counter() - started >= 0.14         # firm lower bound; no upper bound on a busy box
    updated = toxiproxy.update_toxic(redis_proxy, "latency_downstream", latency=0)
    assert updated["attributes"]["latency"] == 0
    assert [t["name"] for t in toxiproxy.toxics(redis_proxy)] == ["latency_downstream"]
    toxiproxy.remove_toxic(redis_proxy, "latency_downstream")
    assert toxiproxy.toxics(redis_proxy) == []


def test_populate_returns_the_bound_listen_addresses(cluster, toxiproxy):
    made = toxiproxy.populate([{"name": "t.p1", "upstream": str(cluster.primary), "listen": "127.0.0.1:0"},
                               {"name": "t.p2", "upstream": str(cluster.replica), "listen": "127.0.0.1:0"}])
    assert sorted(p["name"] for p in made) == ["t.p1", "t.p2"]
    listen = {p["name"]: p["listen"] for p in made}
    host, port = listen["t.p1"].rsplit(":", 1)
    with redis.Redis(host=host, port=int(port)) as client:
        assert client.ping()


def test_unreachable_server_fails_fast_with_status_0():
    client = ToxiproxyClient(f"http://127.0.0.1:{free_port()}", timeout=1.0)
    started = time.perf_counter()
    with pytest.raises(ToxiproxyError) as err:
        client.version()
    assert err.value.status == 0 and "cannot reach" in str(err.value)
    assert time.perf_counter() - started < 5


def test_bad_url_is_rejected_with_an_example():
    with pytest.raises(ValueError, match="expected http://HOST:PORT"):
        ToxiproxyClient("ftp://example")
