"""The Toxiproxy-compatible HTTP API server and the `proxy serve` process around it.

The relay runs on a uvloop event loop in the main thread; the HTTP API (low traffic) is
the standard library's threading HTTP server, whose handlers hand each request to the
loop and wait for the answer, so all proxy state is owned by the loop thread.
"""
from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import resource
import secrets
import signal
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Awaitable, Callable

from chaos.proxy import gojson
from chaos.proxy.api import ApiError, ProxyCollection

VERSION = "2.12.0"                # the Toxiproxy API level this server implements
MAX_BODY = 1 << 20                # larger bodies get 413 (the real server has no limit)
HANDLER_TIMEOUT_S = 25.0          # Toxiproxy's handler timeout
_NAME = r"(?P<proxy>[^/]+)"
_TOXIC = r"(?P<toxic>[^/]+)"


@dataclass
class Reply:
    """One HTTP answer."""

    status: int
    body: bytes = b""
    content_type: str | None = "application/json"
    request_id: bool = True


def ok(status: int, value: Any) -> Reply:
    return Reply(status, gojson.dumps(value))


def error_reply(exc: ApiError) -> Reply:
    payload: dict[str, Any] = {"error": exc.message, "status": exc.status}
    if "proxies" in exc.extra:   # /populate's errors are JSON and carry what was created
        payload["proxies"] = exc.extra["proxies"]
        return Reply(exc.status, gojson.dumps(payload))
    return Reply(exc.status, gojson.dumps(payload) + b"\n", "text/plain; charset=utf-8")


class Api:
    """Routes requests to the collection, on the loop thread."""

    def __init__(self, collection: ProxyCollection) -> None:
        self.c = collection
        self.routes: list[tuple[re.Pattern, dict[str, Callable[..., Awaitable[Reply]]]]] = [
            (re.compile(r"^/version$"), {"GET": self.version}),
            (re.compile(r"^/proxies$"), {"GET": self.proxies, "POST": self.create}),
            (re.compile(r"^/populate$"), {"POST": self.populate}),
            (re.compile(r"^/reset$"), {"POST": self.reset}),
            (re.compile(rf"^/proxies/{_NAME}$"),
             {"GET": self.get, "POST": self.update, "PATCH": self.update, "DELETE": self.delete}),
            (re.compile(rf"^/proxies/{_NAME}/toxics$"), {"GET": self.toxics, "POST": self.add_toxic}),
            (re.compile(rf"^/proxies/{_NAME}/toxics/{_TOXIC}$"),
             {"GET": self.get_toxic, "POST": self.update_toxic, "PATCH": self.update_toxic,
              "DELETE": self.delete_toxic}),
            (re.compile(r"^/chaos/stats$"), {"GET": self.stats}),
        ]

    def match(self, method: str, path: str) -> tuple[Callable[..., Awaitable[Reply]] | None, dict, Reply | None]:
        for pattern, methods in self.routes:
            m = pattern.match(path)
            if m:
                handler = methods.get(method)
                if handler is None:
                    return None, {}, Reply(405, b"", None, request_id=False)
                return handler, m.groupdict(), None
        return None, {}, Reply(404, b"404 page not found\n", "text/plain; charset=utf-8", request_id=False)

    async def call(self, handler: Callable[..., Awaitable[Reply]], params: dict, body: bytes) -> Reply:
        try:
            return await handler(body=body, **params)
        except ApiError as exc:
            return error_reply(exc)

    async def version(self, body: bytes) -> Reply:
        return Reply(200, b'{"version": "%s"}\n' % VERSION.encode(), "application/json;charset=utf-8")

    async def proxies(self, body: bytes) -> Reply:
        return ok(200, self.c.list_json())

    async def create(self, body: bytes) -> Reply:
        return ok(201, await self.c.create(body))

    async def populate(self, body: bytes) -> Reply:
        return ok(201, {"proxies": (await self.c.populate(body)) or None})

    async def reset(self, body: bytes) -> Reply:
        await self.c.reset()
        return Reply(204, b"", None)

    async def get(self, body: bytes, proxy: str) -> Reply:
        return ok(200, self.c.get(proxy).to_json())

    async def update(self, body: bytes, proxy: str) -> Reply:
        return ok(200, await self.c.update(proxy, body))

    async def delete(self, body: bytes, proxy: str) -> Reply:
        self.c.delete(proxy)
        return Reply(204, b"", None)

    async def toxics(self, body: bytes, proxy: str) -> Reply:
        return ok(200, self.c.toxics_json(proxy))

    async def add_toxic(self, body: bytes, proxy: str) -> Reply:
        return ok(200, self.c.add_toxic(proxy, body))

    async def get_toxic(self, body: bytes, proxy: str, toxic: str) -> Reply:
        return ok(200, self.c.get_toxic(proxy, toxic))

    async def update_toxic(self, body: bytes, proxy: str, toxic: str) -> Reply:
        return ok(200, self.c.update_toxic(proxy, toxic, body))

    async def delete_toxic(self, body: bytes, proxy: str, toxic: str) -> Reply:
        self.c.delete_toxic(proxy, toxic)
        return Reply(204, b"", None)

    async def stats(self, body: bytes) -> Reply:
        return ok(200, self.c.stats())


def request_id() -> str:
    """A 20-character id in the alphabet of the xid ids the real server sends."""
    return base64.b32hexencode(secrets.token_bytes(12)).decode().lower()[:20]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "chaos-toxiproxy/" + VERSION
    api: Api
    loop: asyncio.AbstractEventLoop
    timeout = 60  # idle keep-alive connections, as Toxiproxy's idle timeout
    # headers and body go out in two writes: with Nagle on, the body waits for the client's
    # delayed ACK of the headers (40 ms on Linux), so every API call took 44 ms instead of 1
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def _serve(self) -> None:
        if self.headers.get("User-Agent", "").startswith("Mozilla/"):
            self._send(Reply(403, b"User agent not allowed\n", "text/plain; charset=utf-8", request_id=False))
            return
        path = self.path.split("?", 1)[0]
        handler, params, failure = self.api.match(self.command, path)
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True
            self._send(error_reply(ApiError(400, "bad Content-Length header: give the body's size in bytes")))
            return
        if length > MAX_BODY:
            self._discard_body(length)
            self.close_connection = True
            self._send(error_reply(ApiError(
                413, f"request body too large: {length} bytes, at most {MAX_BODY} bytes are accepted")))
            return
        body = self.rfile.read(length) if length else b""
        if failure is not None:
            self._send(failure)
            return
        future = asyncio.run_coroutine_threadsafe(self.api.call(handler, params, body), self.loop)
        try:
            reply = future.result(HANDLER_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - any internal failure becomes a 500 answer
            reply = error_reply(ApiError(500, f"internal error: {exc!r}"))
        self._send(reply)

    def _discard_body(self, length: int) -> None:
        """Read (up to 64 MiB of) an oversized body so the client can read our answer."""
        left = min(length, 64 * MAX_BODY)
        while left > 0:
            chunk = self.rfile.read(min(left, 65536))
            if not chunk:
                break
            left -= len(chunk)

    do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = do_HEAD = do_OPTIONS = _serve

    def _send(self, reply: Reply) -> None:
        self.send_response(reply.status)
        if reply.request_id:
            self.send_header("X-Toxiproxy-Request-Id", request_id())
        if reply.content_type:
            self.send_header("Content-Type", reply.content_type)
            if reply.content_type.startswith("text/plain"):
                self.send_header("X-Content-Type-Options", "nosniff")
        if reply.status != 204:
            self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        if reply.body and self.command != "HEAD":
            self.wfile.write(reply.body)


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


class ProxyServer:
    """The API server plus its proxies; `run()` serves until `stop()` or a signal."""

    def __init__(self, host: str = "127.0.0.1", port: int = 8474) -> None:
        self.host, self.port = host, port
        self.loop: asyncio.AbstractEventLoop | None = None
        self.collection: ProxyCollection | None = None
        self.http: _HttpServer | None = None
        self.stopped: asyncio.Event | None = None

    async def start(self, config: bytes | None = None) -> int:
        """Bind the API (and load a config, as /populate); returns the bound port."""
        self.loop = asyncio.get_running_loop()
        self.collection = ProxyCollection(self.loop)
        self.stopped = asyncio.Event()
        if config is not None:
            await self.collection.populate(config)
        handler = type("Handler", (_Handler,), {"api": Api(self.collection), "loop": self.loop})
        self.http = _HttpServer((self.host, self.port), handler)
        self.port = self.http.server_address[1]
        threading.Thread(target=self.http.serve_forever, kwargs={"poll_interval": 0.2},
                         name="toxiproxy-api", daemon=True).start()
        return self.port

    def stop(self) -> None:
        if self.stopped is not None:
            self.stopped.set()

    async def wait(self) -> None:
        assert self.stopped is not None
        await self.stopped.wait()

    async def close(self) -> None:
        if self.http is not None:
            http, self.http = self.http, None
            await asyncio.get_running_loop().run_in_executor(None, http.shutdown)
            http.server_close()
        if self.collection is not None:
            self.collection.close()
        await asyncio.sleep(0)


def _watch_parent(loop: asyncio.AbstractEventLoop, pid: int, on_death: Callable[[], None]) -> None:
    """Call `on_death` when process `pid` exits (pidfd when available, else polling)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        on_death()
        return
    except (AttributeError, OSError):
        async def poll() -> None:
            while True:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    on_death()
                    return
                await asyncio.sleep(0.2)
        loop.create_task(poll())
        return

    def ready() -> None:
        loop.remove_reader(fd)
        os.close(fd)
        on_death()

    loop.add_reader(fd, ready)


def write_port_file(path: Path, port: int) -> None:
    """Write the port atomically (tmp + rename) so a reader never sees a partial file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{port}\n")
    os.replace(tmp, path)


async def _serve(host: str, port: int, config: bytes | None, port_file: Path | None) -> None:
    server = ProxyServer(host, port)
    loop = asyncio.get_running_loop()
    bound = await server.start(config)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, server.stop)
    parent = os.environ.get("CHAOS_PARENT_PID")
    if parent:
        _watch_parent(loop, int(parent), server.stop)
    if port_file is not None:
        write_port_file(port_file, bound)
    print(json.dumps({"msg": "API HTTP server starting", "host": host, "port": bound, "version": VERSION}),
          file=sys.stderr, flush=True)
    try:
        await server.wait()
    finally:
        await server.close()


def raise_fd_limit() -> None:
    """Two sockets per proxied connection: lift the soft fd limit to the hard one (Go does too)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def serve(host: str = "127.0.0.1", port: int = 8474, config: bytes | None = None,
          port_file: Path | None = None) -> None:
    """Run the server in this process until SIGTERM/SIGINT (or the parent's death)."""
    raise_fd_limit()
    try:
        import uvloop
        loop_factory = uvloop.new_event_loop
    except ImportError:  # uvloop is a dependency; plain asyncio still works, only slower
        loop_factory = asyncio.new_event_loop
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(_serve(host, port, config, port_file))
