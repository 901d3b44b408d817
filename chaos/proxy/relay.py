"""The TCP relay: one listener per proxy, two asyncio Protocols per connection.

With no toxic in a direction, the reading protocol's `feed` *is* the destination
transport's `write`: the fast path does no work of its own. With toxics, a `Link` runs
the chunk through its chain of stages (chaos/proxy/toxics) before writing.

Closing follows Toxiproxy: when a direction ends (EOF, a toxic closing it, an error),
its destination is closed; the other direction then ends as if its source hit EOF,
drains its own toxics, and closes the remaining socket.
"""
from __future__ import annotations

import asyncio
import random
import socket
import struct
from time import monotonic
from typing import Callable, Iterable

from chaos.proxy.toxics import Stage, ToxicSettings

UPSTREAM, DOWNSTREAM = "upstream", "downstream"
HIGH_WATER = 1 << 20   # bytes held inside a direction's toxics before its source is paused
LOW_WATER = 1 << 18
_LINGER_RST = struct.pack("ii", 1, 0)


class Link:
    """One direction of one connection: source protocol -> toxic stages -> destination."""

    __slots__ = ("conn", "direction", "loop", "rng", "stages", "source", "dest", "held",
                 "paused_by_hold", "source_done", "ended")

    def __init__(self, conn: "Connection", direction: str, rng: random.Random) -> None:
        self.conn = conn
        self.direction = direction
        self.loop = conn.loop
        self.rng = rng
        self.stages: list[Stage] = []
        self.source: _Side | None = None
        self.dest: _Side | None = None
        self.held = 0
        self.paused_by_hold = False
        self.source_done = False   # the source hit EOF or went away
        self.ended = False         # the destination was closed

    # -- wiring -----------------------------------------------------------------------
    def bind(self, source: "_Side", dest: "_Side") -> None:
        self.source, self.dest = source, dest
        self._rewire()

    def _rewire(self) -> None:
        """Point the source at the chain's head and each stage at the next one."""
        sink: object = _DestSink(self)
        for stage in reversed(self.stages):
            stage.out = sink  # type: ignore[assignment]
            sink = stage
        if self.source is None or self.source_done or self.ended:
            return
        if self.stages:
            self.source.feed = self._feed_chain
        else:
            self.source.feed = self.dest.transport.write  # the fast path

    def _feed_chain(self, data: bytes) -> None:
        self.stages[0].push(data, monotonic())

    def add(self, settings: ToxicSettings) -> None:
        """A toxic was appended to this direction's chain (also on live connections)."""
        stage = settings.kind.stage(settings, self, _DestSink(self), self.rng)
        previous = self.stages[-1] if self.stages else None
        self.stages.append(stage)
        self._rewire()
        if previous is not None:
            previous.rerun()

    def update(self, name: str) -> None:
        for stage in self.stages:
            if stage.settings.name == name:
                stage.rerun()

    def remove(self, name: str) -> None:
        for index, stage in enumerate(self.stages):
            if stage.settings.name != name:
                continue
            if stage.cleanup():
                return
            stage.stop()
            pending = stage.drain_pending()
            del self.stages[index]
            self._rewire()
            target = self.stages[index] if index < len(self.stages) else _DestSink(self)
            for item in pending:
                if item is None:
                    target.push_eof()
                else:
                    target.push(*item)
            if index > 0:
                self.stages[index - 1].rerun()
            return

    # -- flow control asked for by stages ---------------------------------------------
    def hold(self, nbytes: int) -> None:
        self.held += nbytes
        if self.held > HIGH_WATER and not self.paused_by_hold and self.source is not None:
            self.paused_by_hold = True
            self.source.pause()

    def release(self, nbytes: int) -> None:
        self.held -= nbytes
        if self.paused_by_hold and self.held < LOW_WATER and self.source is not None:
            self.paused_by_hold = False
            self.source.resume()

    # -- end of stream ----------------------------------------------------------------
    def source_ended(self) -> None:
        """The source hit EOF or went away: let it through the toxics, then end."""
        if self.ended or self.source_done:
            return
        self.source_done = True
        if self.source is not None:
            self.source.feed = _discard
        if self.stages:
            self.stages[0].push_eof()
        else:
            self.finish()

    def finish(self) -> None:
        """The chain's output ended: close the destination (Toxiproxy: dest.Close())."""
        if self.ended:
            return
        self.ended = True
        for stage in self.stages:
            stage.stop()
        if self.source is not None:
            self.source.feed = _discard
        if self.dest is not None:
            self.dest.close()

    def stop(self) -> None:
        for stage in self.stages:
            stage.stop()


class _DestSink:
    """The end of a chain: the destination socket."""

    __slots__ = ("link",)

    def __init__(self, link: Link) -> None:
        self.link = link

    def push(self, data: bytes, ts: float) -> None:
        dest = self.link.dest
        if dest is not None and not self.link.ended and not dest.closed and data:
            dest.transport.write(data)

    def push_eof(self) -> None:
        self.link.finish()


def _discard(data: bytes) -> None:
    """Bytes read after a direction ended go nowhere (Toxiproxy stops reading)."""


class _Side(asyncio.Protocol):
    """One socket of a connection (the client's or the upstream's)."""

    __slots__ = ("conn", "transport", "early", "early_eof", "feed", "reading_link", "writing_link",
                 "closed", "paused_reasons")

    def __init__(self, conn: "Connection") -> None:
        self.conn = conn
        self.transport: asyncio.Transport | None = None
        # Until the connection is wired (upstream dialled), reads are kept: uvloop may
        # deliver data even when connection_made pauses reading.
        self.early: list[bytes] = []
        self.early_eof = False
        self.feed: Callable[[bytes], None] = self.early.append
        self.reading_link: Link | None = None   # the link this side is the source of
        self.writing_link: Link | None = None   # the link this side is the destination of
        self.closed = False
        self.paused_reasons = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.feed(data)

    def eof_received(self) -> bool:
        if self.reading_link is None:
            self.early_eof = True
        else:
            self.reading_link.source_ended()
        return True  # keep the socket open for the other direction's last bytes

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.ended()
        self.conn.side_lost()

    def ended(self) -> None:
        """This socket is gone: the link into it ends, the link out of it drains and ends."""
        if self.writing_link is not None:
            self.writing_link.finish()   # nothing can be written here any more
        if self.reading_link is not None:
            self.reading_link.source_ended()

    def wired(self) -> None:
        """Replay what arrived before the connection was wired."""
        early, self.early = self.early, []
        for data in early:
            self.feed(data)
        if self.early_eof and self.reading_link is not None:
            self.reading_link.source_ended()
        if self.closed:
            self.ended()

    # Backpressure: this socket's write buffer is full -> pause the other side's reads.
    def pause_writing(self) -> None:
        if self.writing_link is not None and self.writing_link.source is not None:
            self.writing_link.source.pause()

    def resume_writing(self) -> None:
        if self.writing_link is not None and self.writing_link.source is not None:
            self.writing_link.source.resume()

    def pause(self) -> None:
        self.paused_reasons += 1
        if self.paused_reasons == 1 and self.transport is not None and not self.closed:
            self.transport.pause_reading()

    def resume(self) -> None:
        self.paused_reasons = max(0, self.paused_reasons - 1)
        if self.paused_reasons == 0 and self.transport is not None and not self.closed:
            self.transport.resume_reading()

    def close(self) -> None:
        if self.closed or self.transport is None:
            return
        self.closed = True
        if self.conn.reset_on_close:
            sock = self.transport.get_extra_info("socket")
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
            except OSError:
                pass
            self.transport.abort()
        else:
            self.transport.close()


class Connection:
    """A client connection and its upstream connection, with one Link per direction."""

    __slots__ = ("proxy", "loop", "client", "upstream", "links", "reset_on_close", "dial_task", "gone")

    def __init__(self, proxy: "ProxyListener") -> None:
        self.proxy = proxy
        self.loop = proxy.loop
        self.client = _ClientSide(self)
        self.upstream = _Side(self)
        self.links = {UPSTREAM: Link(self, UPSTREAM, proxy.rng), DOWNSTREAM: Link(self, DOWNSTREAM, proxy.rng)}
        self.reset_on_close = False
        self.dial_task: asyncio.Task | None = None
        self.gone = False

    async def dial(self) -> None:
        """Connect upstream; if that fails, close the client at once (it sees EOF)."""
        host, port = self.proxy.upstream_address()
        try:
            await self.loop.create_connection(lambda: self.upstream, host, port)
        except (OSError, ValueError):
            self.upstream.closed = True
            self.client.close()
            return
        finally:
            self.dial_task = None
        if self.client.closed:
            self.upstream.close()
            return
        for direction, settings_list in self.proxy.chains().items():
            for settings in settings_list:
                if settings.kind.name == "reset_peer":
                    self.reset_on_close = True
                self.links[direction].stages.append(
                    settings.kind.stage(settings, self.links[direction], _DestSink(self.links[direction]), self.proxy.rng)
                )
        up, down = self.links[UPSTREAM], self.links[DOWNSTREAM]
        self.client.reading_link, self.client.writing_link = up, down
        self.upstream.reading_link, self.upstream.writing_link = down, up
        up.bind(self.client, self.upstream)
        down.bind(self.upstream, self.client)
        self.client.wired()
        self.upstream.wired()
        self.client.resume()

    def side_lost(self) -> None:
        if self.client.closed and self.upstream.closed and not self.gone:
            self.gone = True
            for link in self.links.values():
                link.stop()
            self.proxy.forget(self)

    def close(self) -> None:
        """Close both sockets now (proxy disabled, deleted or repointed): a FIN, like Toxiproxy."""
        if self.dial_task is not None:
            self.dial_task.cancel()
        for link in self.links.values():
            link.ended = True
            link.stop()
        self.client.close()
        self.upstream.close()
        if self.upstream.transport is None:
            self.upstream.closed = True
        self.side_lost()


class _ClientSide(_Side):
    """The accepted socket: paused until the upstream dial has succeeded."""

    __slots__ = ()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.pause()
        self.conn.proxy.adopt(self.conn)
        self.conn.dial_task = self.conn.loop.create_task(self.conn.dial())


class ProxyListener:
    """The listening socket of one proxy and the connections it accepted."""

    def __init__(self, loop: asyncio.AbstractEventLoop, rng: random.Random,
                 upstream: Callable[[], str], chains: Callable[[], dict[str, list[ToxicSettings]]]) -> None:
        self.loop = loop
        self.rng = rng
        self._upstream = upstream
        self.chains = chains
        self.server: asyncio.base_events.Server | None = None
        self.connections: set[Connection] = set()

    def upstream_address(self) -> tuple[str, int]:
        return split_host_port(self._upstream())

    async def listen(self, sock: socket.socket) -> None:
        self.server = await self.loop.create_server(lambda: Connection(self).client, sock=sock)

    def adopt(self, conn: Connection) -> None:
        self.connections.add(conn)

    def forget(self, conn: Connection) -> None:
        self.connections.discard(conn)

    def links(self, direction: str) -> Iterable[Link]:
        for conn in list(self.connections):
            if conn.client.reading_link is not None:
                yield conn.links[direction]

    def close_connections(self) -> None:
        for conn in list(self.connections):
            conn.close()

    def close(self) -> None:
        """Stop listening and drop every connection."""
        if self.server is not None:
            self.server.close()
            self.server = None
        self.close_connections()


def split_host_port(address: str) -> tuple[str, int]:
    """'host:port' -> (host, port); raises ValueError naming the problem."""
    host, sep, port = address.rpartition(":")
    if not sep:
        raise ValueError(f"address {address}: missing port in address")
    host = host.strip("[]")
    if not port.isdigit():
        raise ValueError(f"lookup tcp/{port}: unknown port")
    return host, int(port)
