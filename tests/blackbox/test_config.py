"""The worker config: every mistake is an error naming the key and the fix, before anything runs."""
from __future__ import annotations

from pathlib import Path

import pytest

from chaos.blackbox.config import load_config, parse_config
from chaos.blackbox.errors import ConfigError
from chaos.errors import BadArguments

STATE = {"table": "orders", "key": "id", "status": "status", "version": "version"}
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("raw, words", [
    ({"state": STATE, "stat": {}}, ["unknown section", "stat"]),
    ({"state": {**STATE, "colour": "x"}}, ["unknown key", "colour"]),
    ({}, ["missing [state]"]),
    ({"state": {k: v for k, v in STATE.items() if k != "version"}}, ["exactly one of version"]),
    ({"state": {**STATE, "version_from_status": {"created": 1}}}, ["exactly one of version"]),
    ({"state": STATE, "encoder": {"format": "celery"}}, ["format", "celery", "plain"]),
    ({"state": STATE, "encoder": {"format": "taskiq"}}, ["task_name"]),
    ({"state": STATE, "encoder": {"fields": {"order_id": "order"}}}, ["unknown event attributes", "order"]),
    ({"state": STATE, "worker": {"processes": 0}}, ["processes", ">= 1"]),
    ({"state": STATE, "worker": {"processes": "2"}}, ["processes", "must be a int"]),
    ({"state": STATE, "worker": {"schema": "nope.sql"}}, ["schema", "does not exist"]),
    ({"state": {**STATE, "table": "orders; drop"}}, ["not a plain SQL name"]),
    ({"state": STATE, "side_effects": {"table": "emails"}}, ["event_id", "key and version"]),
])
def test_bad_config_names_the_problem(raw: dict, words: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    for word in words:
        assert word in str(info.value)
    assert isinstance(info.value, BadArguments)  # the CLI turns it into exit 254


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "absent.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[state\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)


@pytest.mark.parametrize("name", ["taskiq_orders", "faststream_orders", "redis_py_ack_first"])
def test_example_configs_load(name: str) -> None:
    config = load_config(EXAMPLES / f"{name}.toml")
    assert config.state.table == "orders" and config.side_effects.table == "order_emails"
    assert config.worker.schema.is_file()
    assert config.tables() == {"orders": ["id", "status", "version"], "order_emails": ["event_id"]}


def test_check_schema_names_missing_table_and_column(cluster) -> None:
    conn = cluster.pg_connect()
    try:
        conn.execute("CREATE TABLE orders (id text PRIMARY KEY, state text, version int)")
        config = parse_config({"state": STATE, "side_effects": {"table": "emails", "event_id": "event_id"}})
        with pytest.raises(ConfigError) as info:
            config.check_schema(conn)
        text = str(info.value)
        assert "table 'orders' has no column 'status'" in text and "it has: id, state, version" in text
        assert "table 'emails' does not exist" in text
        parse_config({"state": {**STATE, "status": "state"}}).check_schema(conn)  # the right names pass
    finally:
        conn.close()


@pytest.mark.parametrize("poison, words", [
    ({"fields": {"amount": "x"}}, ["[poison] fields", "amount", "the fields are: event_id, key, status, version"]),
    ({"fields": {}}, ["[poison] fields", "e.g. fields = { version"]),
    ({"fields": {"version": "x"}, "count": 0}, ["[poison] count = 0 must be >= 1"]),
    ({"count": 1}, ["[poison] needs fields"]),
])
def test_a_bad_poison_table_names_the_fix(poison: dict, words: list[str]) -> None:
    raw = {"state": STATE, "encoder": {"fields": {"key": "key", "status": "etype", "version": "version",
                                                  "event_id": "event_id"}}, "poison": poison}
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    assert all(w in str(info.value) for w in words), str(info.value)


def test_a_poison_payload_replaces_the_declared_fields_only() -> None:
    from chaos.encoders import EncoderSpec, encoder_for
    from chaos.events import Event
    spec = EncoderSpec(fields={"order_id": "key", "version": "version"}, poison={"version": "not-a-number"})
    encode = encoder_for(spec)
    assert encode(Event("poison-1", "142", "created", 1, poison=True)) == {"order_id": "142", "version": "not-a-number"}
    assert encode(Event("e42-1", "42", "created", 1)) == {"order_id": "42", "version": "1"}
