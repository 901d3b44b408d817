"""Process plumbing: die with the parent (PR_SET_PDEATHSIG) and describe how a process ended."""
from __future__ import annotations

import ctypes
import os
import signal

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


def describe_exit(code: int | None) -> str:
    """`exit code 3`, `killed by SIGKILL`, or `running`."""
    if code is None:
        return "running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


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
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("T", "t")
    except (OSError, IndexError):
        return False
