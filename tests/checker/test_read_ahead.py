"""chaos.workload.final_state.ReadAhead, the thread that reads the streams' next page while
the checker folds this one: the items in order, the read's error raised to the caller, and
no thread left behind by a caller that stops early."""
from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from chaos.workload.final_state import ReadAhead


def test_items_come_in_order_and_the_thread_ends() -> None:
    ahead = ReadAhead(iter(range(1000)), depth=2)
    assert list(ahead) == list(range(1000))
    assert not ahead._thread.is_alive()
    assert next(ahead, "end") == "end"


def test_an_error_of_the_read_is_raised_to_the_caller_after_the_items_before_it() -> None:
    def pages() -> Iterator[int]:
        yield 1
        yield 2
        raise ConnectionError("the server went away")
    ahead = ReadAhead(pages())
    assert next(ahead) == 1 and next(ahead) == 2
    with pytest.raises(ConnectionError, match="went away"):
        next(ahead)
    assert not ahead._thread.is_alive()


def test_a_caller_that_stops_early_stops_the_thread() -> None:
    read = []

    def pages() -> Iterator[int]:
        for n in range(10**6):
            read.append(n)
            yield n
    ahead = ReadAhead(pages(), depth=2)
    assert next(ahead) == 0
    thread = ahead._thread
    del ahead
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert len(read) <= 5, "the thread read on after its caller left"


def test_it_reads_ahead_while_the_caller_works() -> None:
    """The next item is read while the caller holds this one (the wait overlapped)."""
    asked = threading.Event()

    def pages() -> Iterator[int]:
        yield 1
        asked.set()
        yield 2
    ahead = ReadAhead(pages())
    assert next(ahead) == 1
    assert asked.wait(timeout=5), "the second item was not read before the caller asked for it"
    assert list(ahead) == [2]
