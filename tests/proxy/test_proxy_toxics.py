"""Each toxic's observable effect on real TCP (redis-server and an echo server).

Timing checks use a firm lower bound (what the toxic promises) and a loose upper bound
(the machine is shared and loaded); how exact the timing is belongs in bench/.
"""
from __future__ import annotations

import selectors
import socket
import time

import pytest
import redis

from proxy_helpers import connect, recv_exactly, recv_until_eof, redis_ping


def test_latency_adds_at_least_its_delay_to_a_redis_ping(api, redis_through):
    name, port = redis_through
    client = redis.Redis(port=port, socket_timeout=10, protocol=2)
    assert client.ping()
    base = min(_timed(client.ping) for _ in range(5))
    api.add_toxic(name, type="latency", attributes={"latency": 100})
    took = _timed(client.ping)                  # an open connection gets the toxic too
    assert 0.100 <= took < 1.0, took
    api.call("DELETE", f"/proxies/{name}/toxics/latency_downstream")
    assert min(_timed(client.ping) for _ in range(3)) < 0.100 <= took, (base, took)
    client.close()


def test_latency_upstream_and_downstream_add_up(api, redis_through):
    name, port = redis_through
    api.add_toxic(name, type="latency", stream="upstream", attributes={"latency": 60})
    api.add_toxic(name, type="latency", attributes={"latency": 60})
    with connect(port) as sock:
        took = redis_ping(sock)
    assert 0.120 <= took < 1.0, took


def test_latency_jitter_stays_within_bounds(api, redis_through):
    name, port = redis_through
    api.add_toxic(name, type="latency", attributes={"latency": 50, "jitter": 20})
    with connect(port) as sock:
        times = [redis_ping(sock) for _ in range(10)]
    assert min(times) >= 0.030, times
    assert max(times) < 1.0, times


def test_timeout_zero_stalls_until_removed_then_closes(api, redis_through):
    name, port = redis_through
    with connect(port) as sock:
        redis_ping(sock)
        api.add_toxic(name, type="timeout", attributes={"timeout": 0})
        sock.settimeout(0.5)
        sock.sendall(b"PING\r\n")
        with pytest.raises(socket.timeout):
            sock.recv(10)                      # data is dropped: nothing comes back
        sock.settimeout(5)
        api.call("DELETE", f"/proxies/{name}/toxics/timeout_downstream")
        assert recv_until_eof(sock) == b""     # removing it closes the connection


def test_timeout_closes_when_its_source_ends(api, echo_through):
    """Toxiproxy's timeout passes the end of stream on (stub.Close on nil) even with 0."""
    name, port = echo_through
    api.add_toxic(name, type="timeout", attributes={"timeout": 0})
    with connect(port, timeout=5) as sock:
        sock.sendall(b"dropped")
        sock.shutdown(socket.SHUT_WR)          # client EOF -> upstream closes -> downstream ends
        assert recv_until_eof(sock) == b""


def test_timeout_closes_after_its_delay(api, redis_through):
    name, port = redis_through
    api.add_toxic(name, type="timeout", attributes={"timeout": 300})
    with connect(port) as sock:
        start = time.monotonic()
        sock.sendall(b"PING\r\n")
        assert recv_until_eof(sock) == b""
        took = time.monotonic() - start
    assert 0.300 <= took < 3.0, took


def test_reset_peer_resets_new_connections(api, redis_through):
    name, port = redis_through
    api.add_toxic(name, type="reset_peer", attributes={"timeout": 0})
    with connect(port) as sock:
        sock.sendall(b"PING\r\n")
        with pytest.raises(ConnectionResetError):
            recv_until_eof(sock)


def test_reset_peer_waits_its_timeout_and_leaves_idle_clients_alone(api, redis_through):
    name, port = redis_through
    api.add_toxic(name, type="reset_peer", attributes={"timeout": 300})
    with connect(port) as idle, connect(port) as sock:
        start = time.monotonic()
        sock.sendall(b"PING\r\n")
        with pytest.raises(ConnectionResetError):
            recv_until_eof(sock)
        assert 0.300 <= time.monotonic() - start < 3.0
        idle.settimeout(0.2)
        with pytest.raises(socket.timeout):
            idle.recv(1)                        # untouched: no data, no EOF, no reset


def test_reset_peer_gives_a_fin_to_connections_already_open(api, redis_through):
    name, port = redis_through
    with connect(port) as sock:
        redis_ping(sock)
        api.add_toxic(name, type="reset_peer", attributes={"timeout": 0})
        sock.sendall(b"PING\r\n")
        assert recv_until_eof(sock) == b""      # EOF, not ECONNRESET


def test_limit_data_closes_after_exactly_n_bytes(api, echo_through):
    name, port = echo_through
    api.add_toxic(name, type="limit_data", attributes={"bytes": 10})
    with connect(port) as sock:
        sock.sendall(b"x" * 1000)
        assert recv_until_eof(sock) == b"x" * 10


def test_limit_data_count_survives_updates(api, echo_through):
    name, port = echo_through
    api.add_toxic(name, type="limit_data", attributes={"bytes": 10})
    with connect(port) as sock:
        sock.sendall(b"abcdef")
        assert recv_exactly(sock, 6) == b"abcdef"
        api.json("POST", f"/proxies/{name}/toxics/limit_data_downstream", {"attributes": {"bytes": 8}})
        sock.sendall(b"ghijkl")
        assert recv_until_eof(sock) == b"gh"


def test_bandwidth_takes_at_least_the_time_its_rate_implies(api, echo_through):
    name, port = echo_through
    api.add_toxic(name, type="bandwidth", attributes={"rate": 500})   # 500 KB/s
    payload = b"b" * 250_000
    with connect(port, timeout=20) as sock:
        start = time.monotonic()
        sock.sendall(payload)
        assert recv_exactly(sock, len(payload)) == payload
        took = time.monotonic() - start
    assert 0.500 <= took < 5.0, took


def test_slow_close_delays_the_close_not_the_data(api, redis_through):
    name, port = redis_through
    api.add_toxic(name, type="slow_close", attributes={"delay": 1000})
    with connect(port) as sock:
        start = time.monotonic()
        sock.sendall(b"QUIT\r\n")
        assert recv_exactly(sock, 5) == b"+OK\r\n"
        answered = time.monotonic() - start
        assert recv_until_eof(sock) == b""
        took = time.monotonic() - start
    assert answered < 0.9, answered
    assert 1.0 <= took < 4.0, took


def test_slicer_splits_into_small_timed_pieces(api, echo_through):
    name, port = echo_through
    """1000 bytes in pieces of 100 (variation 0), 50 ms apart: the last piece leaves
    after >= 450 ms, and the client sees several reads (a 450 ms stall would merge them)."""
    api.add_toxic(name, type="slicer", attributes={"average_size": 100, "size_variation": 0, "delay": 50_000})
    payload = bytes(range(250)) * 4
    with connect(port) as sock:
        sock.sendall(payload)
        start = time.monotonic()
        reads, got = 0, b""
        while len(got) < len(payload):
            got += sock.recv(65536)
            reads += 1
        took = time.monotonic() - start
    assert got == payload
    assert reads >= 2, reads
    assert 0.400 <= took < 5.0, took


def test_noop_passes_everything(api, echo_through):
    name, port = echo_through
    api.add_toxic(name, type="noop")
    with connect(port) as sock:
        sock.sendall(b"n" * 5000)
        assert recv_exactly(sock, 5000) == b"n" * 5000


@pytest.mark.parametrize("toxicity, low, high", [(0.0, 0, 0), (1.0, 200, 200), (0.5, 60, 140)])
def test_toxicity_is_drawn_per_connection(api, echo_through, toxicity, low, high):
    """200 connections through limit_data bytes=0 (an active one closes at the first byte).

    With p=0.5 the count is Binomial(200, 0.5): [60, 140] is +-5.6 sd, so it cannot flake.
    """
    name, port = echo_through
    api.add_toxic(name, type="limit_data", toxicity=toxicity, attributes={"bytes": 0})
    socks = [connect(port) for _ in range(200)]
    try:
        for sock in socks:
            sock.sendall(b"t")
        closed = sum(1 for sock in socks if sock.recv(1) == b"")
    finally:
        for sock in socks:
            sock.close()
    assert low <= closed <= high, closed


def test_toxicity_is_drawn_again_when_the_chain_changes(api, echo_through):
    """A toxic re-runs (and redraws) when one is added after it: over 200 live
    connections a p=0.5 toxic's set of affected connections changes."""
    name, port = echo_through
    # 1 s of latency against a 0.5 s cut: a loaded machine's stalls do not make a fast echo slow
    api.add_toxic(name, type="latency", toxicity=0.5, attributes={"latency": 1000})
    socks = [connect(port) for _ in range(200)]
    try:
        def slow_set() -> set[int]:
            """Indexes of connections whose echo took >= 500 ms (arrivals watched together)."""
            waiting = {sock.fileno(): i for i, sock in enumerate(socks)}
            for sock in socks:
                sock.sendall(b"t")
            start = time.monotonic()
            slow = set()
            with selectors.DefaultSelector() as sel:
                for sock in socks:
                    sel.register(sock, selectors.EVENT_READ)
                while waiting and time.monotonic() - start < 10:
                    for key, _ in sel.select(timeout=1):
                        assert key.fileobj.recv(1) == b"t"
                        sel.unregister(key.fileobj)
                        i = waiting.pop(key.fd)
                        if time.monotonic() - start >= 0.5:
                            slow.add(i)
            assert not waiting
            return slow
        first = slow_set()
        api.add_toxic(name, type="noop")
        second = slow_set()
    finally:
        for sock in socks:
            sock.close()
    assert 40 <= len(first) <= 160 and 40 <= len(second) <= 160
    assert first != second


def test_upstream_down_accepts_then_closes(api, new_proxy):
    from proxy_helpers import free_port

    _, port = new_proxy(("127.0.0.1", free_port()))
    with connect(port) as sock:
        assert recv_until_eof(sock) == b""


def _timed(fn) -> float:
    start = time.monotonic()
    fn()
    return time.monotonic() - start
