"""The outbox relay's contract between the producer parts (chaos/strategies/producer_outbox.py)
and the worker processes that play it (chaos/workload/outbox.py, chaos/workload/dispatcher.py):
role names, the outbox table, the dispatcher's configuration, and the drain check.

It sits with the strategies because a part plans and checks it before anything starts;
the worker side imports it from here (workload -> strategies, never the other way).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

WRITER_ROLE = "outbox-producer"   # the service process: business row + outbox row in one transaction
DISPATCHER_ROLE = "dispatcher"    # a relay process: committed outbox rows -> the stream
OUTBOX_TABLE = "outbox"
SOURCE_TABLE = "source_orders"

MODES = ("naive", "per-key")
SELECTORS = ("event_id", "key", "etype")


def _selectors(spec: dict[str, Any], knobs: set[str], what: str, optional: frozenset = frozenset()) -> dict[str, Any]:
    """The row selectors of a `fail`/`stall` spec, checked: at least one, nothing unknown."""
    selectors = {k: v for k, v in spec.items() if k not in knobs | optional}
    if not selectors or set(selectors) - set(SELECTORS):
        raise ValueError(f"dispatcher {what}={spec!r}: give {', '.join(sorted(knobs))} and one of "
                         f"{', '.join(SELECTORS)}, e.g. {{'event_id': 'e42-1', {sorted(knobs)[0]!r}: 2}}")
    return selectors


def _matches(selectors: dict[str, Any], row: Any) -> bool:
    return all(str(getattr(row, k)) == str(v) for k, v in selectors.items())


STALL_OPTIONAL = frozenset({"until_later", "until_written", "others"})


@dataclass(frozen=True)
class DispatcherConfig:
    """``spec["dispatcher"]``: the relay discipline, its poll interval, and injected row faults.

    ``fail`` = ``{selector: value, "attempts": n}``: the row's first n publishes fail.
    ``stall`` = ``{selector: value, "ms": t}``: the dispatcher that holds the row waits t ms
    (scaled) before its XADD, once per process (a GC pause, a slow link), holding its locks;
    with ``"until_later": n`` it ends as soon as n later rows of the row's key are published;
    with ``"until_written": n`` once n later rows of the key are written (committed by the service)
    and, when ``"others"`` (the other dispatchers) is above 0, no other key's written row is left
    unpublished: the others had the key's later rows to take, and took everything else.
    """

    mode: str = "per-key"
    poll_ms: float = 100.0
    timeout_ms: float = 2000.0
    fail: dict[str, Any] | None = None
    stall: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"dispatcher mode {self.mode!r} is unknown; use one of {', '.join(MODES)}")
        if self.poll_ms <= 0 or self.timeout_ms <= 0:
            raise ValueError(f"dispatcher poll_ms={self.poll_ms} and timeout_ms={self.timeout_ms} must be > 0")
        if self.fail is not None:
            _selectors(self.fail, {"attempts"}, "fail")
        if self.stall is not None:
            _selectors(self.stall, {"ms"}, "stall", STALL_OPTIONAL)

    def fails(self, row: Any) -> bool:
        """Whether this publish of `row` must fail: it matches `fail` and has fewer attempts.

        Counted on the row (outbox.attempts), so the failures are the row's first attempts
        whichever dispatcher makes them, respawned ones included.
        """
        if not self.fail or not _matches(_selectors(self.fail, {"attempts"}, "fail"), row):
            return False
        return row.attempts < int(self.fail.get("attempts", 2))

    def stalls(self, row: Any) -> bool:
        return bool(self.stall) and _matches(_selectors(self.stall, {"ms"}, "stall", STALL_OPTIONAL), row)


def has_schema(conn: psycopg.Connection) -> bool:
    """Whether this database has an outbox table (a run without an outbox producer has none)."""
    return conn.execute("SELECT to_regclass(%s) IS NOT NULL", (OUTBOX_TABLE,)).fetchone()[0]


def unpublished_count(conn: psycopg.Connection) -> int:
    """Rows no dispatcher has marked published yet: the drain waits for 0."""
    return conn.execute(f"SELECT count(*) FROM {OUTBOX_TABLE} WHERE published_at IS NULL").fetchone()[0]
