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
    """The last lines of a log file ('' if it does not exist)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - 8192))
            return b"\n".join(fh.read().splitlines()[-lines:]).decode(errors="replace")
    except OSError:
        return ""


def process_stopped(pid: int) -> bool:
    """Whether the process is in the stopped state (T) after a SIGSTOP.

    A worker at a `signal` failpoint writes its marker *before* it stops itself; a SIGCONT
    sent in between is lost and the worker stays stopped for good, so whoever resumes it
    waits for this first.
    """
    return process_state(pid) in ("T", "t")
