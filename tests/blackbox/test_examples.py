"""The worked examples under faults: real libraries, real processes, real SIGKILL and failover.

The hand-written ack-before-write consumer must be caught losing events, and its
corrected twin (ack after a compare-and-set write) judged valid under the same kill; the
library examples are measured (docs/blackbox.md has the table) and held to what they do
guarantee: no loss with ack-after-processing when a consumer dies.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

ACK_FIRST = ("python -m examples.redis_py_ack_first", "examples/redis_py_ack_first.toml")
CAS = ("python -m examples.redis_py_cas", "examples/redis_py_cas.toml")
TASKIQ = ("taskiq worker examples.taskiq_orders:broker --workers 1 --max-async-tasks 10", "examples/taskiq_orders.toml")
FASTSTREAM = ("python -m examples.faststream_orders", "examples/faststream_orders.toml")
# mid-backlog, while the victim holds entries it read (not at a time, which can fall between a
# batch's last write and the next read, where the ack-first consumer loses nothing)
KILL = "kill-consumer:at=holding"
# The failover's hold goes on halfway through the burst, as at_ms=200 of the docs table meant, but
# on the producer's progress: stopped at its before_publish failpoint after 100 publishes, the hold
# put on, resumed (a loaded machine finished the whole burst before a timed hold: the failover then
# took back only reads, which the black box cannot see, and the test failed). The kill waits, the
# link still held, until an entry the primary acknowledged is there that neither the replica nor
# any consumer has (`until=unread`): the loss the rows below need. A run whose hold never saw one
# is unknown (skipped), not a failure.
FAILOVER = "promote-replica:at=before_publish,after_entries=100,hold_ms=300,until=unread,until_ms=3000"
# The library rows under the stall, the failover and the blip (6 cells, 2.5-3 CPU s each: two
# library processes importing taskiq or FastStream, a PostgreSQL connection per job) run in the
# nightly (`CHAOS_NIGHTLY=1`). CI keeps tests that fail for the same bugs: the same three faults
# in black-box mode (the ack-first and cas rows below: a fault that does not fire, a verdict gone
# unknown), both libraries as black boxes under a fault
# (test_ack_after_processing_loses_nothing_when_a_worker_is_killed) and their message formats
# decoded by the libraries themselves (test_encoders.py); the libraries are pinned.
LIBRARY_ROW_NIGHTLY = pytest.mark.skipif(
    os.environ.get("CHAOS_NIGHTLY") != "1",
    reason="nightly (CHAOS_NIGHTLY=1): CI runs the ack-first and cas rows of these faults, "
           "test_ack_after_processing_loses_nothing_when_a_worker_is_killed and test_encoders.py")


def figures(cell) -> str:
    names = ("published", "lost", "superseded_unobserved", "duplicated", "duplicated_side_effects", "reordered",
             "wrong_final_state_runs", "pending_left")
    return ", ".join(f"{n}={cell.count(n)}" for n in names)


def fault_ops(cell, name: str) -> list[dict]:
    return [op["value"] for run in cell.runs for op in run.history
            if op["f"] == "fault" and op["value"].get("name") == name]


@pytest.mark.blackbox(command=ACK_FIRST[0], config=ACK_FIRST[1])
def test_ack_before_write_loses_events_when_a_worker_is_killed(blackbox) -> None:
    cell = blackbox(fault=KILL, runs=1)
    print(figures(cell))
    assert cell.cell.verdict == "invalid"
    assert cell.count("lost") > 0, figures(cell)             # acked, never written, not pending
    assert cell.count("pending_left") == 0                     # nothing left that XAUTOCLAIM could save
    assert cell.count("handled") + cell.count("lost") == cell.count("published") == 200  # all accounted for
    assert [v["worker"] for v in fault_ops(cell, "kill-consumer") if v.get("phase") == "start"]


@pytest.mark.blackbox(command=ACK_FIRST[0], config=ACK_FIRST[1])
def test_ack_before_write_loses_nothing_without_a_crash(blackbox) -> None:
    cell = blackbox(runs=1, expect={"lost": 0, "pending_left": 0, "missing_side_effects": 0})
    assert cell.count("published") == 200 and cell.count("side_effects") >= 200



@pytest.mark.blackbox(command=CAS[0], config=CAS[1])
def test_ack_after_write_with_compare_and_set_is_judged_valid_when_a_worker_is_killed(blackbox) -> None:
    """The positive control: the same burst and kill, a consumer that acks after a guarded
    write; nothing lost, duplicated, reordered or wrong, nothing left pending."""
    cell = blackbox(fault=KILL, runs=1, expect={"lost": 0, "duplicated": 0, "duplicated_side_effects": 0,
                                                "reordered": 0, "wrong_final_state_runs": 0, "pending_left": 0})
    print(figures(cell))
    assert cell.cell.verdict == "valid" and cell.count("published") == 200
    assert any(v.get("phase") == "start" for v in fault_ops(cell, "kill-consumer"))


TASKIQ_WINDOW_S = 3   # the taskiq row's no-progress window here (10 in the example)


def taskiq_config(tmp_path: Path) -> Path:
    """The taskiq example's config with a TASKIQ_WINDOW_S no-progress window. taskiq-redis
    claims a dead worker's entries only while it still reads new ones (docs/blackbox.md): once
    the stream is quiet what is left stays pending, and the example's 10 s window was sat out
    in full in every run (outstanding 9 from 0.6 s into the drain, then 10 s of nothing). What
    this test promises, no loss, does not rest on the window: an entry the drain leaves is
    pending (taskiq acks after the task), counted as pending_left, never as lost."""
    text = (ROOT / TASKIQ[1]).read_text()
    text = text.replace('schema = "orders_schema.sql"', f'schema = "{ROOT / "examples/orders_schema.sql"}"')
    assert "drain_s = 10 " in text
    path = tmp_path / "taskiq_orders.toml"
    path.write_text(text.replace("drain_s = 10 ", f"drain_s = {TASKIQ_WINDOW_S} "))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("command, config", [TASKIQ, FASTSTREAM], ids=["taskiq", "faststream"])
def test_ack_after_processing_loses_nothing_when_a_worker_is_killed(blackbox, command, config, tmp_path) -> None:
    # What this promises is no loss. taskiq-redis may leave the killed worker's entries unclaimed
    # to the end of the drain (stopped_consuming 73 and 88 seen in loaded runs, 0 in others):
    # measured and printed, not promised here, as after a failover below.
    # FastStream's reclaim subscriber (min_idle_time: XAUTOCLAIM) recovers the dead worker's
    # entries: nothing is left pending (one cell shows both, as the same kill always did).
    taskiq = (command, config) == TASKIQ
    measured = {"stopped_consuming": ">= 0"} if taskiq else None
    cell = blackbox(command, taskiq_config(tmp_path) if taskiq else config, fault=KILL, runs=1, expect=measured)
    print(f"{figures(cell)}, stopped_consuming={cell.count('stopped_consuming')}")
    assert cell.count("lost") == 0, figures(cell)
    assert cell.count("published") == 200
    if (command, config) == FASTSTREAM:
        assert cell.count("pending_left") == 0, figures(cell)


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["xautoclaim:at=time,at_ms=200", FAILOVER,
                                   "publish-blip"], ids=["xautoclaim", "promote-replica", "publish-blip"])
@pytest.mark.parametrize("command, config", [
    pytest.param(*ACK_FIRST, id="ack-first"), pytest.param(*CAS, id="cas"),
    pytest.param(*TASKIQ, id="taskiq", marks=LIBRARY_ROW_NIGHTLY),
    pytest.param(*FASTSTREAM, id="faststream", marks=LIBRARY_ROW_NIGHTLY)])
def test_each_example_under_each_fault(blackbox, command, config, fault) -> None:
    """Every cell of the docs table is measured (the library rows in the nightly; the failover's
    kill waits for a loss to take back: FAILOVER), the fault is shown to have fired, and what holds for every consumer holds: a stalled worker or a producer
    blip loses nothing (the retrying producer gets every event in; a stall loses no acked work)."""
    name = fault.partition(":")[0]
    # Liveness is promised for a stall and a blip; after a failover taskiq-redis may leave a
    # dead worker's entries pending for good (docs/blackbox.md): measured, not promised here.
    measured = {"stopped_consuming": ">= 0"} if name == "promote-replica" else None
    cell = blackbox(command, config, fault=fault, runs=1, expect=measured)
    print(f"{fault}: {figures(cell)}, stopped_consuming={cell.count('stopped_consuming')}")
    missed = [r for r in cell.cell.unknown_reasons if "missed the workload" in r]
    if name == "promote-replica" and missed and cell.cell.verdict == "unknown":
        pytest.skip(f"unknown: the hold never saw what the failover was to take back: {missed[0]}")
    assert cell.cell.verdict in ("valid", "invalid"), cell.cell.unknown_reasons
    phases = [v.get("phase") for v in fault_ops(cell, name)]
    assert "start" in phases, phases
    if name == "promote-replica":
        assert any(v.get("failed_over") for v in fault_ops(cell, name))
        assert cell.count("published") > 0
        if (command, config) in (ACK_FIRST, CAS):
            # The failover reaches the consumer: the entries the old primary acknowledged that
            # neither the replica nor a consumer had when it was killed (the kill op's
            # took_back) are gone: lost, or for CAS hidden behind a newer version
            # (superseded_unobserved). (Entries it had read come back too, but deliveries are
            # not observable from outside.) A hold that never saw one tested nothing: unknown.
            (kill,) = [v for v in fault_ops(cell, name) if v.get("step") == "kill"]
            took = kill.get("took_back") or {}
            print(f"kill: took_back={took}, met={kill.get('met')}, until_wait_s={kill.get('until_wait_s')}")
            if not took.get("unread"):
                pytest.skip(f"unknown: in {kill.get('until_wait_s')} s of hold no entry was acknowledged that "
                            f"the replica and every consumer lacked (took_back {took}): nothing for the "
                            f"failover to lose")
            seen = cell.count("lost") + cell.count("superseded_unobserved")
            assert seen > 0, f"the failover left no trace in what the consumer did: {figures(cell)}, kill {kill}"
    else:  # under heavy load a publish may fail all three attempts: judged on what was published
        assert cell.count("lost") == 0 and cell.count("published") > 0
