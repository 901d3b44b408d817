"""The proxy collection behind the HTTP API: Toxiproxy 2.x's semantics, checks and errors.

Everything here runs on the event loop thread (the HTTP layer hands each request over),
so the collection needs no locks, like one goroutine owning the state.
"""
from __future__ import annotations

import asyncio
import errno
import os
import random
import re
import socket
from dataclasses import dataclass, field
from typing import Any

from chaos.proxy import gojson
from chaos.proxy.relay import DOWNSTREAM, UPSTREAM, ProxyListener, split_host_port
from chaos.proxy.toxics import TOXIC_TYPES, AttributeError_, ToxicSettings

# Names become URL path segments; the real server accepts anything and then cannot
# address a name with '/' or '?'. We refuse such names up front with a 400 (documented).
NAME_RE = re.compile(r"^[A-Za-z0-9._:~-]{1,200}$")
NAME_RULE = "use 1-200 of A-Z a-z 0-9 . _ : ~ -"
POPULATE_TYPE = "[]struct {...}"


class ApiError(Exception):
    """An API failure with Toxiproxy's status code and message."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra


def bad_body(exc: Exception) -> ApiError:
    return ApiError(400, f"bad request body: {exc}")


@dataclass
class ProxyRecord:
    """One proxy: its settings, toxics in insertion order, and its listener when enabled."""

    name: str
    listen: str
    upstream: str
    enabled: bool
    toxics: list[ToxicSettings] = field(default_factory=list)
    listener: ProxyListener | None = None

    def chain(self, direction: str) -> list[ToxicSettings]:
        return [t for t in self.toxics if t.direction == direction]

    def chains(self) -> dict[str, list[ToxicSettings]]:
        return {UPSTREAM: self.chain(UPSTREAM), DOWNSTREAM: self.chain(DOWNSTREAM)}

    def toxic(self, name: str) -> ToxicSettings:
        for toxic in self.toxics:
            if toxic.name == name:
                return toxic
        raise ApiError(404, "toxic not found")

    def toxics_json(self) -> list[dict]:
        return [toxic_json(t) for t in self.chain(UPSTREAM) + self.chain(DOWNSTREAM)]

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "listen": self.listen,
            "upstream": self.upstream,
            "enabled": self.enabled,
            "toxics": self.toxics_json(),
        }


def toxic_json(t: ToxicSettings) -> dict:
    return {
        "attributes": dict(t.attributes),
        "name": t.name,
        "type": t.kind.name,
        "stream": t.stream,
        "toxicity": gojson.float32(t.toxicity),
    }


def bind_listener(listen: str) -> tuple[socket.socket, str]:
    """Bind a listening socket like Go's net.Listen("tcp", listen); returns it and its address.

    An empty host (or an empty listen) means 127.0.0.1 here: Go would use every
    interface, and this project's servers bind loopback only.
    """
    try:
        host, port = split_host_port(listen or ":0")
    except ValueError as exc:
        raise ApiError(500, f"listen tcp: {exc}") from None
    host = host or "127.0.0.1"
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror:
        raise ApiError(500, f"listen tcp: lookup {host}: no such host") from None
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(1024)
    except OSError as exc:
        sock.close()
        text = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        if exc.errno == errno.EADDRNOTAVAIL:
            text = "cannot assign requested address"
        raise ApiError(500, f"listen tcp {listen}: bind: {text}") from None
    sock.setblocking(False)
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    return sock, f"{shown}:{bound_port}"


def check_name(name: str, what: str, suffix: str = "") -> None:
    if not NAME_RE.match(name):
        raise ApiError(400, f"invalid {what} name {name[:80]!r}{suffix}: {NAME_RULE}")


class ProxyCollection:
    """All proxies of one server. Methods take raw bodies so checks run in Go's order."""

    def __init__(self, loop: asyncio.AbstractEventLoop, rng: random.Random | None = None) -> None:
        self.loop = loop
        self.rng = rng or random.Random()
        self.proxies: dict[str, ProxyRecord] = {}

    # -- proxies ----------------------------------------------------------------------
    def get(self, name: str) -> ProxyRecord:
        try:
            return self.proxies[name]
        except KeyError:
            raise ApiError(404, "proxy not found") from None

    def list_json(self) -> dict:
        return {name: p.to_json() for name, p in self.proxies.items()}

    async def _start(self, proxy: ProxyRecord) -> None:
        """Listen (Toxiproxy's start); on failure the proxy stays disabled."""
        if proxy.listener is not None:
            return
        sock, address = bind_listener(proxy.listen)
        listener = ProxyListener(self.loop, self.rng, lambda: proxy.upstream, proxy.chains)
        await listener.listen(sock)
        proxy.listener = listener
        proxy.listen = address
        proxy.enabled = True

    def _stop(self, proxy: ProxyRecord) -> None:
        if proxy.listener is not None:
            proxy.listener.close()
            proxy.listener = None
        proxy.enabled = False

    @staticmethod
    def _proxy_fields(body: Any, value_type: str = "toxiproxy.Proxy") -> dict:
        return gojson.fields(body, "Proxy", {"name": str, "listen": str, "upstream": str, "enabled": bool}, value_type)

    async def create(self, raw: bytes) -> dict:
        try:
            given = self._proxy_fields(gojson.decode(raw))
        except gojson.BodyError as exc:
            raise bad_body(exc) from None
        proxy = self._new_record(given)
        if proxy.name in self.proxies:
            raise ApiError(409, "proxy already exists")
        if proxy.enabled:
            await self._start(proxy)
        self.proxies[proxy.name] = proxy
        return proxy.to_json()

    @staticmethod
    def _new_record(given: dict, suffix: str = "") -> ProxyRecord:
        for required in ("name", "upstream"):
            if not given.get(required):
                raise ApiError(400, f"missing required field: {required}{suffix}")
        check_name(given["name"], "proxy", suffix)
        return ProxyRecord(
            name=given["name"],
            listen=given.get("listen", ""),
            upstream=given["upstream"],
            enabled=given.get("enabled", True),
        )

    async def update(self, name: str, raw: bytes) -> dict:
        proxy = self.get(name)
        try:
            given = self._proxy_fields(gojson.decode(raw))
        except gojson.BodyError as exc:
            raise bad_body(exc) from None
        listen = given.get("listen", proxy.listen)
        upstream = given.get("upstream", proxy.upstream)
        enabled = given.get("enabled", proxy.enabled)
        if listen != proxy.listen:
            self._stop(proxy)
            proxy.listen, proxy.upstream = listen, upstream
        elif upstream != proxy.upstream:
            # Deliberate difference: the real server restarts the listener here (a short
            # window of refused connections); we keep it and only drop the connections.
            proxy.upstream = upstream
            if proxy.listener is not None:
                proxy.listener.close_connections()
        if enabled and proxy.listener is None:
            await self._start(proxy)
        elif not enabled and proxy.enabled:
            self._stop(proxy)
        return proxy.to_json()

    def delete(self, name: str) -> None:
        proxy = self.get(name)
        self._stop(proxy)
        del self.proxies[name]

    async def populate(self, raw: bytes) -> list[dict]:
        try:
            body = gojson.decode(raw)
            if not isinstance(body, list):
                raise gojson.BodyError(
                    f"json: cannot unmarshal {gojson.go_type_name(body)} into Go value of type {POPULATE_TYPE}"
                )
            given = [self._proxy_fields(item, "struct {...}") for item in body]
        except gojson.BodyError as exc:
            raise ApiError(400, f"bad request body: {exc}", proxies=None) from None
        try:
            records = [self._new_record(g, f" at proxy {i + 1}") for i, g in enumerate(given)]
        except ApiError as exc:
            raise ApiError(exc.status, exc.message, proxies=None) from None
        done: list[dict] = []
        for record in records:
            existing = self.proxies.get(record.name)
            if existing is not None:
                if existing.listen == record.listen and existing.upstream == record.upstream:
                    done.append(existing.to_json())
                    continue
                self._stop(existing)
                del self.proxies[record.name]
            try:
                if record.enabled:
                    await self._start(record)
            except ApiError as exc:
                raise ApiError(exc.status, exc.message, proxies=done or None) from None
            self.proxies[record.name] = record
            done.append(record.to_json())
        return done

    async def reset(self) -> None:
        """Re-enable every proxy and remove every toxic (Toxiproxy's POST /reset)."""
        for proxy in list(self.proxies.values()):
            await self._start(proxy)
            for toxic in list(proxy.toxics):
                self._remove_toxic(proxy, toxic)

    # -- toxics -----------------------------------------------------------------------
    def toxics_json(self, name: str) -> list[dict]:
        return self.get(name).toxics_json()

    def get_toxic(self, name: str, toxic: str) -> dict:
        return toxic_json(self.get(name).toxic(toxic))

    def add_toxic(self, name: str, raw: bytes) -> dict:
        proxy = self.get(name)
        try:
            body = gojson.decode(raw)
            given = gojson.fields(
                body, "ToxicWrapper",
                {"name": str, "type": str, "stream": str, "toxicity": float, "attributes": object},
                "toxics.ToxicWrapper",
            )
        except gojson.BodyError as exc:
            raise bad_body(exc) from None
        stream = given.get("stream", "downstream")
        direction = stream.lower()
        if direction not in (UPSTREAM, DOWNSTREAM):
            raise ApiError(400, "stream was invalid, can be either upstream or downstream")
        kind = TOXIC_TYPES.get(given.get("type", ""))
        if kind is None:
            raise ApiError(400, "invalid toxic type")
        toxic_name = given.get("name") or f"{kind.name}_{stream}"
        check_name(toxic_name, "toxic")
        if any(t.name == toxic_name for t in proxy.toxics):
            raise ApiError(409, "toxic already exists")
        try:
            attributes = kind.decode(kind.defaults(), given.get("attributes"))
        except AttributeError_ as exc:
            raise bad_body(exc) from None
        settings = ToxicSettings(kind, toxic_name, stream, direction, given.get("toxicity", 1.0), attributes)
        proxy.toxics.append(settings)
        if proxy.listener is not None:
            for link in proxy.listener.links(direction):
                link.add(settings)
        return toxic_json(settings)

    def update_toxic(self, name: str, toxic: str, raw: bytes) -> dict:
        proxy = self.get(name)
        settings = proxy.toxic(toxic)
        try:
            given = gojson.fields(
                gojson.decode(raw), "struct { Attributes interface {}; Toxicity float32 }",
                {"attributes": object, "toxicity": float}, "struct {...}",
            )
            attributes = settings.kind.decode(settings.attributes, given.get("attributes"))
        except (gojson.BodyError, AttributeError_) as exc:
            raise bad_body(exc) from None
        settings.attributes.clear()
        settings.attributes.update(attributes)   # in place: every connection's stage sees it
        settings.toxicity = given.get("toxicity", settings.toxicity)
        if proxy.listener is not None:
            for link in proxy.listener.links(settings.direction):
                link.update(settings.name)
        return toxic_json(settings)

    def delete_toxic(self, name: str, toxic: str) -> None:
        proxy = self.get(name)
        self._remove_toxic(proxy, proxy.toxic(toxic))

    def _remove_toxic(self, proxy: ProxyRecord, settings: ToxicSettings) -> None:
        proxy.toxics.remove(settings)
        if proxy.listener is not None:
            for link in proxy.listener.links(settings.direction):
                link.remove(settings.name)

    # -- life cycle -------------------------------------------------------------------
    def close(self) -> None:
        for proxy in self.proxies.values():
            if proxy.listener is not None:
                proxy.listener.close()
                proxy.listener = None

    def stats(self) -> dict:
        """Not in Toxiproxy: counts for leak tests (GET /chaos/stats)."""
        return {
            "proxies": len(self.proxies),
            "connections": sum(len(p.listener.connections) for p in self.proxies.values() if p.listener),
            "tasks": len(asyncio.all_tasks(self.loop)),
            "fds": len(os.listdir("/proc/self/fd")),
        }
