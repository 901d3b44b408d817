"""The S3 acker keeps an entry in flight until its XACK's reply: the fan-out reader's own
XAUTOCLAIM (claim=always, min-idle 200 ms) must not hand an entry that is done but not yet
acked to a worker again. The `before_ack` failpoint holds the acker for 1 s on its first
entry, so every entry finished meanwhile waits for its XACK past the min-idle time (the
acker popping the entry before its XACK gave 53 redelivered and 53 duplicated here). The
same hold shows the reader is never blocked in XREADGROUP while XACKs are owed (before, it
was: the orchestrator's idle test then took it for a consumer with nothing to do)."""
from __future__ import annotations

import shutil
from pathlib import Path

from chaos.history import read_history
from chaos.orchestrator import run_cell

CLAIMING = {"delivery": "fanout:workers=4,claim=always,claim_idle_ms=200"}
SLOW_ACK = {"reader": {"before_ack": {"action": "pause", "pause_ms": 1000, "count": 1}}}


def test_an_entry_done_but_not_yet_acked_is_not_handled_again(cluster):
    cell = run_cell(cluster, "s3", runs=1, seed=11, time_scale=1.0, parts=CLAIMING, failpoints=SLOW_ACK,
                    keep_runs="always")
    try:
        history = read_history(Path(cell.run_dirs[0]), run=0)
    finally:
        shutil.rmtree(cell.run_root, ignore_errors=True)
    held = [op for op in history if op["f"] == "failpoint" and op["value"]["name"] == "before_ack"]
    assert len(held) == 1, "the acker never reached before_ack: the race was not forced"
    counts = cell.counts
    assert cell.verdict != "unknown", cell.unknown_reasons
    assert counts.handled == counts.published > 0, counts.as_dict()
    assert (counts.redelivered, counts.duplicated) == (0, 0), (
        f"the harness redelivered entries it held: {counts.as_dict()}")


def test_the_reader_does_not_block_in_xreadgroup_while_its_acker_owes_xacks(cluster, tmp_path):
    """Idle means nothing owed: while the acker is held at before_ack (3 s, every entry done
    and unacked), the reader is never seen blocked in XREADGROUP (CLIENT LIST flag b), which
    the orchestrator reads as a consumer with nothing left to do."""
    import threading
    import time

    slow = {"reader": {"before_ack": {"action": "pause", "pause_ms": 3000, "count": 1}}}
    done: dict = {}
    runner = threading.Thread(target=lambda: done.setdefault("cell", run_cell(
        cluster, "s3", runs=1, seed=11, time_scale=1.0, failpoints=slow, run_root=tmp_path, keep_runs="never")))
    runner.start()
    r = cluster.direct_redis()
    try:
        deadline = time.monotonic() + 60
        while not any(b'"before_ack"' in p.read_bytes() for p in tmp_path.glob("run-*/history/R*.jsonl")):
            assert runner.is_alive() and time.monotonic() < deadline, "the acker never reached before_ack"
            time.sleep(0.01)
        blocked = []
        until = time.monotonic() + 1.0     # well inside the 3 s hold
        while time.monotonic() < until:
            blocked.append(sum(1 for c in r.client_list() if c.get("cmd") == "xreadgroup" and "b" in c["flags"]))
            time.sleep(0.02)
    finally:
        runner.join(120)
    assert len(blocked) > 10 and max(blocked) == 0, f"reader blocked while owing XACKs in {sum(blocked)} samples"
    assert done["cell"].counts.handled == done["cell"].counts.published > 0
