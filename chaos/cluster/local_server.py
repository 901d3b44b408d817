"""One local server process (redis-server, postgres, a proxy server): start, wait, stop.

Starting is split in ``launch()`` (fork, returns at once) and ``wait_ready()``, so a
topology can launch all its servers and then wait for them together. A port taken
between picking and binding shows in the log as "Address already in use": that is a
PortInUse, and ``start_all`` retries the server on a new port.
"""
from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Callable

from chaos.cluster import spawner
from chaos.cluster.errors import PortInUse, ServerStartError
from chaos.cluster.ports import HOST, free_port
from chaos.cluster.rundirs import ClusterDir

PORT_ATTEMPTS = 5
IN_USE_MARKERS = ("address already in use",)


class LocalServer:
    """Base class: subclasses give ``argv()``, ``ready()`` and how to run (user, env)."""

    kind = "server"
    user: str | None = None
    stop_signal = signal.SIGKILL

    def __init__(self, name: str, workdir: Path, cdir: ClusterDir | None = None, port: int | None = None,
                 port_picker: Callable[[], int] = free_port):
        self.name = name
        self.workdir = workdir
        self.cdir = cdir
        self.host = HOST
        self.port_picker = port_picker
        self.port = port if port is not None else port_picker()
        self.proc: subprocess.Popen | None = None
        self.launched_at = 0.0
        self.ready_s = 0.0       # launch -> ready, for the start-up benchmark
        self._log_sizes: dict[Path, int] = {}
        workdir.mkdir(mode=0o755, parents=True, exist_ok=True)

    # -- for subclasses ----------------------------------------------------------------
    def argv(self) -> list[str]:
        raise NotImplementedError

    def ready(self) -> bool:
        raise NotImplementedError

    def env(self) -> dict[str, str] | None:
        return None

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.kind}.log"

    def log_files(self) -> list[Path]:
        return [self.log_path]

    # -- life cycle --------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def launch(self) -> None:
        self._log_sizes = {path: _size(path) for path in self.log_files()}   # this attempt's output starts here
        self.launched_at = time.perf_counter()
        self.proc = spawner.spawn(self.argv(), log=self.log_path, cwd=self.workdir, user=self.user, env=self.env())
        if self.cdir is not None:
            self.cdir.record(self.proc.pid, self.name)

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                self._raise_exited()
            try:
                if self.ready():
                    self.ready_s = time.perf_counter() - self.launched_at
                    return
            except Exception:  # noqa: BLE001 - not ready yet; the process check above decides
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise ServerStartError(f"{self.name} ({self.kind}) not ready on {self.host}:{self.port} "
                                       f"after {timeout:.0f} s; log tail:\n{self.log_tail()}")
            time.sleep(0.005)

    def start(self, timeout: float = 30.0) -> None:
        """Launch and wait, retrying on a new port if the picked one was taken meanwhile."""
        start_all([self], timeout)

    def stop(self, sig: int | None = None) -> None:
        if self.proc is not None:
            spawner.stop(self.proc, sig or self.stop_signal)

    def kill(self) -> None:
        """SIGKILL the server alone (a real crash); the caller decides what happens next."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(5)

    def log_tail(self, lines: int = 20) -> str:
        out = []
        for path in self.log_files():
            try:
                text = path.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            out.append(f"--- {path}\n" + "\n".join(text))
        return "\n".join(out) or "(no log written)"

    def _raise_exited(self) -> None:
        code = self.proc.returncode if self.proc else None
        tail = self.log_tail()
        if any(marker in self._this_attempts_output().lower() for marker in IN_USE_MARKERS):
            raise PortInUse(f"{self.name}: port {self.port} was taken (exit {code}); log tail:\n{tail}")
        raise ServerStartError(f"{self.name} ({self.kind}) exited with code {code} during start-up; "
                               f"log tail:\n{tail}")


    def _this_attempts_output(self) -> str:
        out = []
        for path, offset in self._log_sizes.items():
            try:
                with open(path, "rb") as log:
                    log.seek(offset)
                    out.append(log.read().decode(errors="replace"))
            except OSError:
                pass
        return "\n".join(out)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def start_all(servers: list[LocalServer], timeout: float = 30.0, launched: bool = False) -> None:
    """Launch every server (unless ``launched``), then wait for each; retry port clashes.

    On any failure every server of the list is stopped before the error propagates.
    """
    try:
        if not launched:
            for server in servers:
                server.launch()
        for server in servers:
            for attempt in range(1, PORT_ATTEMPTS + 1):
                try:
                    server.wait_ready(timeout)
                    break
                except PortInUse:
                    if attempt == PORT_ATTEMPTS:
                        raise
                    server.port = server.port_picker()
                    server.launch()
    except BaseException:
        for server in servers:
            server.stop()
        raise
