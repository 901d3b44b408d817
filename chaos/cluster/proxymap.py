"""The proxies of one topology in a proxy server: made, found, repointed and put back.

A topology owns the proxies whose names start with its prefix (the cluster name on a
shared proxy server, nothing on its own). Each listens on an address fixed when it is
made; ``reset`` puts every own proxy back to the upstream the topology wants, without
toxics, enabled, and deletes the ones made since (a worker's links).
"""
from __future__ import annotations

import re

from chaos.cluster.endpoint import Endpoint
from chaos.cluster.errors import ClusterError
from chaos.proxy.client import ToxiproxyClient

_NAME_RE = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,62}$")


class ProxyMap:
    """Proxy name -> where it listens, for the proxies of one topology (see the module doc)."""

    def __init__(self, api: ToxiproxyClient, prefix: str = "", listen_host: str = "127.0.0.1"):
        self.api = api
        self.prefix = prefix
        self.listen_host = listen_host             # where proxies listen (an address of the proxy server)
        self.listen: dict[str, Endpoint] = {}      # proxy name -> where it listens (fixed at creation)

    def endpoint(self, proxy: str) -> Endpoint:
        if proxy not in self.listen:
            self.listen[proxy] = Endpoint.parse(self.api.get_proxy(proxy)["listen"])
        return self.listen[proxy]

    def make(self, upstreams: dict[str, str]) -> None:
        """Make (or take over) proxy name -> upstream, each listening on a free port."""
        made = self.api.populate([{"name": name, "upstream": upstream, "listen": f"{self.listen_host}:0",
                                   "enabled": True} for name, upstream in upstreams.items()])
        for proxy in made:
            self.listen[proxy["name"]] = Endpoint.parse(proxy["listen"])

    def make_worker(self, worker: str, upstreams: dict[str, str]) -> tuple[dict[str, str], dict[str, Endpoint]]:
        """One worker process's own proxy per link (``<prefix><worker>.<link>``): link -> proxy
        name, and link -> where it listens."""
        if not _NAME_RE.match(worker):
            raise ValueError(f"bad worker name {worker!r}: use 1-63 letters, digits, '_', '-' or '.', "
                             f"e.g. 'C1' or 'order-service'")
        names = {link: f"{self.prefix}{worker}.{link}" for link in upstreams}
        self.make({names[link]: upstream for link, upstream in upstreams.items()})
        return names, {link: self.listen[name] for link, name in names.items()}

    def own(self) -> dict[str, dict]:
        """This topology's proxies as the server lists them."""
        return {n: p for n, p in self.api.proxies().items() if n.startswith(self.prefix)}

    def repoint(self, old_upstream: str, new_upstream: str, skip: set[str] = frozenset()) -> None:
        """Every own proxy that leads to ``old_upstream`` leads to ``new_upstream`` (but ``skip``)."""
        for name, proxy in self.own().items():
            if name not in skip and proxy["upstream"] == old_upstream:
                self.api.update_proxy(name, upstream=new_upstream)

    def reset(self, desired: dict[str, str]) -> None:
        """Back to ``desired`` (name -> upstream): no toxics, enabled, on their first listen
        address; own proxies not in it are deleted. One of them missing cannot be undone here."""
        listing = self.own()
        missing = [n for n in desired if n not in listing or n not in self.listen]
        if missing:
            raise ClusterError(f"shared proxies {missing} were deleted by a test; the cluster must be rebuilt")
        for name, proxy in listing.items():
            if name not in desired:
                self.api.delete_proxy(name)
                self.listen.pop(name, None)
                continue
            toxics = proxy["toxics"] if "toxics" in proxy else self.api.toxics(name)
            for toxic in toxics or []:
                self.api.remove_toxic(name, toxic["name"])
            change = {}
            if proxy["upstream"] != desired[name]:
                change["upstream"] = desired[name]
            if name in self.listen and proxy["listen"] != str(self.listen[name]):
                change["listen"] = str(self.listen[name])
            if not proxy["enabled"]:
                change["enabled"] = True
            if change:
                self.api.update_proxy(name, **change)

    def delete_own(self) -> None:
        """Remove every own proxy (a shared proxy server is left as it was found)."""
        for name in self.own():
            self.api.delete_proxy(name)
