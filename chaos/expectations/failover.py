"""Expected figures under promote-replica (failover with replication held before the kill).

The failover workload keeps a backlog (consumers slower than the producer) while the
replication link is held, so every run has events that the old primary acknowledged
and nobody read before the kill (``lost``) and events that were read and handled while
held and come back after the promotion (``redelivered``: as new entries to ``>`` or as
pending). What the guard decides is what the redelivered copies do: a plain UPDATE (and
a lock, and a Redis-side dedupe marker, itself written to the lost primary) applies them
again (``duplicated``); CAS rejects them as stale and the PostgreSQL inbox as duplicates.

Cells are generated for every preset whose shape fits (a stream producer, ack after
processing, an ordered workload), so a new strategy gets its failover cell for free;
its guard decides which bounds it must meet.
"""
from __future__ import annotations

from chaos.expectations.table import RUNS, eq, ge, le
from chaos.strategies.presets import PRESETS, resolve
from faults.cells import Cell, rows

FAULT = "promote-replica"
# A backlog all through the hold: 250 events published over ~750 ms (333/s), 30 ms of work each
# (a single consumer does 33/s, four do 133/s), so the last ~100 acked events are unread at the kill.
WORKLOAD = "many-orders:keys=50,events=5,gap_ms=3,cost_ms=30"
RUN_COUNT = 2
# Guards whose state in PostgreSQL rejects a redelivered copy (stale version, seen event id,
# a version already past the reorder buffer's cursor, carried state older than the row's).
SAFE_GUARDS = ("cas", "inbox", "reorder-buffer", "state-carried")
# Deliveries whose single reader pulls every entry into memory as soon as it is added: the
# held entries were all read (and handled) before the kill, so no event is lost and the
# rolled-back acks come back only as pending (claimed), never as new entries.
PREFETCHING = ("fanout",)
WAIT_PRESET = "s1:wait_replicas=1,wait_ms=25"  # 25 ms: at most ~20 publishes fit in the 500 ms hold


def fits(preset: str) -> bool:
    """Presets the failover cells run: stream producers, ack after, ordered keys."""
    strategy = resolve(preset)
    return (strategy.producer.name in ("retrying", "direct") and strategy.ack.after
            and strategy.workload.name != "bulk")


def guard_of(preset: str) -> str:
    return resolve(preset.partition(":")[0]).guard.name


def prefetches(preset: str) -> bool:
    return resolve(preset.partition(":")[0]).delivery.name in PREFETCHING


def preset_cell(preset: str) -> Cell:
    safe = guard_of(preset) in SAFE_GUARDS
    bounds = dict(redelivered=ge(RUNS), published=ge(200 * RUNS))
    if not prefetches(preset):
        bounds["lost"] = ge(RUNS)
    bounds.update(dict(duplicated=eq(0), reordered=eq(0)) if safe else dict(duplicated=ge(RUNS)))
    return Cell(preset, (FAULT,), RUN_COUNT, bounds, parts={"workload": WORKLOAD},
                note="acked entries lost and processed entries redelivered every run; "
                     + ("the guard rejects every redelivered copy" if safe
                        else "the guard applies redelivered copies again"))


WAIT_CELL = Cell(WAIT_PRESET, (FAULT,), RUN_COUNT, dict(redelivered=ge(RUNS), lost=le(30 * RUNS)),
                 parts={"workload": WORKLOAD},
                 note="WAIT 1 after each XADD: the producer is held back while replication is held, "
                      "so few acknowledged entries fall into the lost window")

CELLS: list[Cell] = [preset_cell(name) for name in PRESETS if fits(name)] + [WAIT_CELL]
ROWS = rows(CELLS)
