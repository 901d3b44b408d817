"""The smallest asyncio-Protocol relay on uvloop: the yardstick for the proxy's overhead.

    python bench/proxy_bare_relay.py LISTEN_PORT UPSTREAM_PORT

No API, no toxics, no bookkeeping: bytes in, bytes out. bench/proxy_bench.py runs it beside
the embedded proxy, so "proxied / bare" says what the toxic machinery and the API cost,
independently of how loaded the machine is.
"""
from __future__ import annotations

import asyncio
import sys

import uvloop


class _Upstream(asyncio.Protocol):
    def __init__(self, client: "_Client") -> None:
        self.client = client

    def data_received(self, data: bytes) -> None:
        self.client.transport.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.client.transport.close()


class _Client(asyncio.Protocol):
    upstream_port: int

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.early: list[bytes] | None = []
        self.upstream: asyncio.Transport | None = None
        asyncio.get_running_loop().create_task(self._dial())

    async def _dial(self) -> None:
        try:
            self.upstream, _ = await asyncio.get_running_loop().create_connection(
                lambda: _Upstream(self), "127.0.0.1", self.upstream_port)
        except OSError:
            self.transport.close()
            return
        for data in self.early or ():
            self.upstream.write(data)
        self.early = None

    def data_received(self, data: bytes) -> None:
        if self.early is not None:
            self.early.append(data)
        else:
            self.upstream.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.upstream is not None:
            self.upstream.close()


async def _main(listen_port: int, upstream_port: int) -> None:
    _Client.upstream_port = upstream_port
    server = await asyncio.get_running_loop().create_server(_Client, "127.0.0.1", listen_port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    uvloop.run(_main(int(sys.argv[1]), int(sys.argv[2])))
