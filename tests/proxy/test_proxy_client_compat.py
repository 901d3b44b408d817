"""The server driven by the real `toxiproxy-python` client (as users of Toxiproxy drive it)."""
from __future__ import annotations

import time

import pytest
import redis

toxiproxy = pytest.importorskip("toxiproxy")
from toxiproxy.api import APIConsumer  # noqa: E402
from toxiproxy.exceptions import NotFound, ProxyExists  # noqa: E402


@pytest.fixture
def toxiproxy_client(api):
    """toxiproxy-python keeps its host in class attributes: point them here, then restore."""
    saved = APIConsumer.host, APIConsumer.port
    APIConsumer.host, APIConsumer.port = "127.0.0.1", api.port
    yield toxiproxy.Toxiproxy()
    APIConsumer.host, APIConsumer.port = saved


def test_create_toxic_disable_destroy_through_toxiproxy_python(toxiproxy_client, redis_upstream):
    server = toxiproxy_client
    assert server.running()
    assert b"2.12.0" in server.version()
    proxy = server.create(upstream="%s:%d" % redis_upstream, name="tp-redis")
    with pytest.raises(ProxyExists):
        server.create(upstream="%s:%d" % redis_upstream, name="tp-redis")
    port = int(proxy.listen.rsplit(":", 1)[1])
    client = redis.Redis(port=port, socket_timeout=5, protocol=2)
    assert client.ping()

    proxy.add_toxic(type="latency", attributes={"latency": 100})
    assert set(proxy.toxics()) == {"latency_downstream"}
    start = time.monotonic()
    assert client.ping()
    assert 0.100 <= time.monotonic() - start < 1.0
    proxy.destroy_toxic("latency_downstream")
    assert proxy.toxics() == {}

    with proxy.down():
        assert server.get_proxy("tp-redis").enabled is False
        with pytest.raises(redis.ConnectionError):
            redis.Redis(port=port, socket_timeout=2, protocol=2).ping()
    assert redis.Redis(port=port, socket_timeout=5, protocol=2).ping()

    with pytest.raises(NotFound):
        toxiproxy.api.APIConsumer.get("/proxies/none")
    assert server.destroy(proxy)
    assert server.get_proxy("tp-redis") is None


def test_populate_and_reset_through_toxiproxy_python(toxiproxy_client, echo_upstream):
    server = toxiproxy_client
    created = server.populate([
        {"name": "tp-a", "upstream": "%s:%d" % echo_upstream, "listen": "127.0.0.1:0"},
        {"name": "tp-b", "upstream": "%s:%d" % echo_upstream, "listen": "127.0.0.1:0"},
    ])
    assert sorted(p.name for p in created) == ["tp-a", "tp-b"]
    created[0].add_toxic(type="timeout", attributes={"timeout": 0})
    created[1].disable()
    assert server.reset()
    proxies = server.proxies()
    assert all(p.enabled for p in proxies.values())
    assert proxies["tp-a"].toxics() == {}
