"""Black-box observation: triggers on the user's tables record every committed write.

The consumer writes no history, so its effects are read where they land. Two triggers
go on each table named in the config:

* ``chaos_bb_effect`` (AFTER INSERT/UPDATE/DELETE, FOR EACH ROW, immediate) copies the
  key, version, status and event id of the written row into ``chaos_blackbox.effects``
  with ``pg_current_xact_id()``. It runs inside the user's transaction, so a rolled back
  write leaves nothing: only committed effects are ever observed.
* ``chaos_bb_commit`` (a deferred CONSTRAINT trigger, so it runs at COMMIT) takes a
  transaction-level advisory lock and then numbers the transaction from a sequence into
  ``chaos_blackbox.commits``.

Why not order by txid or by clock: txids are handed out when a transaction first writes,
not when it commits (T1 may get a lower txid and commit after T2), and clocks of two
backends say nothing about commit order. ``track_commit_timestamp`` would need a server
restart the framework does not own. The advisory lock is held from the deferred trigger
until the transaction has committed and become visible (locks are released after the
commit record), so the next observed transaction can only take its number afterwards:
commit_seq order *is* commit order. It serializes only the last microseconds of the
observed transactions, takes no row lock, and so adds no serialization failure under
REPEATABLE READ or SERIALIZABLE (an insert into a table nobody reads).

Everything lives in the schema ``chaos_blackbox``; ``remove()`` drops the triggers and
that schema, leaving the user's schema exactly as it was (``schema_fingerprint``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import sql

from chaos.blackbox.config import WorkerConfig

SCHEMA = "chaos_blackbox"
EFFECT_TRIGGER = "chaos_bb_effect"
COMMIT_TRIGGER = "chaos_bb_commit"
COMMIT_LOCK_KEY = 0x6368616F73  # "chaos": the advisory lock that orders observed commits

_INSTALL = f"""
CREATE SCHEMA {SCHEMA};
CREATE TABLE {SCHEMA}.effects (
    seq       bigserial PRIMARY KEY,
    txid      xid8 NOT NULL,
    tbl       text NOT NULL,
    op        text NOT NULL,
    key       text,
    version   text,
    status    text,
    event_id  text,
    at        timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE {SCHEMA}.commits (txid xid8 PRIMARY KEY, commit_seq bigint NOT NULL);
CREATE SEQUENCE {SCHEMA}.commit_seq;
CREATE FUNCTION {SCHEMA}.record_effect() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE r jsonb := CASE TG_OP WHEN 'DELETE' THEN to_jsonb(OLD) ELSE to_jsonb(NEW) END;
BEGIN
    INSERT INTO {SCHEMA}.effects (txid, tbl, op, key, version, status, event_id)
    VALUES (pg_current_xact_id(), TG_ARGV[0], TG_OP, r ->> TG_ARGV[1], r ->> TG_ARGV[2],
            r ->> TG_ARGV[3], r ->> TG_ARGV[4]);
    RETURN NULL;
END $$;
CREATE FUNCTION {SCHEMA}.record_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock({COMMIT_LOCK_KEY});
    INSERT INTO {SCHEMA}.commits (txid, commit_seq)
    VALUES (pg_current_xact_id(), nextval('{SCHEMA}.commit_seq'))
    ON CONFLICT (txid) DO NOTHING;
    RETURN NULL;
END $$;
"""


@dataclass(frozen=True)
class Effect:
    """One committed row write in a user table, in commit order."""

    commit_seq: int
    seq: int
    txid: int
    role: str  # "state" or "side_effect": which configured table was written
    op: str
    key: str | None
    version: int | None
    status: str | None
    event_id: str | None
    at: float  # clock_timestamp() of the write, epoch seconds (this machine's clock)


@dataclass(frozen=True)
class _Watch:
    table: str
    role: str
    key: str = ""
    version: str = ""
    status: str = ""
    event_id: str = ""


def _watches(config: WorkerConfig) -> list[_Watch]:
    s = config.state
    watches = [_Watch(s.table, "state", s.key, s.version or "", s.status)]
    if config.side_effects:
        e = config.side_effects
        watches.append(_Watch(e.table, "side_effect", e.key or "", e.version or "", "", e.event_id or ""))
    return watches


class EffectRecorder:
    """Installs the triggers, reads the effects, removes everything again."""

    def __init__(self, conn: Any, config: WorkerConfig) -> None:
        self.conn = conn  # autocommit psycopg connection
        self.config = config
        self.installed = False

    def install(self) -> None:
        """Create the schema and the triggers (refuses if a previous run left them)."""
        if self.conn.execute("SELECT to_regnamespace(%s)", (SCHEMA,)).fetchone()[0] is not None:
            raise RuntimeError(f"schema {SCHEMA} already exists in this database: a previous run did "
                               f"not clean up; drop it with DROP SCHEMA {SCHEMA} CASCADE")
        with self.conn.transaction():
            self.conn.execute(_INSTALL)
            for w in _watches(self.config):
                table = _table(w.table)
                args = sql.SQL(", ").join(sql.Literal(a) for a in (w.role, w.key, w.version, w.status, w.event_id))
                self.conn.execute(sql.SQL(
                    "CREATE TRIGGER {t} AFTER INSERT OR UPDATE OR DELETE ON {tbl} "
                    "FOR EACH ROW EXECUTE FUNCTION {s}.record_effect({args})").format(
                    t=sql.Identifier(EFFECT_TRIGGER), tbl=table, s=sql.Identifier(SCHEMA), args=args))
                self.conn.execute(sql.SQL(
                    "CREATE CONSTRAINT TRIGGER {t} AFTER INSERT OR UPDATE OR DELETE ON {tbl} "
                    "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {s}.record_commit()").format(
                    t=sql.Identifier(COMMIT_TRIGGER), tbl=table, s=sql.Identifier(SCHEMA)))
        self.installed = True

    def read(self) -> list[Effect]:
        """Every committed effect, in commit order (then statement order inside a transaction)."""
        rows = self.conn.execute(
            f"SELECT c.commit_seq, e.seq, e.txid::text::bigint, e.tbl, e.op, e.key, e.version, e.status, "
            f"e.event_id, extract(epoch FROM e.at)::float8 FROM {SCHEMA}.effects e JOIN {SCHEMA}.commits c USING (txid) "
            f"ORDER BY c.commit_seq, e.seq").fetchall()
        return [Effect(*r[:6], _int_or_none(r[6]), r[7], r[8], r[9]) for r in rows]

    def count(self) -> int:
        """How many effects `read` would return (the drain's look: no rows fetched)."""
        return int(self.conn.execute(
            f"SELECT count(*) FROM {SCHEMA}.effects e JOIN {SCHEMA}.commits c USING (txid)").fetchone()[0])

    def remove(self) -> None:
        """Drop the triggers and the framework's schema; safe to call twice."""
        self.conn.execute("SET lock_timeout = '10s'")
        with self.conn.transaction():
            for w in _watches(self.config):
                if self.conn.execute("SELECT to_regclass(%s)", (w.table,)).fetchone()[0] is None:
                    continue
                for trigger in (EFFECT_TRIGGER, COMMIT_TRIGGER):
                    self.conn.execute(sql.SQL("DROP TRIGGER IF EXISTS {t} ON {tbl}").format(
                        t=sql.Identifier(trigger), tbl=_table(w.table)))
            self.conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {s} CASCADE").format(s=sql.Identifier(SCHEMA)))
        self.conn.execute("RESET lock_timeout")
        self.installed = False

    def __enter__(self) -> EffectRecorder:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def _table(name: str) -> sql.Composable:
    return sql.Identifier(*name.split(".", 1))


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


_FINGERPRINT = """
SELECT 'rel', n.nspname || '.' || c.relname || ':' || c.relkind::text FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg_toast%' AND n.nspname NOT LIKE 'pg_temp%'
UNION ALL
SELECT 'col', attrelid::regclass::text || '.' || attname || ':' || format_type(atttypid, atttypmod)
  || ':' || attnotnull::text || ':' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
  WHERE a.attnum > 0 AND NOT a.attisdropped AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg_toast%'
UNION ALL
SELECT 'trigger', tgrelid::regclass::text || '.' || tgname || ':' || pg_get_triggerdef(t.oid)
  FROM pg_trigger t WHERE NOT tgisinternal
UNION ALL
SELECT 'constraint', conrelid::regclass::text || '.' || conname || ':' || pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
UNION ALL
SELECT 'function', p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
  WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
UNION ALL
SELECT 'schema', nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg_%' AND nspname <> 'information_schema'
"""


def schema_fingerprint(conn: Any) -> list[tuple[str, str]]:
    """Every user-visible schema object (relations, columns, defaults, triggers, constraints,
    functions, schemas), sorted: equal before install and after remove."""
    return sorted(tuple(r) for r in conn.execute(_FINGERPRINT).fetchall())
