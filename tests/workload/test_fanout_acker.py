"""The S3 acker keeps an entry in flight until its XACK's reply: the fan-out reader's own
XAUTOCLAIM (claim=always, min-idle 200 ms) must not hand an entry that is done but not yet
acked to a worker again. The `before_ack` failpoint holds the acker for 1 s on its first
entry, so every entry finished meanwhile waits for its XACK past the min-idle time (the
acker popping the entry before its XACK gave 53 redelivered and 53 duplicated here)."""
from __future__ import annotations

import shutil
from pathlib import Path

from chaos.history import read_history
from chaos.run import run_cell

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
