"""A large run's fold runs ahead of the workers (chaos.orchestrator.priority): the thread's
own nice, not the process's; refused without CAP_SYS_NICE, and said so."""
from __future__ import annotations

import os
import threading

from chaos.expectations.load import load_size
from chaos.orchestrator.priority import AHEAD_EVENTS, set_thread_nice, thread_nice

NICE = -10   # (what a large run's fold ran at: priority.AHEAD_NICE's measured value)


def test_a_threads_nice_is_its_own() -> None:
    main_before = os.getpriority(os.PRIO_PROCESS, os.getpid())   # (the process's main thread)
    seen: list = []

    def run() -> None:
        before = thread_nice()
        refused = set_thread_nice(NICE)
        seen.extend([before, refused, thread_nice(), os.getpriority(os.PRIO_PROCESS, os.getpid())])

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    before, refused, inside, main = seen
    if refused:   # (no CAP_SYS_NICE: kept, and said)
        assert f"nice {NICE} refused" in refused and inside == before
    else:
        assert inside == NICE
    assert main == main_before == os.getpriority(os.PRIO_PROCESS, os.getpid())


def test_no_cell_of_the_suite_or_the_load_area_runs_ahead() -> None:
    """The load area's cells at full size are the largest runs a test makes."""
    assert load_size("full").total < AHEAD_EVENTS
