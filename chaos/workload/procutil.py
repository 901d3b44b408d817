"""Process plumbing: die with the parent (PR_SET_PDEATHSIG), log tails, a SIGSTOP seen; how a
process ended and its /proc state come from chaos.cluster.health (one of each for servers and workers)."""
from __future__ import annotations

import ctypes
import os
import signal

from chaos.cluster.health import describe_exit, process_state

__all__ = ["describe_exit", "die_with_parent", "process_state", "process_stopped", "tail"]

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def die_with_parent(parent: int, sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to send `sig` when the parent (thread) exits; exit now if it already has.

    `parent` is the pid the caller had before fork(): the parent may die between the fork and
    this call, and then getppid() already answers with the reaper's pid.
    """
    if _libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:  # the parent died before the kernel could watch it for us
        os._exit(1)


def tail(path: os.PathLike | str, lines: int = 20) -> str:
    """The last `lines` lines of a log file ('' if it does not exist): read from the end, in a
    window that grows until it holds them, so a large log costs what its tail costs."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, 2)
            window = 8192
            while True:
                start = max(0, size - window)
                fh.seek(start)
                found = fh.read().splitlines()
                if start == 0 or len(found) > lines:   # (the window's first line may be cut)
                    return b"\n".join(found[-lines:]).decode(errors="replace")
                window *= 4
    except OSError:
        return ""


def process_stopped(pid: int) -> bool:
    """Whether the process is in the stopped state (T) after a SIGSTOP.

    A worker at a `signal` failpoint writes its marker *before* it stops itself; a SIGCONT
    sent in between is lost and the worker stays stopped for good, so whoever resumes it
    waits for this first.
    """
    return process_state(pid) in ("T", "t")
