"""The fault proxy server of one cluster: the embedded one, a real toxiproxy-server, or a shared URL.

Chosen by environment: ``TOXIPROXY_URL`` (a running server, shared: proxy names get the
cluster's prefix and only our own proxies are touched), else ``CHAOS_PROXY_SERVER``
(``embedded`` (default), ``toxiproxy-server`` or a path to it).
"""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Callable

import chaos
from chaos.cluster.binaries import toxiproxy_server
from chaos.cluster.local_server import LocalServer
from chaos.cluster.ports import free_port
from chaos.cluster.rundirs import ClusterDir
from chaos.proxy.client import ToxiproxyClient

EMBEDDED = "embedded"


class EmbeddedProxyProcess(LocalServer):
    """``python -m chaos.proxy serve --port 0 --port-file F``: it picks its own port."""

    kind = "proxy"

    def __init__(self, name: str, workdir: Path, cdir: ClusterDir | None = None):
        super().__init__(name, workdir, cdir, port=0, port_picker=lambda: 0)
        self.port_file = workdir / "proxy.port"

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "chaos.proxy", "serve", "--host", self.host, "--port", "0",
                "--port-file", str(self.port_file)]

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        root = str(Path(chaos.__file__).resolve().parent.parent)   # a checkout works without pip install
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        env["CHAOS_PARENT_PID"] = str(os.getpid())
        return env

    def launch(self) -> None:
        self.port_file.unlink(missing_ok=True)
        super().launch()

    def ready(self) -> bool:
        text = self.port_file.read_text().strip()
        self.port = int(text)
        return True

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


class ToxiproxyProcess(LocalServer):
    """The real Shopify toxiproxy-server binary."""

    kind = "toxiproxy"
    stop_signal = signal.SIGTERM

    def __init__(self, name: str, workdir: Path, cdir: ClusterDir | None = None, binary: str = "toxiproxy-server",
                 port_picker: Callable[[], int] = free_port):
        super().__init__(name, workdir, cdir, port_picker=port_picker)
        self.binary = toxiproxy_server(binary)

    def argv(self) -> list[str]:
        return [self.binary, "-host", self.host, "-port", str(self.port)]

    def ready(self) -> bool:
        client = ToxiproxyClient(self.url, timeout=0.5)
        try:
            return bool(client.version())
        finally:
            client.close()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def proxy_choice() -> tuple[str, str]:
    """("url", URL) for a shared server, else ("spawn", "embedded" | binary name/path)."""
    url = os.environ.get("TOXIPROXY_URL")
    if url:
        return "url", url
    return "spawn", os.environ.get("CHAOS_PROXY_SERVER") or EMBEDDED


def make_proxy_process(name: str, workdir: Path, cdir: ClusterDir | None, which: str) -> LocalServer:
    if which == EMBEDDED:
        return EmbeddedProxyProcess(name, workdir, cdir)
    return ToxiproxyProcess(name, workdir, cdir, binary=which)
