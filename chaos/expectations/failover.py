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
what its parts declare (the guard's `rejects_copies` and `rejects_older_versions`, the
delivery's `prefetches`) decides which bounds it must meet, never their names.
"""
from __future__ import annotations

from chaos.cellspec import Spec
from chaos.expectations.cells import Cell, rows
from chaos.expectations.table import each_run, eq, ge, le
from chaos.strategies.presets import PRESETS, Strategy, resolve

FAULT_NAME = "promote-replica"
# The hold starts once 100 of the 250 events are in the stream (not at a time: a loaded
# machine starts its producer late), lasts 500 ms, then the kill and the promotion.
FAULT = f"{FAULT_NAME}:after_entries=100,at_ms=0"
# A backlog all through the hold: 250 events published over 1.5 s (167/s), 40 ms of work each
# (a single consumer does 25/s, four do 100/s), so the last acked events are unread at the kill;
# 1.5 s of publishing also leaves events to publish into the hold when a loaded machine starts
# the producer late (it then publishes the overdue ones at once).
WORKLOAD = "many-orders:keys=50,events=5,gap_ms=6,cost_ms=40"
RUN_COUNT = 2
WAIT_PRESET = "s1:wait_replicas=1,wait_ms=25"  # 25 ms: at most ~20 publishes fit in the 500 ms hold


def _strategy(preset: str) -> Strategy:
    return resolve(Spec.parse(preset, "preset").name)


def fits(preset: str) -> bool:
    """Presets the failover cells run: the producer process XADDs, ack after, ordered keys."""
    strategy = _strategy(preset)
    return strategy.producer.writes_stream and strategy.ack.after and strategy.workload.ordered_keys()


def rejects_copies(preset: str) -> bool:
    """The guard applies a redelivered copy at most once (duplicated == 0): its state in
    PostgreSQL rejects it (a stale version, a seen event id, a version already past the
    reorder buffer's cursor, carried state older than the row's)."""
    return _strategy(preset).guard.rejects_copies


def keeps_version_order(preset: str) -> bool:
    """The guard also rejects an older business version arriving late (reordered == 0).

    The failover's downtime makes the retrying producer retry the publishes it could not
    make, while later events of the same key go out on schedule: a producer reorder. Only
    a guard that compares business versions survives it; an inbox with a plain effect and
    a CAS on the stream entry id (the retried event gets the larger id) write it."""
    return _strategy(preset).guard.rejects_older_versions


def prefetches(preset: str) -> bool:
    """A single reader that pulled the held entries into memory before the kill: no event is
    lost and the rolled-back acks come back only as pending (claimed), never as new entries."""
    return _strategy(preset).delivery.prefetches


def preset_cell(preset: str) -> Cell:
    bounds = dict(redelivered=each_run(ge(1)), published=each_run(ge(200)))
    if not prefetches(preset):
        bounds["lost"] = each_run(ge(1))
    if rejects_copies(preset):
        bounds.update(duplicated=eq(0), projection_drift=eq(0))
    else:
        bounds["duplicated"] = each_run(ge(1))
    if keeps_version_order(preset):
        bounds["reordered"] = eq(0)
    elif rejects_copies(preset):
        bounds["reordered"] = each_run(ge(1), min_fraction=0.5)   # the failover's producer reorder, shown breaking
    verdict = ("the guard rejects every redelivered copy and every late older version"
               if keeps_version_order(preset) else
               "the guard rejects redelivered copies but writes late older versions"
               if rejects_copies(preset) else "the guard applies redelivered copies again")
    return Cell(preset, (FAULT,), RUN_COUNT, bounds, parts={"workload": WORKLOAD},
                note="acked entries lost and processed entries redelivered every run; " + verdict)


WAIT_CELL = Cell(WAIT_PRESET, (FAULT,), RUN_COUNT, dict(redelivered=each_run(ge(1)), lost=each_run(le(30))),
                 parts={"workload": WORKLOAD},
                 note="WAIT 1 after each XADD: the producer is held back while replication is held, "
                      "so few acknowledged entries fall into the lost window")

# Two faults in one run: the failover while the consumers' PostgreSQL link is slow.
MULTI_CELL = Cell("s5", (FAULT, "latency:link=postgres,target=consumer,latency_ms=3,duration_ms=1500"),
                  RUN_COUNT, dict(lost=each_run(ge(1)), redelivered=each_run(ge(1)), duplicated=eq(0),
                                  projection_drift=eq(0), reordered=eq(0)),
                  parts={"workload": WORKLOAD},
                  note="promote-replica and a slow PostgreSQL link at once: CAS still rejects every copy")

CELLS: list[Cell] = [preset_cell(name) for name in PRESETS if fits(name)] + [MULTI_CELL, WAIT_CELL]
ROWS = rows(CELLS)
