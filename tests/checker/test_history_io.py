"""HistoryWriter and read_history: merge by time, torn lines, clear errors."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import chaos
from chaos.history import HistoryError, HistoryWriter, format_history, iter_history, parse_lines, read_history

# read whole (a file's lines one by one) and in chunks (lists of lines: parsed as one JSON array
# when every line is a whole op, line by line otherwise): the same ops, the same errors
READERS = pytest.mark.parametrize("read", [read_history, lambda run_dir: list(iter_history(run_dir))],
                                  ids=["whole", "chunks"])


def test_writer_ops_read_back_merged_by_time(tmp_path):
    producer = HistoryWriter.for_run(tmp_path, "P-order")
    consumer = HistoryWriter.for_run(tmp_path, "C1")
    producer.op("invoke", "publish", event_id="e42-1", key="42", version=1)
    consumer.op("ok", "deliver", event_id="e42-1", entry_id="1-0", via="read", delivery_count=1)
    producer.op("ok", "publish", event_id="e42-1", entry_id="1-0", value=None)
    producer.close()
    consumer.close()
    ops = read_history(tmp_path, run=3)
    assert [(o["process"], o["type"], o["f"]) for o in ops] == [
        ("P-order", "invoke", "publish"), ("C1", "ok", "deliver"), ("P-order", "ok", "publish")]
    assert all(o["run"] == 3 for o in ops)
    assert "value" not in ops[2]  # None fields are not written
    assert ops == sorted(ops, key=lambda o: o["time"])


def test_bad_op_type_is_refused_with_the_valid_ones(tmp_path):
    writer = HistoryWriter.for_run(tmp_path, "C1")
    with pytest.raises(HistoryError, match="'done' is not one of"):
        writer.op("done", "apply")


@pytest.mark.parametrize("torn", [
    '{"time": 5.0, "process": "C1", "type": "ok", "f": "ap',
    # a full disk cut the last line right after its value's `}` (seen in CI): it ends in `}` and
    # does not parse, and it is still a torn line, not two writers on one file
    '{"time": 5.0, "process": "C1", "type": "info", "f": "publish", "value": {"attempt": 1}',
], ids=["mid-string", "after-inner-brace"])
@READERS
def test_torn_last_line_is_skipped(read, tmp_path, torn):
    writer = HistoryWriter.for_run(tmp_path, "C1")
    writer.op("ok", "deliver", event_id="e1")
    writer.close()
    with open(tmp_path / "history" / "C1.jsonl", "a") as fh:
        fh.write(torn)
    assert [o["f"] for o in read(tmp_path)] == ["deliver"]


@READERS
def test_two_writers_interleaved_on_one_line_are_still_an_error(read, tmp_path):
    path = tmp_path / "history" / "C1.jsonl"
    path.parent.mkdir()
    path.write_text('{"time": 1.0, "process": "C1", "type": "ok"{"f": "deliver", "value": {"a": 1}}\n')
    with pytest.raises(HistoryError, match="C1.jsonl:1: not a JSON op"):
        read(tmp_path)


@READERS
def test_restarted_process_appends_after_its_torn_line(read, tmp_path):
    path = tmp_path / "history" / "C1.jsonl"
    path.parent.mkdir()
    path.write_text('{"time": 1.0, "process": "C1", "type": "ok", "f": "deliver"}\n{"time": 2.0, "proc')
    HistoryWriter(path, "C1").op("ok", "apply", event_id="e1")
    assert [o["f"] for o in read(tmp_path)] == ["deliver", "apply"]


def test_sigkilled_writer_leaves_a_readable_history(tmp_path):
    script = (
        "import sys; from chaos.history import HistoryWriter\n"
        "w = HistoryWriter.for_run(sys.argv[1], 'C1')\n"
        "for i in range(10**9): w.op('ok', 'deliver', event_id=f'e{i}', value='x' * 200)\n"
    )
    repo = os.path.dirname(os.path.dirname(chaos.__file__))
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], cwd=repo)
    path = tmp_path / "history" / "C1.jsonl"
    deadline = time.monotonic() + 60
    try:
        while not path.exists() or path.stat().st_size < 200_000:
            assert proc.poll() is None, "writer exited early"
            assert time.monotonic() < deadline, "writer too slow to write 200 kB in 60 s"
            time.sleep(0.01)
    finally:
        proc.send_signal(signal.SIGKILL)  # mid-write: the crash under test
        proc.wait()
    ops = read_history(tmp_path)
    assert len(ops) > 500
    assert [o["event_id"] for o in ops] == [f"e{i}" for i in range(len(ops))]


@READERS
def test_corrupt_middle_line_names_file_and_line(read, tmp_path):
    path = tmp_path / "history" / "C1.jsonl"
    path.parent.mkdir()
    good = json.dumps({"time": 1.0, "process": "C1", "type": "ok", "f": "ack"})
    path.write_text(f"{good}\n{good[:-5]}{good}\n{good}\n")
    with pytest.raises(HistoryError, match=r"C1.jsonl:2: not a JSON op"):
        read(tmp_path)


@READERS
def test_op_without_required_keys_is_an_error(read, tmp_path):
    path = tmp_path / "history" / "C1.jsonl"
    path.parent.mkdir()
    path.write_text('{"time": 1.0, "process": "C1", "f": "ack"}\n')
    with pytest.raises(HistoryError, match=r"C1.jsonl:1: op lacks \['type'\]"):
        read(tmp_path)


def test_a_chunk_parsed_whole_gives_its_ops_line_by_line():
    """A chunk (a list of lines) is parsed as one JSON array only when each line is one whole
    op: a torn, blank or skipped line among them gives what the line-by-line parse gives."""
    op = lambda i, **kw: json.dumps({"time": float(i), "process": "C1", "type": "ok", "f": "deliver", **kw}).encode()
    chunks = [
        [op(1), op(2), op(3)],
        [op(1), op(2)[:30], op(3)],                              # torn mid-string, then a restart's op
        [op(1), op(2, value={"a": 1})[:-1], op(3)],              # torn right after an inner `}`
        [op(1), b"", op(2), b"  "],                              # blank lines
        [op(1), op(2, value=[1, 2])[:-6], op(3), op(4)],         # torn inside a list
        [op(1), b'{"time": 2.0, "process": "C1", "type": "ok", "f": "ack"}', op(3)],   # skipped unparsed
        [op(1), b"[1]", op(3)],                                  # valid JSON, not an op: an error naming the line
    ]
    for chunk in chunks:
        def parse(lines):
            try:
                return parse_lines(lines, "C1.jsonl", 7, b'"f": "ack"')
            except HistoryError as exc:
                return str(exc)
        assert parse(list(chunk)) == parse(iter(chunk)), chunk


def test_missing_history_dir_says_where_it_looked(tmp_path):
    with pytest.raises(HistoryError, match="no history directory at .*history"):
        read_history(tmp_path / "nope")


def test_format_history_gives_relative_milliseconds():
    ops = [{"time": 10.0, "process": "C1", "type": "ok", "f": "deliver", "entry_id": "1-0"},
           {"time": 10.25, "process": "C1", "type": "ok", "f": "apply", "rows": 1}]
    lines = format_history(ops).splitlines()
    assert lines[0].split()[:5] == ["0.000", "ms", "C1", "ok", "deliver"]
    assert lines[1].startswith("   250.000 ms") and lines[1].endswith("rows=1")


def test_time_and_process_are_the_writers_own(tmp_path):
    writer = HistoryWriter.for_run(tmp_path, "C1")
    with pytest.raises(HistoryError, match="set by HistoryWriter.op"):
        writer.op("ok", "ack", time=1.0)
