"""The small config file that tells the black-box checker where a team's consumer leaves
its effects, and how events must be encoded for it.

It is TOML (stdlib ``tomllib``) so a team can keep it next to its code. Everything is
checked in two steps, both before any worker starts: ``load_config`` checks the file's
own shape (unknown keys, wrong types, missing tables); ``WorkerConfig.check_schema``
checks the named tables and columns against the live database.

```toml
[worker]                  # how to run the consumer
processes = 2             # how many OS processes
stream = "orders"         # CHAOS_STREAM
group = "workers"         # CHAOS_GROUP
schema = "schema.sql"     # optional: SQL run on the fresh database first (the user's migration)
ready_timeout_s = 20      # every process must connect to its Redis proxy within this time
drain_s = 15              # after the workload: how long the workers may go without progress (no entry acked)
dlq_stream = "orders:dlq" # optional: where the consumer dead-letters
env = { LOG_LEVEL = "info" }

[encoder]                 # how an event looks on the stream (see chaos/encoders.py)
format = "plain"          # plain | taskiq | faststream
task_name = "app:handle"  # taskiq only
fields = { order_id = "key", status = "etype", version = "version", event_id = "event_id" }

[state]                   # where the consumer keeps the state it derives from events
table = "orders"
key = "id"
status = "status"
version = "version"       # or version_from_status = { created = 1, paid = 2 }
skips_stale = true        # false: every event must leave a write (no CAS), so a missing one is lost

[side_effects]            # optional: one row per external effect (email, webhook)
table = "emails"
event_id = "event_id"     # or key = "order_id" and version = "version"

[poison]                  # optional: a payload the consumer must survive (fault poison:source=config)
fields = { version = "not-a-number" }   # encoder fields replaced in the poison events
count = 1                 # poison events, published in the middle of the workload on keys of their own

[expect]                  # optional: what the team promises (exit 1 from `run` if broken)
lost = 0
duplicated_side_effects = 0
wrong_final_state_runs = "<= 1"

[workload]                # the events the framework publishes (the event model)
keys = 100                # orders 42, 43, ...
etypes = ["created", "paid"]   # one event per etype and key, business versions 1, 2
gap_ms = 10               # between two publishes
```
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.blackbox.errors import ConfigError
from chaos.blackbox.expect import parse_bound
from chaos.encoders import EVENT_ATTRIBUTES, EncoderSpec

ENCODER_FORMATS = ("plain", "taskiq", "faststream")


@dataclass(frozen=True)
class StateSpec:
    """The table holding one row per key: the state the consumer derived."""

    table: str
    key: str
    status: str
    version: str | None = None
    version_from_status: dict[str, int] | None = None
    skips_stale: bool = True  # the consumer may skip an event older than the row (a CAS): see verdict.py

    def columns(self) -> list[str]:
        return [c for c in (self.key, self.status, self.version) if c]


@dataclass(frozen=True)
class SideEffectSpec:
    """A table with one row per external side effect, named by event or by (key, version)."""

    table: str
    event_id: str | None = None
    key: str | None = None
    version: str | None = None

    def columns(self) -> list[str]:
        return [c for c in (self.event_id, self.key, self.version) if c]


@dataclass(frozen=True)
class WorkerSpec:
    """How the consumer is run: processes, names, readiness bound, the user's migration."""

    processes: int = 1
    stream: str = "orders"
    group: str = "workers"
    schema: Path | None = None
    ready_timeout_s: float = 20.0
    env: dict[str, str] = field(default_factory=dict)
    drain_s: float = 15.0
    dlq_stream: str | None = None


@dataclass(frozen=True)
class WorkloadSpec:
    """The events the framework publishes: ``keys`` keys, each with one event per etype,
    business versions 1..len(etypes) in that order."""

    keys: int = 100
    etypes: tuple[str, ...] = ("created", "paid")
    first_key: int = 42
    gap_ms: float = 10.0  # between two publishes: 200 events take ~2 s, so faults land mid-stream


@dataclass(frozen=True)
class PoisonSpec:
    """A payload the consumer must survive: encoder fields replaced in ``count`` extra events
    (keys of their own, past the workload's), published by the fault ``poison:source=config``."""

    fields: dict[str, Any]
    count: int = 1


@dataclass(frozen=True)
class WorkerConfig:
    """The whole config file, checked."""

    path: Path | None
    worker: WorkerSpec
    encoder: EncoderSpec
    state: StateSpec
    side_effects: SideEffectSpec | None
    workload: WorkloadSpec
    expect: dict[str, Any] = field(default_factory=dict)  # count -> bound, see chaos/blackbox/expect.py
    poison: PoisonSpec | None = None

    def tables(self) -> dict[str, list[str]]:
        """Every user table the framework will touch -> the columns it reads."""
        tables = {self.state.table: self.state.columns()}
        if self.side_effects:
            tables.setdefault(self.side_effects.table, []).extend(self.side_effects.columns())
        return tables

    def check_schema(self, conn: Any) -> None:
        """Raise ConfigError naming each table or column the database lacks.

        Called after the user's migration ran and before any worker starts."""
        problems = []
        for table, columns in self.tables().items():
            if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is None:
                problems.append(f"table {table!r} does not exist")
                continue
            have = {r[0] for r in conn.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s)"
                " AND attnum > 0 AND NOT attisdropped", (table,))}
            for column in columns:
                if column not in have:
                    problems.append(f"table {table!r} has no column {column!r} "
                                    f"(it has: {', '.join(sorted(have))})")
        if problems:
            where = f" in {self.path}" if self.path else ""
            hint = (" Run the consumer's migration first (set [worker] schema = \"file.sql\")"
                    " or fix the names" + where + ".")
            raise ConfigError("; ".join(problems) + "." + hint)


_SECTIONS = {
    "worker": {"processes", "stream", "group", "schema", "ready_timeout_s", "env", "drain_s", "dlq_stream"},
    "encoder": {"format", "fields", "task_name"},
    "state": {"table", "key", "status", "version", "version_from_status", "skips_stale"},
    "side_effects": {"table", "event_id", "key", "version"},
    "workload": {"keys", "etypes", "first_key", "gap_ms"},
    "expect": None,  # any count name; checked by chaos.blackbox.expect
    "poison": {"fields", "count"},
}


def load_config(path: str | Path) -> WorkerConfig:
    """Read and check a config file; a ConfigError names the key and the fix."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"worker config {path} does not exist; give the path of a TOML file "
                          f"(see docs/blackbox.md for the format)")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"worker config {path} is not valid TOML: {exc}") from None
    return parse_config(raw, path)


def parse_config(raw: dict[str, Any], path: Path | None = None) -> WorkerConfig:
    """Check a config already parsed into a dict (from a file or from a pytest marker)."""
    where = f"{path}: " if path else "worker config: "
    unknown = sorted(set(raw) - set(_SECTIONS))
    if unknown:
        raise ConfigError(f"{where}unknown section(s) {', '.join(unknown)}; "
                          f"valid sections: {', '.join(_SECTIONS)}")
    for section, keys in _SECTIONS.items():
        body = raw.get(section, {})
        if not isinstance(body, dict):
            raise ConfigError(f"{where}[{section}] must be a table")
        extra = sorted(set(body) - keys) if keys is not None else []
        if extra:
            raise ConfigError(f"{where}[{section}] has unknown key(s) {', '.join(extra)}; "
                              f"valid keys: {', '.join(sorted(keys))}")
    if "state" not in raw:
        raise ConfigError(f"{where}missing [state]: name the table holding the consumer's state, "
                          f"e.g. [state] table = \"orders\", key = \"id\", status = \"status\", "
                          f"version = \"version\"")
    base = path.parent if path else Path.cwd()
    return WorkerConfig(
        path=path,
        worker=_worker(raw.get("worker", {}), where, base),
        encoder=_encoder(raw.get("encoder", {}), where),
        state=_state(raw["state"], where),
        side_effects=_side_effects(raw["side_effects"], where) if "side_effects" in raw else None,
        workload=_workload(raw.get("workload", {}), where),
        expect=_expect(raw.get("expect", {}), where),
        poison=_poison(raw["poison"], where, raw.get("encoder", {})) if "poison" in raw else None,
    )


def _get(body: dict, key: str, kind: type | tuple, where: str, section: str, default: Any = None,
         required: bool = False) -> Any:
    if key not in body:
        if required:
            raise ConfigError(f"{where}[{section}] needs {key} = ...")
        return default
    value = body[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        name = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise ConfigError(f"{where}[{section}] {key} = {value!r} must be a {name}")
    return value


def _identifier(value: str | None, where: str, section: str, key: str) -> str | None:
    if value is not None and (not value or not value.replace("_", "a").replace(".", "a").isalnum()):
        raise ConfigError(f"{where}[{section}] {key} = {value!r} is not a plain SQL name "
                          f"(letters, digits, _ and an optional schema.)")
    return value


def _worker(body: dict, where: str, base: Path) -> WorkerSpec:
    processes = _get(body, "processes", int, where, "worker", 1)
    if processes < 1:
        raise ConfigError(f"{where}[worker] processes = {processes} must be >= 1")
    schema = _get(body, "schema", str, where, "worker")
    schema_path = (base / schema) if schema else None
    if schema_path and not schema_path.is_file():
        raise ConfigError(f"{where}[worker] schema = {schema!r}: {schema_path} does not exist")
    timeout = _get(body, "ready_timeout_s", float, where, "worker", 20.0)
    if timeout <= 0:
        raise ConfigError(f"{where}[worker] ready_timeout_s must be > 0")
    env = _get(body, "env", dict, where, "worker", {})
    drain = _get(body, "drain_s", float, where, "worker", 15.0)
    if drain <= 0:
        raise ConfigError(f"{where}[worker] drain_s must be > 0")
    return WorkerSpec(processes=processes, stream=_get(body, "stream", str, where, "worker", "orders"),
                      group=_get(body, "group", str, where, "worker", "workers"), schema=schema_path,
                      ready_timeout_s=timeout, env={str(k): str(v) for k, v in env.items()},
                      drain_s=drain, dlq_stream=_get(body, "dlq_stream", str, where, "worker"))


def _encoder(body: dict, where: str) -> EncoderSpec:
    fmt = _get(body, "format", str, where, "encoder", "plain")
    if fmt not in ENCODER_FORMATS:
        raise ConfigError(f"{where}[encoder] format = {fmt!r} is not one of {', '.join(ENCODER_FORMATS)}")
    fields = _get(body, "fields", dict, where, "encoder", {a: a for a in EVENT_ATTRIBUTES})
    bad = {k: v for k, v in fields.items() if v not in EVENT_ATTRIBUTES}
    if bad:
        raise ConfigError(f"{where}[encoder] fields maps {bad} to unknown event attributes; "
                          f"each value must be one of {', '.join(EVENT_ATTRIBUTES)}")
    task_name = _get(body, "task_name", str, where, "encoder")
    if fmt == "taskiq" and not task_name:
        raise ConfigError(f"{where}[encoder] format = \"taskiq\" needs task_name = \"module:function\" "
                          f"(the name taskiq registered the task under)")
    return EncoderSpec(format=fmt, fields=dict(fields), task_name=task_name)


def _state(body: dict, where: str) -> StateSpec:
    s = "state"
    version = _get(body, "version", str, where, s)
    derived = _get(body, "version_from_status", dict, where, s)
    if (version is None) == (derived is None):
        raise ConfigError(f"{where}[state] needs exactly one of version = \"column\" or "
                          f"version_from_status = {{ created = 1, paid = 2 }}")
    if derived and not all(isinstance(v, int) for v in derived.values()):
        raise ConfigError(f"{where}[state] version_from_status values must be integers")
    return StateSpec(table=_identifier(_get(body, "table", str, where, s, required=True), where, s, "table"),
                     key=_identifier(_get(body, "key", str, where, s, required=True), where, s, "key"),
                     status=_identifier(_get(body, "status", str, where, s, required=True), where, s, "status"),
                     version=_identifier(version, where, s, "version"), version_from_status=derived,
                     skips_stale=_get(body, "skips_stale", bool, where, s, True))


def _side_effects(body: dict, where: str) -> SideEffectSpec:
    s = "side_effects"
    spec = SideEffectSpec(
        table=_identifier(_get(body, "table", str, where, s, required=True), where, s, "table"),
        event_id=_identifier(_get(body, "event_id", str, where, s), where, s, "event_id"),
        key=_identifier(_get(body, "key", str, where, s), where, s, "key"),
        version=_identifier(_get(body, "version", str, where, s), where, s, "version"))
    if not spec.event_id and not (spec.key and spec.version):
        raise ConfigError(f"{where}[side_effects] needs event_id = \"column\" or both key and version "
                          f"columns, so each effect can be tied to the event that caused it")
    return spec


def _workload(body: dict, where: str) -> WorkloadSpec:
    keys = _get(body, "keys", int, where, "workload", 100)
    etypes = _get(body, "etypes", list, where, "workload", ["created", "paid"])
    if keys < 1 or not etypes or not all(isinstance(e, str) and e for e in etypes):
        raise ConfigError(f"{where}[workload] needs keys >= 1 and etypes = a non-empty list of names")
    gap = _get(body, "gap_ms", float, where, "workload", 10.0)
    if gap < 0:
        raise ConfigError(f"{where}[workload] gap_ms must be >= 0")
    return WorkloadSpec(keys=keys, etypes=tuple(etypes), gap_ms=gap,
                        first_key=_get(body, "first_key", int, where, "workload", 42))


def _expect(body: dict, where: str) -> dict[str, Any]:
    return {name: parse_bound(name, value, where) for name, value in body.items()}


def _poison(body: dict, where: str, encoder: dict) -> PoisonSpec:
    fields = _get(body, "fields", dict, where, "poison", required=True)
    names = set(encoder.get("fields") or EVENT_ATTRIBUTES)
    unknown = sorted(set(fields) - names)
    if not fields or unknown:
        raise ConfigError(f"{where}[poison] fields = {fields!r}: name the encoder's fields whose values make an "
                          f"event poison, e.g. fields = {{ version = \"not-a-number\" }} (the fields are: "
                          f"{', '.join(sorted(names))})")
    count = _get(body, "count", int, where, "poison", 1)
    if count < 1:
        raise ConfigError(f"{where}[poison] count = {count} must be >= 1")
    return PoisonSpec(fields=dict(fields), count=count)
