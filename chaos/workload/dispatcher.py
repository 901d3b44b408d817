"""The outbox dispatcher process (worker role ``dispatcher``): relays committed outbox rows to Redis.

Two relay disciplines, the subject of the outbox reference rows:

* ``naive``: every round walks the unpublished rows ``ORDER BY id`` and *skips* a row whose
  publish failed, so a later event of the same key overtakes it (order #42 ends `created`).
  Several naive dispatchers claim rows one at a time with ``FOR UPDATE SKIP LOCKED``: no
  row is sent twice by two live dispatchers, but two rows of one key go out through two
  dispatchers at once and their XADDs race.
* ``per-key``: a failed row blocks only the rest of *its* key for the round. Several
  per-key dispatchers share the work by key: a dispatcher handles a key only while it
  holds the session-level advisory lock ``pg_try_advisory_lock(OUTBOX_LOCK_CLASS,
  hashtext(key))``, and reads the key's rows after taking it, so per-key order holds
  across dispatchers. A crashed dispatcher's lock goes with its connection.

Each relay is XADD then ``UPDATE outbox SET published_at`` (the mark). A crash between the
two (failpoint ``after_xadd_before_mark``) leaves the row unpublished and the next
dispatcher sends it again: a duplicate stream entry with the same ``event_id``, which the
consumer's inbox must absorb. The relay is at-least-once by construction.

``fail`` in the spec makes the publishes of matching rows fail for their first
``attempts`` tries (the reference's "created publish fails for a while"); the failure is
raised before the XADD, recorded as ``publish fail``, and counted in ``outbox.attempts``.
A failpoint with action ``fail`` at ``before_publish`` works too, counted per process.
``stall`` makes the dispatcher holding a matching row wait before its XADD (with its row
or key lock held), once per process: a GC pause, the case parallel naive relays get wrong.
"""
from __future__ import annotations

import time

import psycopg
import redis

from chaos.workload.env import WorkerEnv
from chaos.workload.failpoints import FailpointFailure
from chaos.strategies.outbox_relay import DISPATCHER_ROLE as ROLE  # noqa: F401 - the role this module plays
from chaos.strategies.outbox_relay import OUTBOX_TABLE, DispatcherConfig
from chaos.workload.outbox import ROW_COLUMNS, OutboxRow, row_from_record

FAILPOINTS = ("before_publish", "after_xadd_before_mark", "after_publish_fail")
OUTBOX_LOCK_CLASS = 0x0B0C  # first key of the two-int advisory lock: "the outbox, by key"


class InjectedPublishFailure(Exception):
    """The spec's `fail` made this publish fail (raised before the XADD: nothing was sent)."""


class Dispatcher:
    """One relay loop over the outbox; a dispatcher process runs exactly one."""

    def __init__(self, env: WorkerEnv, config: DispatcherConfig) -> None:
        self.env, self.config = env, config
        self.stalled: set[str] = set()
        self.redis = env.redis(timeout_ms=config.timeout_ms)

    def run(self) -> None:
        """Rounds until SIGTERM; a lost PostgreSQL link is reopened at the next round."""
        env = self.env
        env.op("info", "log", value={"dispatcher": self.config.mode})
        try:
            self.redis.ping()  # a relay keeps its connection open: a fault meets an established link
        except redis.RedisError:
            self.redis.connection_pool.disconnect()
        while not env.stopping:
            try:
                self.naive_round() if self.config.mode == "naive" else self.per_key_round()
            except psycopg.errors.UndefinedTable:
                pass  # the service has not created the outbox yet: nothing to relay
            except psycopg.OperationalError as exc:
                env.op("info", "log", value={"postgres": str(exc).strip()[:200]})
                _close(env)
            self._pause(self.config.poll_ms)
        env.op("info", "log", value={"dispatcher": "stopped"})

    def naive_round(self) -> None:
        """ORDER BY id, one row per transaction, a failed row skipped until the next round."""
        pg, last_id = self.env.pg(), 0
        while not self.env.stopping:
            with pg.transaction():
                record = pg.execute(
                    f"SELECT {ROW_COLUMNS} FROM {OUTBOX_TABLE} WHERE published_at IS NULL AND id > %s "
                    "ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED", (last_id,)).fetchone()
                if record is None:
                    return
                row = row_from_record(record)
                last_id = row.id
                self.relay(row)

    def per_key_round(self) -> None:
        """Every key with unpublished rows, in a seeded random order; a failed row ends its key's turn.

        The shuffle keeps N dispatchers from queueing on the same first key and lets keys
        change hands between rounds (which is what the key lock must make safe).
        """
        pg = self.env.pg()
        keys = [k for (k,) in pg.execute(
            f"SELECT key FROM {OUTBOX_TABLE} WHERE published_at IS NULL GROUP BY key ORDER BY min(id)")]
        self.env.rng.shuffle(keys)
        for key in keys:
            if self.env.stopping:
                return
            locked = pg.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))", (OUTBOX_LOCK_CLASS, key))
            if not locked.fetchone()[0]:
                continue  # another dispatcher owns this key right now
            try:
                # Read after locking: rows the previous owner marked are not seen again.
                records = pg.execute(f"SELECT {ROW_COLUMNS} FROM {OUTBOX_TABLE} WHERE key = %s "
                                     "AND published_at IS NULL ORDER BY id", (key,)).fetchall()
                for record in records:
                    if self.env.stopping or not self.relay(row_from_record(record)):
                        break
            finally:
                pg.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (OUTBOX_LOCK_CLASS, key))

    def relay(self, row: OutboxRow) -> bool:
        """XADD the row, then mark it published; False when the publish failed."""
        env, pg = self.env, self.env.pg()
        ids = {"event_id": row.event_id, "key": row.key, "version": row.version, "etype": row.etype}
        where = {"key": row.key, "event_id": row.event_id, "version": row.version}
        env.failpoints.hit("before_publish", row.etype, **where)
        if self.config.stalls(row) and row.event_id not in self.stalled:
            self.stalled.add(row.event_id)
            stall_ms = float(self.config.stall.get("ms", 300))
            env.op("info", "failpoint", **ids, value={"name": "stall", "action": "pause", "ms": stall_ms})
            self._stall(row, stall_ms, self.config.stall)
        attempt = row.attempts + 1
        env.op("invoke", "publish", **ids, stream=row.stream, value={"outbox_id": row.id, "attempt": attempt})
        try:
            if self.config.fails(row):
                env.op("info", "failpoint", **ids, value={"name": "fail", "action": "fail", "attempt": attempt})
                raise InjectedPublishFailure(f"publish of {row.event_id} made to fail (attempt {attempt} of "
                                             f"{self.config.fail.get('attempts', 2)} failing)")
            entry_id = self.redis.xadd(row.stream, row.fields)
        except (InjectedPublishFailure, FailpointFailure, redis.RedisError, OSError) as exc:
            outcome = "fail" if _surely_not_sent(exc) else "info"
            env.op(outcome, "publish", **ids, stream=row.stream,
                   value={"outbox_id": row.id, "attempt": attempt, "error": f"{type(exc).__name__}: {exc}"[:200]})
            pg.execute(f"UPDATE {OUTBOX_TABLE} SET attempts = attempts + 1, last_error = %s WHERE id = %s",
                       (str(exc)[:200], row.id))
            self.redis.connection_pool.disconnect()  # the next attempt opens a fresh connection
            env.failpoints.hit("after_publish_fail", row.etype, **where)
            return False
        env.op("ok", "publish", **ids, stream=row.stream, entry_id=entry_id,
               value={"outbox_id": row.id, "attempt": attempt})
        env.failpoints.hit("after_xadd_before_mark", row.etype, **where, entry_id=entry_id)
        pg.execute(f"UPDATE {OUTBOX_TABLE} SET published_at = clock_timestamp(), entry_id = %s, "
                   "attempts = attempts + 1 WHERE id = %s", (entry_id, row.id))
        return True

    def _stall(self, row: OutboxRow, ms: float, stall: dict) -> None:
        """The stall: `ms` (scaled), or, with `until_later`, until that many later rows of the
        row's key are published, or, with `until_written`, until that many are written and the
        `others` (dispatchers) left no other key's row unpublished (read every 5 ms on a
        connection of its own: its own holds the row's lock), at most `ms`; the end is recorded
        (`info log`)."""
        until_later, until_written = int(stall.get("until_later", 0)), int(stall.get("until_written", 0))
        if not until_later and not until_written:
            self._pause(ms)
            return
        deadline = time.monotonic() + self.env.seconds(ms)
        published = written = left = 0
        with psycopg.connect(self.env.worker.pg_dsn, autocommit=True, connect_timeout=10) as look:
            while not self.env.stopping and time.monotonic() < deadline:
                published, written, left = look.execute(
                    f"SELECT count(*) FILTER (WHERE key = %s AND version > %s AND published_at IS NOT NULL), "
                    f"count(*) FILTER (WHERE key = %s AND version > %s), "
                    f"count(*) FILTER (WHERE key <> %s AND published_at IS NULL) FROM {OUTBOX_TABLE}",
                    (row.key, row.version, row.key, row.version, row.key)).fetchone()
                if until_later and published >= until_later:
                    break
                if until_written and written >= until_written and not (int(stall.get("others", 0)) and left):
                    break
                time.sleep(0.005)
        value = {"stall": "ended", "row": row.event_id, "later_published": published, "until_later": until_later}
        if until_written:
            value.update(later_written=written, others_unpublished=left, until_written=until_written)
        self.env.op("info", "log", value=value)

    def _pause(self, ms: float) -> None:
        """Sleep between rounds in small steps, so SIGTERM ends the process promptly."""
        deadline = time.monotonic() + self.env.seconds(ms)
        while not self.env.stopping and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(0.01, left))


def _surely_not_sent(exc: Exception) -> bool:
    """A publish that certainly did not reach Redis is `fail`; anything else is `info`."""
    if isinstance(exc, (InjectedPublishFailure, FailpointFailure, redis.ResponseError)):
        return True
    return isinstance(exc, redis.ConnectionError) and "connecting" in str(exc).lower()


def _close(env: WorkerEnv) -> None:
    try:
        env.pg().close()
    except psycopg.Error:
        pass


def main(env: WorkerEnv) -> int:
    """Worker role entry: ``spec["dispatcher"]`` is a DispatcherConfig."""
    Dispatcher(env, DispatcherConfig(**env.spec.get("dispatcher", {}))).run()
    return 0
