"""A large run's history fold (chaos.orchestrator.livefold) can run ahead of its workers and
servers, so that it keeps up with them: at 10^6 events at nice 0 the fold got a third of the
CPU it needed during the workload (6.3 of 19.5 CPU s), and the check folded the rest after
the drain, a third of the run's wall time. On Linux a thread's nice is its own; a thread takes
at most one core (two threads of one process share its GIL), so the workers and servers keep
the other. Lowering a nice needs
CAP_SYS_NICE: without it the thread keeps its nice, and the reason is kept to be shown.
AHEAD_NICE says how far ahead: see there why.

Only runs of AHEAD_EVENTS or more do this: every cell of the suite and the load area (10^5
events at full size) stays below it, so no test runs a thread of the orchestrator above its
servers' priority (a CPU-bound nice -10 check process once starved both Sentinels into TILT).
"""
from __future__ import annotations

import os
import threading

# The nice of a large run's fold thread and of the orchestrator's thread from the workload to
# the check's end (the workers and servers: 0). 0: not ahead. At -10 for the fold alone, the fold
# kept up (10^6 events, side by side at load 7-8: the check 21.6 -> 7.8 s, its share 0.291 ->
# 0.123), but the polling thread, left at 0, got the GIL back late after each hand-over: polls of
# 1-9 s wall for 0.1-0.7 CPU s, and the entries seen settled meanwhile waited to be forgotten
# (366-400k at the workload's end: the peak rose from 381-382 to 450-524 MB). With both at -10 the
# polls took at most 0.55 s and the watch held at most 75k entries (load 11); the growth bench's
# 10^6 peak was 406.7 and 404.0 MB (load 9-28, two CPU hogs beside), the check's share 0.127 and
# 0.153. The check at 0 beside two hogs took 27.1 s wall for 4.3 CPU s of its thread (counting:
# 0.86 CPU s in 4.0 s); at -10 (load 22) counting took 0.84 s in 1.9 s, and what is left is
# waiting for the streams' pages from Redis (at the servers' nice).
AHEAD_NICE = -10
AHEAD_EVENTS = 200_000  # planned events from which a run is large: its fold at AHEAD_NICE, its large blocks mapped


def thread_nice(tid: int | None = None) -> int:
    """This thread's nice (or thread `tid`'s: its native id)."""
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id() if tid is None else tid)


def set_thread_nice(nice: int, tid: int | None = None) -> str:
    """Set this thread's nice (or thread `tid`'s); '' when done, else why not (it then keeps its nice)."""
    tid = threading.get_native_id() if tid is None else tid
    have = thread_nice(tid)
    if nice == have:
        return ""
    try:
        os.setpriority(os.PRIO_PROCESS, tid, nice)
    except OSError as exc:   # (EPERM/EACCES: no CAP_SYS_NICE)
        return f"nice {nice} refused ({exc.strerror}): ran at nice {have}"
    return ""
