"""A large run's history fold (chaos.orchestrator.livefold) can run ahead of its workers and
servers, so that it keeps up with them: at 10^6 events at nice 0 the fold got a third of the
CPU it needed during the workload (6.3 of 19.5 CPU s), and the check folded the rest after
the drain, a third of the run's wall time. On Linux a thread's nice is its own; a thread takes
at most one core, so the workers and servers keep the other. Lowering a nice needs
CAP_SYS_NICE: without it the thread keeps its nice, and the reason is kept to be shown.
AHEAD_NICE says how far ahead; it is 0 (not ahead) for now: see there why.

Only runs of AHEAD_EVENTS or more do this: every cell of the suite and the load area (10^5
events at full size) stays below it, so no test runs a thread of the orchestrator above its
servers' priority (a CPU-bound nice -10 check process once starved both Sentinels into TILT).
"""
from __future__ import annotations

import os
import threading

# The nice of a large run's fold thread (the workers and servers: 0). 0: not ahead. At -10 the fold
# kept up (10^6 events, side by side at load 7-8: the check 21.6 -> 7.8 s, its share 0.291 -> 0.123;
# 0.115-0.187 in other runs), but the checker's records were then built during the workload: the
# orchestrator's peak rose from 381-382 to 450-524 MB (506 and 524 in the last two runs; pymalloc held
# 82 MB free at the workload's end). Memory is not spent for time: 0 until the records fit.
AHEAD_NICE = 0
AHEAD_EVENTS = 200_000  # planned events from which a run is large: its fold at AHEAD_NICE, its large blocks mapped


def thread_nice() -> int:
    """This thread's nice."""
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def set_thread_nice(nice: int) -> str:
    """Set this thread's nice; '' when done, else why not (it then keeps its nice)."""
    have = thread_nice()
    if nice == have:
        return ""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    except OSError as exc:   # (EPERM/EACCES: no CAP_SYS_NICE)
        return f"nice {nice} refused ({exc.strerror}): ran at nice {have}"
    return ""
