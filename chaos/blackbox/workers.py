"""The worker contract: the user's consumer command, run as N real OS processes.

Each process gets its own proxies (``cluster.worker_links(name)``) and finds them in its
environment, so a fault can hit one worker's link and the code runs as in production:

| variable | value |
| --- | --- |
| ``CHAOS_REDIS_URL`` | ``redis://127.0.0.1:<port>/0`` through the worker's own Redis proxy |
| ``CHAOS_PG_DSN`` | ``postgresql://postgres@127.0.0.1:<port>/chaos`` through its PostgreSQL proxy |
| ``CHAOS_STREAM``, ``CHAOS_GROUP`` | the stream and consumer group (the group exists, created at 0) |
| ``CHAOS_CONSUMER`` | the process name, ``C1`` ... ``CN``: use it as the consumer name |
| ``CHAOS_REPLICA_URL``, ``CHAOS_TIME_SCALE`` | the replica through its proxy; the run's time scale |
| ``CHAOS_SENTINELS``, ``CHAOS_MASTER_NAME`` | sentinel topology only: ``host:port,...`` of the Sentinels' proxies and the name they monitor the primary under (``redis.sentinel.Sentinel(...).master_for(name)``) |

The command is split like a shell would (``shlex``) but run without one, so a SIGKILL
reaches the consumer itself; each worker is its own process group, and a kill reaches
the whole group (``taskiq worker`` forks its own worker processes). A worker is *ready*
when it, or a process it forked, holds an established TCP connection to its Redis
proxy: that is observable from outside and needs nothing from the worker.
"""
from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil

from chaos.blackbox.config import WorkerSpec
from chaos.blackbox.errors import ConfigError, WorkerError
from chaos.cluster import spawner
from chaos.workload.procutil import tail

TAIL_LINES = 25


def parse_command(command: str | list[str]) -> list[str]:
    """The argv of a worker command; a ConfigError if it is empty or not runnable."""
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if not argv:
        raise ConfigError("the worker command is empty; give e.g. --worker-cmd \"python my_consumer.py\"")
    if shutil.which(argv[0]) is None and not Path(argv[0]).is_file():
        raise ConfigError(f"worker command {argv[0]!r} is not on PATH and is not a file; "
                          f"give a full path or e.g. \"python {argv[0]}\"")
    return argv


def _port(url: str) -> int:
    return int(urlsplit(url).port or 0)


@dataclass
class WorkerProcess:
    """One running consumer process; satisfies faults.interface.WorkerHandle."""

    name: str
    links: Any  # chaos.cluster.WorkerLinks
    proc: subprocess.Popen
    log: Path
    expected_exit: bool = False  # set when a fault or the pool ended it on purpose

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self, sig: int) -> None:
        """Signal the worker's whole process group (a real SIGKILL/SIGSTOP of the consumer)."""
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.expected_exit = True
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def alive(self) -> bool:
        return self.proc.poll() is None

    def exit_code(self) -> int | None:
        return self.proc.poll()

    def output_tail(self, lines: int = TAIL_LINES) -> str:
        return tail(self.log, lines)

    def connected(self) -> bool:
        """Whether this worker or a child holds an established connection to its Redis proxy
        (or, in the sentinel topology, to a Sentinel's)."""
        ports = {_port(self.links.redis_url), *(_port(f"redis://{s}") for s in getattr(self.links, "sentinels", ()))}

        def holds(p: psutil.Process) -> bool:
            return any(c.status == psutil.CONN_ESTABLISHED and c.raddr and c.raddr.port in ports
                       for c in p.net_connections(kind="tcp"))
        try:
            root = psutil.Process(self.proc.pid)
            # The process itself first: finding its children reads every process's /proc stat
            # (5-10 ms of CPU on a busy box), needed only when a forked child connects (taskiq).
            return holds(root) or any(holds(p) for p in root.children(recursive=True))
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return False


@dataclass
class WorkerPool:
    """Starts the consumer processes, checks they came up, and stops them (always)."""

    argv: list[str]
    spec: WorkerSpec
    links_for: Callable[[str], Any]   # cluster.worker_links
    log_dir: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    workers: list[WorkerProcess] = field(default_factory=list)

    def names(self) -> list[str]:
        return [f"C{i}" for i in range(1, self.spec.processes + 1)]

    def start(self) -> None:
        """Spawn every process and wait until each is connected; WorkerError otherwise.

        On error every process already started is stopped before raising."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            for name in self.names():
                self.workers.append(self._spawn(name))
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _spawn(self, name: str) -> WorkerProcess:
        links = self.links_for(name)
        env = {**os.environ, **self.spec.env, **self.extra_env,
               "CHAOS_REDIS_URL": links.redis_url, "CHAOS_REPLICA_URL": links.replica_url,
               "CHAOS_PG_DSN": links.pg_dsn, "CHAOS_STREAM": self.spec.stream,
               "CHAOS_GROUP": self.spec.group, "CHAOS_CONSUMER": name, "PYTHONUNBUFFERED": "1"}
        if getattr(links, "sentinels", ()):     # the sentinel topology: find the primary by asking Sentinel
            env.update(CHAOS_SENTINELS=",".join(links.sentinels), CHAOS_MASTER_NAME=links.master_name)
        log = self.log_dir / f"{name}.log"
        log.write_bytes(b"")  # the tail must be this process's own output
        proc = spawner.spawn(self.argv, log=log, cwd=self.cwd, env=env)
        return WorkerProcess(name=name, links=links, proc=proc, log=log)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.spec.ready_timeout_s
        waiting = list(self.workers)
        pause = 0.02        # between looks, growing to 0.1 s: a library's import takes seconds on a loaded box
        while waiting:
            for w in list(waiting):
                if not w.alive():
                    raise WorkerError(f"worker command `{' '.join(self.argv)}` exited before it connected "
                                      f"to Redis; run it by hand with the CHAOS_* variables to see why",
                                      worker=w.name, exit_code=w.exit_code(), output_tail=w.output_tail())
                if w.connected():
                    waiting.remove(w)
            if waiting and time.monotonic() > deadline:
                w = waiting[0]
                raise WorkerError(f"worker {w.name} did not connect to its Redis proxy ({w.links.redis_url}) "
                                  f"within {self.spec.ready_timeout_s:g} s; does it read CHAOS_REDIS_URL? "
                                  f"(raise [worker] ready_timeout_s if it starts slowly)",
                                  worker=w.name, exit_code=w.exit_code(), output_tail=w.output_tail())
            if waiting:
                time.sleep(pause)
                pause = min(0.1, pause * 1.5)

    def unexpected_exits(self) -> list[WorkerProcess]:
        """Workers that died although no fault and no stop ended them."""
        return [w for w in self.workers if not w.alive() and not w.expected_exit]

    def by_name(self, name: str) -> WorkerProcess:
        for w in self.workers:
            if w.name == name:
                return w
        raise KeyError(f"no worker {name!r}; workers are {', '.join(self.names())}")

    def stop(self, grace_s: float = 3.0) -> None:
        """SIGCONT (a stalled worker must see the TERM), SIGTERM, then SIGKILL the group."""
        for w in self.workers:
            w.expected_exit = True
            if w.alive():
                w.kill(signal.SIGCONT)
                w.kill(signal.SIGTERM)
        for w in self.workers:
            spawner.stop(w.proc, signal.SIGTERM, timeout=grace_s)
