"""ProgressWatch.poll reads each file READ_BYTES at a time (a poll seconds after the last one
finds tens of MB written: read whole, with its list of lines, that was 50-250 MB of the
orchestrator's at once at 10^6 events), and what it answers is what one whole read gave."""
from __future__ import annotations

import pytest

from chaos.history import HistoryWriter, read_history
from chaos.workload import progress
from chaos.workload.progress import ProgressWatch


def _write_run(run_dir) -> None:
    with HistoryWriter.for_run(run_dir, "C1") as c1, HistoryWriter.for_run(run_dir, "P-order") as producer:
        for n in range(200):
            producer.op("invoke", "publish", event_id=f"e{n}", key=str(n % 7), version=n)
            producer.op("ok", "publish", event_id=f"e{n}", key=str(n % 7), version=n, entry_id=f"{n}-0")
            c1.op("ok", "deliver", event_id=f"e{n}", entry_id=f"{n}-0", via="read")
            c1.op("invoke", "apply", event_id=f"e{n}", entry_id=f"{n}-0")
            if n % 3:
                c1.op("ok", "apply", event_id=f"e{n}", entry_id=f"{n}-0", effect="applied", value={"seq": n})


def _answers(watch: ProgressWatch) -> tuple:
    watch.last_useful = 0.0   # (made at the watch's start: the ops' times alone, then)
    return (watch.poll(), watch.useful_ops, watch.handled, watch.busy(["C1"]), watch.in_hand(["C1"]),
            sorted(watch.entries.items()))


@pytest.mark.parametrize("keep", [False, True])
def test_a_poll_reads_a_bounded_chunk_at_a_time_and_answers_as_one_read(tmp_path, monkeypatch, keep):
    _write_run(tmp_path)
    whole = ProgressWatch(tmp_path, keep=keep)
    expected = _answers(whole)
    monkeypatch.setattr(progress, "READ_BYTES", 100)   # (shorter than a line: lines torn at every read)
    seen: list[int] = []
    scan, keep_lines = ProgressWatch._scan, ProgressWatch._keep
    monkeypatch.setattr(ProgressWatch, "_scan", lambda self, lines: (seen.append(sum(map(len, lines))),
                                                                      scan(self, lines))[1])
    monkeypatch.setattr(ProgressWatch, "_keep", lambda self, path, lines: (seen.append(sum(map(len, lines))),
                                                                           keep_lines(self, path, lines))[1])
    chunked = ProgressWatch(tmp_path, keep=keep)
    assert _answers(chunked) == expected
    assert len(seen) > 100 and max(seen) <= 200, "a poll read a file whole, not a chunk at a time"
    if keep:
        assert chunked.history() == whole.history() == read_history(tmp_path)
