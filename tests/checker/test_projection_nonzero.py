"""The projection's counters read from PostgreSQL a page at a time (PagedProjection): when no
event was applied with a projection (a guard that writes none: 10^6 keys of the growth bench),
the checker reads only the counters that are not 0 (only they can drift), and its answer is the
one it gives with every counter read (a dict of them)."""
from __future__ import annotations

import json
from typing import Any

import psycopg
from checker_histories import Ev, History, final

from chaos.checker import check_run, summarize
from chaos.cluster.endpoint import pg_dsn
from chaos.workload import schema
from chaos.workload.final_state import PagedProjection


class Read(PagedProjection):
    """PagedProjection saying which of its reads the checker asked for."""

    def __init__(self, conn: psycopg.Connection) -> None:
        super().__init__(conn)
        self.asked: list[str] = []

    def items(self):  # type: ignore[override]
        self.asked.append("items")
        return super().items()

    def nonzero_items(self):
        self.asked.append("nonzero_items")
        return super().nonzero_items()


def as_text(result: Any) -> str:
    return json.dumps(summarize([result]).to_json(preset="p", fault="f"), sort_keys=True)


def history(projected: bool) -> History:
    """Keys k0..k4 each an event handled by a guard that writes no projection (and, `projected`,
    k0's a second event applied with one)."""
    h = History()
    for n in range(5):
        ev = Ev(f"e{n}", f"k{n}", 1, "created")
        h.publish(ev, entry_id=f"{n}-0").deliver(ev, f"{n}-0").apply(ev, projection=False).ack(ev, f"{n}-0")
    if projected:
        ev = Ev("e9", "k9", 1, "created")
        h.publish(ev, entry_id="9-0").handle(ev, "9-0")
    return h


def test_only_the_counters_above_or_below_0_are_read_when_nothing_was_projected(chaos_reset_cluster: Any) -> None:
    with psycopg.connect(pg_dsn(chaos_reset_cluster.postgres), autocommit=True) as conn:
        schema.ensure_schema(conn)
        schema.seed_rows(conn, [f"k{n}" for n in range(10)])
        conn.execute("UPDATE projection SET count = 2 WHERE key = 'k3'")   # (its event: no projection)
        conn.execute("UPDATE projection SET count = -1 WHERE key = 'k7'")  # (no event: expected 0)
        conn.execute("UPDATE projection SET count = 1 WHERE key = 'k8'")
        rows = {f"k{n}": ("created", 1) for n in range(10)}
        for projected, asked in ((False, ["nonzero_items"]), (True, ["items"])):
            ops = history(projected).ops
            whole = check_run(ops, final(rows, projection=schema.read_projection(conn)))
            paged = Read(conn)
            result = check_run(ops, final(rows, projection=paged))
            assert paged.asked == asked
            assert as_text(result) == as_text(whole)
            c = result.counts
            # k7: -1 (negative drift), k8: +1; k9 (projected, counter 0): -1; k3 not compared
            assert (c.projection_drift, c.negative_drift) == ((2, 1) if not projected else (3, 2))
        assert list(PagedProjection(conn).nonzero_items()) == [(k, n) for k, n in schema.projection_rows(conn) if n]
