"""A whole black-box run with bad workers: verdict unknown, the reason, nothing left behind."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import psutil
import pytest

from chaos.cli import blackbox_cmd as cli
from chaos.blackbox.config import parse_config
from chaos.blackbox.effects import schema_fingerprint
from chaos.blackbox.errors import ConfigError
from chaos.cellspec import Spec
from chaos.blackbox import session
from chaos.blackbox.session import raw_redis, run_blackbox
from chaos.errors import EXIT_UNKNOWN

ROOT = Path(__file__).resolve().parents[2]
# drain_s: the never-writing worker never resumes, so its test waits the whole no-progress window out
CONFIG = {"worker": {"processes": 2, "schema": str(ROOT / "examples/orders_schema.sql"), "ready_timeout_s": 30,
                     "drain_s": 1},
          "state": {"table": "orders", "key": "id", "status": "status", "version": "version"},
          "workload": {"keys": 5}}
CONNECTS_NEVER_WRITES = (f"{sys.executable} -c \"import os, time, redis; "
                         "r = redis.Redis.from_url(os.environ['CHAOS_REDIS_URL']); r.ping(); "
                         "print('connected, doing nothing', flush=True); time.sleep(60)\"")


def my_children() -> set[int]:
    """Live processes this test run started, except the cluster's servers and their backends."""
    out = set()
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE and p.name() not in ("postgres", "redis-server"):
                out.add(p.pid)
        except psutil.NoSuchProcess:
            pass
    return out


def test_worker_that_exits_at_once_gives_unknown_with_exit_code_and_output(cluster) -> None:
    before = my_children()
    cell = run_blackbox(cluster, f"{sys.executable} -c \"import sys; print('no CHAOS_STREAM?'); sys.exit(4)\"",
                        parse_config(CONFIG), reset=False)
    assert cell.cell.verdict == "unknown"
    (reason,) = cell.cell.unknown_reasons
    assert "exit code 4" in reason and "no CHAOS_STREAM?" in reason
    assert my_children() <= before


def test_worker_that_connects_but_never_writes_gives_unknown(cluster, monkeypatch) -> None:
    """(Also: the drain's looks, every 0.1 s over its whole no-progress window, share one Redis
    client; each look used to open one or two.)"""
    before = my_children()
    opened = []

    def counted(cluster):
        opened.append(1)
        return raw_redis(cluster)

    monkeypatch.setattr(session, "raw_redis", counted)
    cell = run_blackbox(cluster, CONNECTS_NEVER_WRITES, parse_config(CONFIG), reset=False)
    # one for the drain, one for the state it ended on, one for the judge's final read
    assert len(opened) == 3, f"{len(opened)} Redis clients opened after the workload"
    assert cell.cell.verdict == "unknown"
    text = "\n".join(cell.cell.unknown_reasons)
    assert "no write to orders was observed" in text and "connected, doing nothing" in text
    assert cell.count("published") == 10 and cell.count("pending_left") == 0 and cell.count("undelivered") == 10
    assert my_children() <= before
    conn = cluster.pg_connect()
    try:  # the triggers and the framework's schema are gone, the user's tables stay
        assert not [i for _, i in schema_fingerprint(conn) if "chaos_b" in i]
        assert conn.execute("SELECT to_regclass('orders')").fetchone()[0] is not None
    finally:
        conn.close()


def test_config_naming_a_missing_column_stops_before_any_worker(cluster) -> None:
    before = my_children()
    bad = {**CONFIG, "state": {**CONFIG["state"], "status": "state"}}
    with pytest.raises(ConfigError, match="table 'orders' has no column 'state'"):
        run_blackbox(cluster, CONNECTS_NEVER_WRITES, parse_config(bad), reset=False)
    assert my_children() <= before


def test_cli_exit_code_2_for_an_unknown_verdict(tmp_path: Path, capsys) -> None:
    config = tmp_path / "w.toml"
    config.write_text(f'[worker]\nschema = "{ROOT / "examples/orders_schema.sql"}"\n'
                      '[state]\ntable = "orders"\nkey = "id"\nstatus = "status"\nversion = "version"\n')
    args = argparse.Namespace(worker_cmd=f"{sys.executable} -c \"raise SystemExit(9)\"", worker_config=str(config),
                              preset=None, fault=[], runs=1, seed=1, time_scale=1.0, json=True, trace=False,
                              backend=None, run_dir=str(tmp_path / "runs"))
    assert cli.run_from_args(args) == EXIT_UNKNOWN
    assert '"verdict": "unknown"' in capsys.readouterr().out


def test_drain_waits_for_an_ack_first_worker_still_writing_what_it_acked(cluster) -> None:
    """An ack-first worker acknowledges a batch, then writes it a job at a time: nothing is
    pending or undelivered while it does. With jobs longer than the drain's SETTLE_S (800 ms
    against 0.6 s) the drain used to settle between two writes and count the rest as lost
    (lost 6 of 8 in a run here); it settles only once the worker has come back to the group for work.
    (A loaded run showed the same with a 0.6 s gap after an xautoclaim stall's SIGCONT: lost 27.)"""
    slow = {**CONFIG, "worker": {**CONFIG["worker"], "processes": 2, "drain_s": 20,
                                 "env": {"ORDERS_WORK_MS": "800", "ORDERS_IDLE_TIMEOUT_MS": "60000"}},
            "workload": {"keys": 4, "gap_ms": 2},
            "encoder": {"format": "plain", "fields": {"order_id": "key", "status": "etype", "version": "version",
                                                      "event_id": "event_id"}}}
    cell = run_blackbox(cluster, f"{sys.executable} -m examples.redis_py_ack_first", parse_config(slow),
                        reset=False, cwd=ROOT)
    assert cell.count("published") == 8
    assert cell.count("lost") == 0, cell.cell.anomalies[:3]


def test_drain_waits_for_a_slow_worker_that_keeps_acking(cluster) -> None:
    """A worker slower than drain_s but still acking is not cut off: drain_s bounds a drain
    without progress, not a loaded machine's slow recovery. (A 200 ms job, a 2 s window: one
    job's wall time must stay well under the window; at load ~15 the gap between two jobs'
    writes was up to 0.95 s with 300 ms jobs, 1.22 s with 200 ms, against the old 1 s window.)"""
    slow = {**CONFIG, "worker": {**CONFIG["worker"], "processes": 1, "drain_s": 2,
                                 "env": {"ORDERS_WORK_MS": "200", "ORDERS_IDLE_TIMEOUT_MS": "60000"}},
            "workload": {"keys": 10},
            "encoder": {"format": "plain", "fields": {"order_id": "key", "status": "etype", "version": "version",
                                                      "event_id": "event_id"}}}
    cell = run_blackbox(cluster, f"{sys.executable} -m examples.redis_py_cas", parse_config(slow), reset=False,
                        cwd=ROOT)
    assert cell.count("published") == 20           # 20 jobs x 200 ms: about 4 s, two drain_s
    assert cell.count("pending_left") == 0 and cell.count("undelivered") == 0 and cell.count("lost") == 0


def test_a_failover_whose_hold_never_saw_what_it_waited_for_is_unknown(cluster) -> None:
    """A failover given `until` kills on until_ms when what it waits for never comes; that run
    tested nothing and is unknown, with the reason (faults.effects' took-back, read from the
    fault's own kill op: it holds for a black box too). Forced: a worker that never reads, so
    no entry a consumer read can come back (`until=reread`). The scorecard's failover cell and
    the examples' failover test count on it: a black-box run used to be judged as if the hold had
    met the burst."""
    spec = Spec.parse("promote-replica:at=before_publish,after_entries=5,hold_ms=0,until=reread,until_ms=200",
                      "fault")
    one = {**CONFIG, "worker": {**CONFIG["worker"], "processes": 1}}
    cell = run_blackbox(cluster, CONNECTS_NEVER_WRITES, parse_config(one), faults=[spec], reset=False)
    (kill,) = [op["value"] for run in cell.runs for op in run.history
               if op["f"] == "fault" and op["value"].get("step") == "kill"]
    assert kill["met"] is False and kill["took_back"]["read"] == 0, kill
    assert cell.cell.verdict == "unknown"
    assert any("fault promote-replica missed the workload" in r for r in cell.cell.unknown_reasons), \
        cell.cell.unknown_reasons
