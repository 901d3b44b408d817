"""ProgressWatch(keep=True): the history parsed while it is written is exactly read_history's."""
from __future__ import annotations

import gc
import os

import pytest

from chaos.history import HistoryError, HistoryWriter, history_dir, read_history
from chaos.workload.progress import ProgressWatch


def _write_pieces(path, data: bytes, pieces: list[int], watch: ProgressWatch) -> None:
    """Append `data` to `path` cut at `pieces` (byte offsets), polling between the appends:
    the watch sees half-written lines, as it does while workers write."""
    start = 0
    for end in [*pieces, len(data)]:
        with open(path, "ab") as fh:
            fh.write(data[start:end])
        start = end
        watch.poll()


def test_kept_history_equals_read_history_across_torn_lines_and_partial_reads(tmp_path):
    watch = ProgressWatch(tmp_path, keep=True)
    with HistoryWriter.for_run(tmp_path, "C1") as c1, HistoryWriter.for_run(tmp_path, "P-order") as producer:
        for n in range(50):
            producer.op("invoke", "publish", event_id=f"e{n}", key=str(n % 7), version=n)
            producer.op("ok", "publish", event_id=f"e{n}", key=str(n % 7), version=n, entry_id=f"{n}-0")
            if n % 10 == 0:
                watch.poll()
            c1.op("ok", "deliver", event_id=f"e{n}", entry_id=f"{n}-0", via="read")
            c1.op("invoke", "apply", event_id=f"e{n}", entry_id=f"{n}-0")
            c1.op("ok", "apply", event_id=f"e{n}", entry_id=f"{n}-0", effect="applied", value={"seq": n})
    c1_path = history_dir(tmp_path) / "C1.jsonl"
    # a SIGKILLed writer's torn line, then its successor (which ends the torn line first)
    with open(c1_path, "ab") as fh:
        fh.write(b'{"time":1e9,"process":"C1","type":"ok","f":"ack","ev')
    watch.poll()
    with HistoryWriter.for_run(tmp_path, "C1") as again:
        again.op("info", "log", value={"started": "consumer"})
    # a third file written in pieces that cut lines (and one op) anywhere, its last op unterminated
    with HistoryWriter(tmp_path / "scratch.jsonl", "C2") as scratch:
        ops = [scratch.make("ok", "ack", event_id=f"e{n}", entry_id=f"{n}-0") for n in range(30)]
    (tmp_path / "scratch.jsonl").unlink()
    from chaos.history import dump_op
    data = b"".join(dump_op(op) for op in ops).rstrip(b"\n")
    _write_pieces(history_dir(tmp_path) / "C2.jsonl", data, [1, 37, 38, 500, 1200, len(data) - 3], watch)

    kept = watch.history(run=4)

    assert kept == read_history(tmp_path, run=4)
    assert len(kept) == 50 * 5 + 1 + 30 and all(op["run"] == 4 for op in kept)
    assert gc.get_freeze_count() == 0          # the kept ops are the GC's again
    assert watch.useful_ops >= 50 * 4 and watch.handled == 50


def test_a_corrupt_line_is_the_same_error_as_read_history(tmp_path):
    watch = ProgressWatch(tmp_path, keep=True)
    with HistoryWriter.for_run(tmp_path, "C1") as c1:
        c1.op("ok", "deliver", event_id="e1", entry_id="1-0", via="read")
    watch.poll()
    with open(history_dir(tmp_path) / "C1.jsonl", "ab") as fh:   # two writers on one file
        fh.write(b'{"time":2,"process":"C1","type":"ok"{"f":"ack"}\n')
    with HistoryWriter.for_run(tmp_path, "C1") as c1:
        c1.op("ok", "ack", event_id="e1", entry_id="1-0")
    watch.poll()                                                     # progress goes on
    assert watch.useful_ops >= 2

    with pytest.raises(HistoryError) as expected:
        read_history(tmp_path)
    with pytest.raises(HistoryError) as kept:
        watch.history()
    assert str(kept.value) == str(expected.value) and "C1.jsonl:2:" in str(kept.value)
    assert gc.get_freeze_count() == 0


def test_history_needs_keep_and_a_history_dir(tmp_path):
    with pytest.raises(ValueError, match="keep=True"):
        ProgressWatch(tmp_path).history()
    with pytest.raises(HistoryError, match="no history directory"):
        ProgressWatch(tmp_path / "nowhere", keep=True).history()
    os.makedirs(history_dir(tmp_path))
    assert ProgressWatch(tmp_path, keep=True).history() == []
