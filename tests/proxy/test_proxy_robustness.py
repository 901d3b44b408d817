"""Robustness: many connections with toxics changing under them, vanishing clients and
upstreams, and no file-descriptor or task leak after 10,000 short connections."""
from __future__ import annotations

import asyncio
import random
import socket
import struct
import threading
import time

from proxy_helpers import ApiClient, connect, recv_exactly, recv_until_eof

MUTATING_TOXICS = [  # toxics that delay or split data but never lose it
    {"type": "latency", "attributes": {"latency": 5, "jitter": 3}},
    {"type": "slicer", "attributes": {"average_size": 64, "size_variation": 32, "delay": 100}},
    {"type": "bandwidth", "attributes": {"rate": 5000}},
    {"type": "noop"},
]


def _wait_idle(api: ApiClient, baseline: dict, timeout: float = 10.0) -> dict:
    """Stats once connections have drained (closing is asynchronous)."""
    deadline = time.monotonic() + timeout
    while True:
        stats = api.json("GET", "/chaos/stats")
        if (stats["connections"] == 0 and stats["fds"] <= baseline["fds"]
                and stats["tasks"] <= baseline["tasks"]) or time.monotonic() > deadline:
            return stats


def test_200_concurrent_connections_keep_their_bytes_while_toxics_change(api, echo_through):
    name, port = echo_through
    baseline = api.json("GET", "/chaos/stats")
    stop = threading.Event()
    changes = []

    def churn() -> None:
        rng = random.Random(7)
        client = ApiClient(api.port)
        while not stop.is_set():
            spec = dict(rng.choice(MUTATING_TOXICS))
            spec["stream"] = rng.choice(["upstream", "downstream"])
            spec["name"] = f"churn-{len(changes)}"
            spec["toxicity"] = rng.choice([0.5, 1.0])
            client.add_toxic(name, **spec)
            changes.append(spec["name"])
            time.sleep(0.02)
            if len(changes) % 3 == 0:
                client.json("PATCH", f"/proxies/{name}/toxics/{spec['name']}", {"toxicity": 0.3})
            if len(changes) >= 2:
                client.call("DELETE", f"/proxies/{name}/toxics/{changes[-2]}")

    async def one_client(i: int) -> int:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        rng = random.Random(i)
        total = 0
        for _ in range(20):
            payload = rng.randbytes(rng.randint(1, 4000))
            writer.write(payload)
            await writer.drain()
            assert await reader.readexactly(len(payload)) == payload
            total += len(payload)
        writer.close()
        await writer.wait_closed()
        return total

    async def main() -> list[int]:
        return await asyncio.wait_for(asyncio.gather(*(one_client(i) for i in range(200))), 120)

    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    try:
        totals = asyncio.run(main())
    finally:
        stop.set()
        thread.join(10)
    assert len(totals) == 200 and all(t > 0 for t in totals)
    assert len(changes) >= 5, "the toxics did not change during the run"
    api.call("POST", "/reset")
    stats = _wait_idle(api, baseline)
    assert stats["connections"] == 0, stats


def test_clients_that_vanish_mid_stream_leave_nothing_behind(api, echo_through):
    name, port = echo_through
    baseline = api.json("GET", "/chaos/stats")
    api.add_toxic(name, type="latency", attributes={"latency": 50})
    for _ in range(50):
        sock = connect(port)
        sock.sendall(b"v" * 200_000)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()                       # RST while the proxy holds data for it
    stats = _wait_idle(api, baseline)
    assert stats["connections"] == 0, stats
    with connect(port) as sock:            # and the proxy still serves
        sock.sendall(b"ok")
        assert recv_exactly(sock, 2) == b"ok"


def test_upstream_that_goes_away_closes_the_client(api, new_proxy):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    _, port = new_proxy(listener.getsockname())
    try:
        with connect(port) as client:
            upstream, _ = listener.accept()
            upstream.sendall(b"bye")
            upstream.close()
            assert recv_until_eof(client) == b"bye"
    finally:
        listener.close()


def test_no_fd_or_task_leak_after_10000_short_connections(api, echo_through):
    name, port = echo_through
    with connect(port) as warm:
        warm.sendall(b"w")
        assert warm.recv(1) == b"w"
    time.sleep(0.2)
    baseline = _wait_idle(api, api.json("GET", "/chaos/stats"))

    def worker(count: int) -> None:
        for _ in range(count):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(b"s")
                assert sock.recv(1) == b"s"

    threads = [threading.Thread(target=worker, args=(2500,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not any(t.is_alive() for t in threads)
    stats = _wait_idle(api, baseline)
    assert stats["connections"] == 0, stats
    assert stats["fds"] <= baseline["fds"], (baseline, stats)
    assert stats["tasks"] <= baseline["tasks"], (baseline, stats)
