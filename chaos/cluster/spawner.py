"""Spawning server processes that cannot outlive the process that started them.

Every child gets its own process group (so one killpg reaches a server and its own
children, and a Ctrl-C at the terminal reaches only pytest, which then stops them in
order) and PR_SET_PDEATHSIG=SIGKILL. Linux sends that signal when the *thread* that
forked the child exits, so all forks happen on one long-lived daemon thread, which
only dies with the process. prctl runs in preexec_fn, i.e. after CPython switched to
the target user (a credential change would clear the setting).
"""
from __future__ import annotations

import ctypes
import os
import queue
import signal
import subprocess
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Callable

PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    def setup() -> None:  # runs in the child between fork and exec: keep it minimal
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGKILL)
    return setup


class _SpawnThread:
    """The one thread that forks; callers hand it a job and wait for the Popen."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], subprocess.Popen], Future]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, make: Callable[[], subprocess.Popen]) -> subprocess.Popen:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="chaos-spawner", daemon=True)
                self._thread.start()
        future: Future = Future()
        self._jobs.put((make, future))
        return future.result()

    def _run(self) -> None:
        while True:
            make, future = self._jobs.get()
            try:
                future.set_result(make())
            except BaseException as exc:  # noqa: BLE001 - handed back to the caller
                future.set_exception(exc)


_SPAWNER = _SpawnThread()


def spawn(argv: list[str], *, log: Path, cwd: Path | None = None, user: str | None = None,
          env: dict[str, str] | None = None, stdin: int = subprocess.DEVNULL) -> subprocess.Popen:
    """Start ``argv`` in its own process group, stdout+stderr appended to ``log``."""
    parent = os.getpid()
    creds = {"user": user, "group": user, "extra_groups": []} if user else {}

    def make() -> subprocess.Popen:
        with open(log, "ab") as out:
            return subprocess.Popen(argv, stdin=stdin, stdout=out, stderr=subprocess.STDOUT,
                                    cwd=cwd, env=env, close_fds=True, process_group=0,
                                    preexec_fn=_die_with_parent(parent), **creds)
    return _SPAWNER.submit(make)


def stop(proc: subprocess.Popen, sig: int = signal.SIGKILL, timeout: float = 5.0) -> None:
    """Signal the whole process group of ``proc`` and reap it; SIGKILL if it lingers.

    A process reaped earlier is left alone: its pid (and group id) may belong to someone else by now.
    """
    if proc.returncode is not None:
        return
    if proc.poll() is None:
        _killpg(proc.pid, sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout)
    # Children of a server (postgres backends) may still be exiting: reach the group once more,
    # right after the leader was reaped (before its pid can be reused).
    _killpg(proc.pid, signal.SIGKILL)


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def wait_until(check: Callable[[], bool], timeout: float, interval: float = 0.005) -> bool:
    """Poll ``check`` until it is true or ``timeout`` seconds passed; return its last value."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
