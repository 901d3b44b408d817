"""The guard's contract: apply one delivered event's effect, saying what happened.

A guard is the write side of a strategy. It gets the event, the stream entry id and a
`work` callable (the job's simulated cost; it raises PoisonJob for a poison job) and
returns an Outcome: rows the effect write affected and the effect kind the checker
reads (`applied`, `stale` for a rejected older version, `duplicate` for a seen event id).
`rows` straight from `write`/`write_in_tx` also hands the checker the key's write sequence
number (`value.seq`, the commit order of the key's writes; effect.py).
Guards run inside consumer processes, bound to that process's environment (GuardEnv).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Protocol

import psycopg

from chaos.events import Event
from chaos.strategies.guards.effect import Failpoints, Written, write_now, write_state
from chaos.strategies.part import Part

APPLIED, STALE, DUPLICATE = "applied", "stale", "duplicate"


class GuardEnv(Protocol):
    """What a guard uses of its consumer process; chaos.workload.env.WorkerEnv plays it
    (the worker side imports the guards, never the other way round)."""

    failpoints: Failpoints
    rng: random.Random

    def pg(self) -> psycopg.Connection: ...

    def redis(self, *, timeout_ms: float | None = None) -> Any: ...

    def op(self, type: str, f: str, **fields: Any) -> dict: ...

    def scaled_ms(self, ms: float) -> float: ...

    def sleep_ms(self, ms: float) -> None: ...


@dataclass
class Outcome:
    rows: int
    effect: str
    value: Any = None

    def __post_init__(self) -> None:
        """`rows` straight from an effect write (Written) brings the key's write sequence number
        into the value as `seq`: the checker orders the key's writes by it (commit order)."""
        seq = getattr(self.rows, "seq", None)
        self.rows = int(self.rows)
        if seq is not None and (self.value is None or isinstance(self.value, dict)):
            self.value = {**(self.value or {}), "seq": seq}


class Guard(Part):
    slot: ClassVar[str] = "guard"
    seeds_rows: ClassVar[bool] = True   # the orchestrator creates each key's row before the run
    # What the guard promises, read by the expectation areas (a new guard gets its cells from
    # these, not from its name): a redelivered copy of an applied event is not applied again,
    # by state kept in PostgreSQL (so it survives a Redis failover) ...
    rejects_copies: ClassVar[bool] = False
    # ... and an older business version arriving after a newer one is not written.
    rejects_older_versions: ClassVar[bool] = False
    schema: ClassVar[str] = ""          # extra DDL the guard needs (created before each run)

    def bind(self, env: GuardEnv) -> Guard:
        self.env = env
        return self

    def apply(self, ev: Event, entry_id: str, work: Callable[[], None]) -> Outcome:
        raise NotImplementedError

    def after_apply(self) -> None:
        """Called once the apply op is recorded (also after a failure): release what apply held,
        so the history shows the write before the release, as it happened."""

    write_sent: bool = False   # set once the effect write went out: an error after it leaves the outcome unknown

    def write(self, cur: psycopg.Cursor, ev: Event, **kw: Any) -> Written:
        """The effect write (state + projection), with the `before_commit` failpoint: its rows
        and the key's write sequence number it took (the commit order of the key's writes)."""
        self.write_sent = True
        return write_state(cur, ev, failpoints=self.env.failpoints, **kw)

    def write_in_tx(self, ev: Event, **kw: Any) -> Written:
        """The effect write on its own: one autocommit statement, or a transaction when a
        `before_commit` failpoint must fire between the write and the COMMIT."""
        conn = self.env.pg()
        if "before_commit" not in self.env.failpoints.armed:
            self.write_sent = True
            return write_now(conn, ev, **kw)
        with conn.transaction(), conn.cursor() as cur:
            return self.write(cur, ev, **kw)
