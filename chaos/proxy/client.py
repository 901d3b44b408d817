"""A small client for the Toxiproxy 2.x HTTP API (the real server or the embedded one).

It exists because toxiproxy-python has no request timeout, cannot update a proxy's
upstream and keeps its host in a class-level global: one client per Cluster needs none
of that. One keep-alive ``http.client`` connection, re-opened once when the server
closed it.
"""
from __future__ import annotations

import http.client
import json
import threading
from typing import Any
from urllib.parse import urlsplit

__all__ = ["ToxiproxyClient", "ToxiproxyError"]


class ToxiproxyError(Exception):
    """The API answered with an error status (or could not be reached: status 0).

    ``message`` is the server's own ``error`` text, e.g. ``proxy already exists``.
    """

    def __init__(self, status: int, message: str, method: str = "", path: str = ""):
        self.status = status
        self.message = message
        where = f" ({method} {path})" if method else ""
        super().__init__(f"toxiproxy API error {status}{where}: {message}")


class ToxiproxyClient:
    """Typed calls for every Toxiproxy API route the framework uses."""

    def __init__(self, url: str = "http://127.0.0.1:8474", timeout: float = 5.0):
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"bad Toxiproxy URL {url!r}: expected http://HOST:PORT, e.g. http://127.0.0.1:8474")
        self.url = f"http://{parts.hostname}:{parts.port or 8474}"
        self.host = parts.hostname
        self.port = parts.port or 8474
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()  # fault threads and the test share one client

    def __repr__(self) -> str:
        return f"ToxiproxyClient({self.url!r})"

    # -- transport ---------------------------------------------------------------------
    def _request(self, method: str, path: str, body: Any = None) -> Any:
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "User-Agent": "chaos-toxiproxy-client"}
        with self._lock:
            for attempt in (1, 2):
                if self._conn is None:
                    self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
                try:
                    self._conn.request(method, path, body=payload, headers=headers)
                    resp = self._conn.getresponse()
                    data = resp.read()
                    break
                except (ConnectionError, http.client.BadStatusLine, http.client.CannotSendRequest) as exc:
                    # A keep-alive connection the server closed while idle: retry once on a new one.
                    self.close()
                    if attempt == 2:
                        raise ToxiproxyError(0, f"cannot reach {self.url}: {exc}", method, path) from exc
                except OSError as exc:  # timeout, refused
                    self.close()
                    raise ToxiproxyError(0, f"cannot reach {self.url}: {exc}", method, path) from exc
        if resp.status >= 400:
            try:
                message = json.loads(data)["error"]
            except (ValueError, KeyError, TypeError):
                message = data.decode(errors="replace").strip() or resp.reason
            raise ToxiproxyError(resp.status, message, method, path)
        if not data:
            return None
        return json.loads(data)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- server ------------------------------------------------------------------------
    def version(self) -> str:
        data = self._request("GET", "/version")
        return data["version"] if isinstance(data, dict) else str(data)

    def reset(self) -> None:
        """Re-enable every proxy and remove every toxic (of every user of this server)."""
        self._request("POST", "/reset")

    # -- proxies -----------------------------------------------------------------------
    def proxies(self) -> dict[str, dict]:
        return self._request("GET", "/proxies") or {}

    def create_proxy(self, name: str, upstream: str, listen: str = "127.0.0.1:0", enabled: bool = True) -> dict:
        return self._request("POST", "/proxies",
                             {"name": name, "upstream": upstream, "listen": listen, "enabled": enabled})

    def get_proxy(self, name: str) -> dict:
        return self._request("GET", f"/proxies/{name}")

    def update_proxy(self, name: str, *, upstream: str | None = None, listen: str | None = None,
                     enabled: bool | None = None) -> dict:
        fields = {"upstream": upstream, "listen": listen, "enabled": enabled}
        return self._request("PATCH", f"/proxies/{name}", {k: v for k, v in fields.items() if v is not None})

    def delete_proxy(self, name: str) -> None:
        self._request("DELETE", f"/proxies/{name}")

    def populate(self, proxies: list[dict]) -> list[dict]:
        return (self._request("POST", "/populate", proxies) or {}).get("proxies") or []

    # -- toxics ------------------------------------------------------------------------
    def add_toxic(self, proxy: str, type: str, *, stream: str = "downstream", name: str | None = None,
                  toxicity: float = 1.0, **attributes: Any) -> dict:
        body = {"type": type, "stream": stream, "toxicity": toxicity, "attributes": attributes,
                "name": name or f"{type}_{stream}"}
        return self._request("POST", f"/proxies/{proxy}/toxics", body)

    def update_toxic(self, proxy: str, name: str, *, toxicity: float | None = None, **attributes: Any) -> dict:
        body: dict[str, Any] = {"attributes": attributes}
        if toxicity is not None:
            body["toxicity"] = toxicity
        return self._request("PATCH", f"/proxies/{proxy}/toxics/{name}", body)

    def remove_toxic(self, proxy: str, name: str) -> None:
        self._request("DELETE", f"/proxies/{proxy}/toxics/{name}")

    def toxics(self, proxy: str) -> list[dict]:
        return self._request("GET", f"/proxies/{proxy}/toxics") or []
