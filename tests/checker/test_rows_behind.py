"""PostgreSQL's final rows read behind (schema.read_rows_behind: a thread on a connection of its
own, while the checker folds the history and Redis's lists): the rows read_rows gives, in its
order, and a read that fails raises its error at the rows' first use, as a read in line would
(the orchestrator's check then says the final state could not be read)."""
from __future__ import annotations

from typing import Any

import psycopg
import pytest

from chaos.cluster.endpoint import pg_dsn
from chaos.results import FinalRows
from chaos.workload import schema


def test_rows_read_behind_are_the_rows_read_in_line(chaos_reset_cluster: Any) -> None:
    with psycopg.connect(pg_dsn(chaos_reset_cluster.postgres), autocommit=True) as conn:
        schema.ensure_schema(conn)
        schema.seed_rows(conn, [f"k{n}" for n in range(2500)])
        conn.execute("UPDATE orders SET status = 'done', version = 3 WHERE id < 'k2'")
        behind = schema.read_rows_behind(conn)
        in_line = schema.read_rows(conn)
        assert behind.__class__ is FinalRows
        assert behind.keys_read == in_line.keys_read and behind.rows == in_line.rows
        assert behind["k1000"] == {"status": "done", "version": 3} and len(behind) == 2500
        assert behind.keys_read[0] is in_line.keys_read[0], "keys are interned: one copy each"
        assert behind._reading is None, "its thread was joined at the first use"


def test_a_read_behind_that_fails_raises_at_the_first_use_and_after(chaos_reset_cluster: Any) -> None:
    with psycopg.connect(pg_dsn(chaos_reset_cluster.postgres), autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS orders")
        try:
            rows = schema.read_rows_behind(conn)
            with pytest.raises(psycopg.errors.UndefinedTable):
                len(rows)
            with pytest.raises(psycopg.errors.UndefinedTable):
                rows.pairs()
        finally:
            schema.ensure_schema(conn)   # (the cluster's next test finds its tables)
