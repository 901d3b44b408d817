"""The drain's progress tail and the entry-id comparison of the final-state reader (pure)."""
from __future__ import annotations

import json

from chaos.workload.final_state import _after
from chaos.workload.progress import ProgressWatch


def test_progress_counts_useful_ops_only_and_survives_a_torn_line(tmp_path):
    hist = tmp_path / "history"
    hist.mkdir()
    ops = [{"time": 1.0, "process": "C1", "type": "ok", "f": "deliver", "via": "claim"},   # a poison retry
           {"time": 2.0, "process": "C1", "type": "fail", "f": "apply"},
           {"time": 3.0, "process": "C1", "type": "ok", "f": "ack"}]
    (hist / "C1.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops) + '{"time": 9.0, "proc')
    watch = ProgressWatch(tmp_path)
    watch.last_useful = 0.0
    assert watch.poll() == 3.0 and watch.useful_ops == 1
    with open(hist / "C1.jsonl", "a") as fh:  # the torn line is completed later
        fh.write('ess": "C1", "type": "ok", "f": "apply"}\n')
    assert watch.poll() == 9.0 and watch.useful_ops == 2


def test_a_restarted_process_is_not_busy_with_its_predecessors_dangling_apply(tmp_path):
    hist = tmp_path / "history"
    hist.mkdir()
    ops = [{"time": 1.0, "process": "W1", "type": "invoke", "f": "apply", "entry_id": "1-0"},  # then SIGKILL
           {"time": 2.0, "process": "W1", "type": "info", "f": "log", "value": {"started": "worker"}},
           {"time": 3.0, "process": "W1", "type": "invoke", "f": "apply", "entry_id": "2-0"}]
    (hist / "W1.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
    watch = ProgressWatch(tmp_path)
    watch.poll()
    assert watch.busy(["W1"])
    with open(hist / "W1.jsonl", "a") as fh:
        fh.write(json.dumps({"time": 4.0, "process": "W1", "type": "ok", "f": "apply", "entry_id": "2-0"}) + "\n")
    watch.poll()
    assert not watch.busy(["W1"]) and not watch.busy(["C9"])


def test_entry_ids_compare_numerically():
    assert _after("1700000000001-0", "1700000000000-9")
    assert _after("1700000000000-10", "1700000000000-9")
    assert not _after("1700000000000-9", "1700000000000-9")
