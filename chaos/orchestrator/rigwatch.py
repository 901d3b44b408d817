"""The one rig watcher: the health of the framework's own parts during a run.

A run stands on servers, proxies, the worker fork server and the run dir's disk. When one
of them fails where no configured fault may take it down (``Fault.takes_down``: the
`spared` components), the run cannot vouch for what it measured: the watcher names the
component (with its log tail) and tells the run through `on_failure`, which ends it.
"""
from __future__ import annotations

import errno
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import psycopg
import redis

from chaos.cluster.health import rig_problems
from chaos.proxy.client import ToxiproxyError
from chaos.workload.procutil import describe_exit

RIG_CHECK_EVERY_S = 0.05    # process checks of the rig (a poll and a /proc read per server)
RIG_PROBE_EVERY_S = 2.0     # network probes of the rig (PING, SELECT 1, the proxy API)
RIG_CONFIRM_S = 3.0         # a failed probe is repeated with this timeout before it names anything


class RigFailed(Exception):
    """The rig failed (the strings are in RigWatch.failures): end the run now."""


# What the orchestrator's own calls raise when the rig under them breaks.
RIG_ERRORS = (RigFailed, redis.ConnectionError, redis.TimeoutError, psycopg.OperationalError,
              psycopg.InterfaceError, ToxiproxyError)


def spared_by(faults: Iterable[Any]) -> set[str]:
    """The rig components the faults may kill or stop (not a rig failure when they do)."""
    return set().union(*(getattr(f, "takes_down", frozenset()) for f in faults))


class RigWatch:
    """The rig's health during one run, checked from a thread of its own (so an orchestrator
    call blocked on a stopped server does not blind it): process checks every
    RIG_CHECK_EVERY_S, network probes every RIG_PROBE_EVERY_S (a failed probe is confirmed
    with a longer timeout before it names anything). A finding sets `failed` and calls
    `on_failure` with the new findings once: the run's faults stop, its clients stop
    retrying and a connection to a broken server is shut, so a call blocked on it returns."""

    def __init__(self, cluster: Any, spared: set[str], run_dir: Path, *, name: str = "rig-watch",
                 on_failure: Callable[[list[str]], None] | None = None) -> None:
        self.cluster, self.spared, self.run_dir, self.name = cluster, spared, run_dir, name
        self.on_failure = on_failure
        self.failures: list[str] = []
        self.failed = threading.Event()
        self.forks: Any = None          # the run's ForkServer, once it is used
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(RIG_CONFIRM_S + 5)

    def _loop(self) -> None:
        probed = time.monotonic()
        while not self._stop.wait(RIG_CHECK_EVERY_S) and not self.failed.is_set():
            deep = time.monotonic() - probed >= RIG_PROBE_EVERY_S
            if deep:
                probed = time.monotonic()
            try:
                self.check(deep=deep)
            except Exception:  # noqa: BLE001 - a check that breaks must not end the run; the next one runs
                pass

    def problems(self, deep: bool = False) -> list[str]:
        """What is wrong now ([] when sound); probes only when ``deep``, confirmed before naming."""
        found = rig_problems(self.cluster, self.spared, remote=False)    # exact and cheap; probes below, confirmed
        forks = self.forks
        if forks is not None and forks._proc is not None and not forks.alive():
            found.append(f"worker fork server (pid {forks._proc.pid}) died: "
                         f"{describe_exit(forks._proc.returncode)}; log tail:\n"
                         f"(it writes to the orchestrator's stderr; its workers died with it)")
        full = disk_full(self.run_dir)
        if full:
            found.append(full)
        if deep and not found and rig_problems(self.cluster, self.spared, deep=True):
            time.sleep(0.2)
            found = rig_problems(self.cluster, self.spared, deep=True, timeout=RIG_CONFIRM_S)
        return found

    def check(self, deep: bool = False) -> list[str]:
        found = self.problems(deep)
        if found:
            self.record(found)
        return found

    def record(self, found: list[str]) -> None:
        with self._lock:
            known = {f.split("; log tail:")[0] for f in self.failures}
            new = [f for f in found if f.split("; log tail:")[0] not in known]
            self.failures += new
        if not new:
            return
        self.failed.set()
        if self.on_failure is not None:
            self.on_failure(new)

    def raise_if_failed(self) -> None:
        if self.failed.is_set():
            raise RigFailed("; ".join(f.split("; log tail:")[0] for f in self.failures))

    def final_state_source(self) -> str:
        """The failure of a server the final state is read from (the primary, PostgreSQL), or ''."""
        return next((f.split("; log tail:")[0] for f in self.failures
                     if f.startswith("PostgreSQL") or (f.startswith("Redis") and "(primary)" in f)), "")


def disk_full(path: Path, error: BaseException | None = None) -> str:
    """'' unless the file system of the run dir has no block left (for anyone, root included):
    workers then lose history lines and the checker would judge an incomplete history."""
    try:
        st = os.statvfs(path)
    except OSError:
        return ""
    if st.f_bfree and error is None:
        return ""
    size_kb = st.f_blocks * st.f_frsize // 1024
    what = f"{type(error).__name__}: {error}" if error is not None else os.strerror(errno.ENOSPC)
    return (f"run dir {path} full: {what} ({st.f_bfree * st.f_frsize // 1024} of {size_kb} KB free); "
            f"log tail:\n(free space where run dirs go: --run-dir or CHAOS_RUNS_DIR)")


def no_space(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno == errno.ENOSPC


def shut(conn: Any) -> None:
    """Shut the socket under a psycopg connection: a call blocked on a stopped server returns
    (with an OperationalError) instead of waiting for ever."""
    try:
        if conn is None or conn.closed:
            return
        sock = socket.socket(fileno=os.dup(conn.pgconn.socket))
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()
    except Exception:  # noqa: BLE001 - best effort: the call then ends at its own timeout
        pass
