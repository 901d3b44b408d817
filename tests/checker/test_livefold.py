"""The history folded while it is written (chaos.orchestrator.livefold) gives the check of the
saved files byte for byte: the regression set's histories are written again line by line, in
time order, with lines torn across polls, and the watch's fold is taken by the check; a late
op or a corrupt line voids the fold, and the check then scans the files itself."""
from __future__ import annotations

import gc
import json
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from chaos.checker import NOT_READ, check_run
from chaos.history import HistorySource, parse_op, read_history
from chaos.orchestrator import livefold
from chaos.orchestrator.livefold import LAG_S, Folded, FoldingWatch
from chaos.orchestrator.notes import work_metrics
from chaos.orchestrator.priority import thread_nice

from tests.checker.test_regression import SAVED, as_text, unpack


class Replay:
    """A saved run dir's history files written again into `live`, up to a time at each step."""

    def __init__(self, saved: Path, live: Path) -> None:
        (live / "history").mkdir(parents=True)
        self.files: dict[Path, tuple[bytes, list[tuple[float, int]]]] = {}   # content, (time, end) per line
        for path in sorted((saved / "history").glob("*.jsonl")):
            data, ends, last, end = path.read_bytes(), [], float("-inf"), 0
            for line in data.splitlines(keepends=True):
                op = parse_op(line)
                last = op["time"] if op is not None and "time" in op else last   # (a torn line: its predecessor's)
                end += len(line)
                ends.append((last, end))
            self.files[live / "history" / path.name] = (data, ends)
        self.written = {path: 0 for path in self.files}
        self.times = sorted(t for _, ends in self.files.values() for t, _ in ends if t > float("-inf"))

    def write_until(self, until: float, tear: bool) -> None:
        """Each file's lines stamped at or before `until` (in file order), and with `tear` half
        of its next line (the rest follows with a later write)."""
        for path, (data, ends) in self.files.items():
            i, target = 0, 0
            while i < len(ends) and ends[i][0] <= until:
                target = ends[i][1]
                i += 1
            if tear and i < len(ends):
                target = (target + ends[i][1]) // 2
            self._write(path, max(target, self.written[path]))

    def _write(self, path: Path, target: int) -> None:
        data = self.files[path][0]
        with open(path, "ab") as fh:
            fh.write(data[self.written[path]:target])
        self.written[path] = target

    def write_rest(self) -> None:
        for path, (data, _) in self.files.items():
            self._write(path, len(data))


def replayed_check(saved: Path, live: Path, args: dict, final, steps: int = 25, late: bytes = b"",
                   budget_s: float = float("inf"), threaded: bool = False):
    replay = Replay(saved, live)
    now = [0.0]
    watch = FoldingWatch(live, run=args["run"], clock=lambda: now[0], budget_s=budget_s, threaded=threaded)
    times = replay.times
    for step in range(1, steps + 1):
        until = times[min(len(times) - 1, step * len(times) // (steps + 1))]
        replay.write_until(until, tear=step % 2 == 0)
        now[0] = until + LAG_S          # the fold's mark: `until`
        watch.poll()
        if late and step == steps // 2:   # (a writer of its own, held up: in a file of its own)
            (live / "history" / "N-late.jsonl").write_bytes(late)
    replay.write_rest()
    folded = Folded(watch)
    result = check_run(HistorySource(live, run=args["run"]).without(NOT_READ), final,
                       observe=folded.notes.observe, folded=folded, **args)
    return result, watch, folded.notes


@pytest.mark.parametrize("threaded", [False, True], ids=["in-poll", "threaded"])
@pytest.mark.parametrize("archive", SAVED, ids=[p.name.removesuffix(".tar.gz") for p in SAVED])
def test_the_fold_while_written_gives_the_saved_json(archive: Path, threaded: bool, tmp_path: Path) -> None:
    """In the polls (each poll folds what it can) or in a thread of its own (the orchestrator's
    way: however far it got when the check takes it), the saved JSON."""
    final, args, expected = unpack(archive, tmp_path / "saved")
    final.stream_entries, final.events = iter(final.stream_entries), iter(final.events)
    result, watch, notes = replayed_check(tmp_path / "saved", tmp_path / "live", args, final, threaded=threaded)
    assert watch._thread is None or not watch._thread.is_alive()
    assert watch.fold.void == "" and watch.fold.folded_ops > 0 and watch.fold.scan is None   # (taken: the check used it)
    assert all(not tail.ops for tail in watch.fold.tails.values())
    assert as_text(result) == expected
    assert notes.work() == work_metrics(read_history(tmp_path / "live"))[:2]


BIGGEST = sorted(SAVED, key=lambda p: -p.stat().st_size)[:3]


@pytest.mark.parametrize("archive", BIGGEST, ids=[p.name.removesuffix(".tar.gz") for p in BIGGEST])
def test_a_fold_that_falls_behind_reads_in_chunks_and_gives_the_saved_json(
        archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fold with little time per poll (an orchestrator short of CPU) reads a small chunk of
    the file that has reached the earliest time, holds no more than it read, and the check
    folds the rest the same way: the saved JSON."""
    monkeypatch.setattr(livefold, "CHUNK_BYTES", 2048)
    final, args, expected = unpack(archive, tmp_path / "saved")
    read = livefold.HistoryFold._read
    most = [0]

    def noted(self, tail, final):
        most[0] = max(most[0], sum(len(t.ops) for t in self.tails.values()))
        return read(self, tail, final)
    monkeypatch.setattr(livefold.HistoryFold, "_read", noted)
    result, watch, notes = replayed_check(tmp_path / "saved", tmp_path / "live", args, final, budget_s=0.0)
    assert watch.fold.void == "" and watch.fold.folded_ops > 0
    assert 0 < most[0] < len(read_history(tmp_path / "live")) / 2
    assert as_text(result) == expected
    assert notes.work() == work_metrics(read_history(tmp_path / "live"))[:2]
    assert watch.useful_ops > 0


def test_a_fold_that_keeps_up_reads_no_further_than_it_may_fold(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """What may not be folded yet (later than LAG_S before the poll) stays in the files, not
    parsed in memory: a fold that keeps up held LAG_S of ops (~230k dicts at 10^6 events), each
    file at most one chunk past the mark now; the check folds the rest: the saved JSON."""
    monkeypatch.setattr(livefold, "CHUNK_BYTES", 2048)
    archive = BIGGEST[0]
    final, args, expected = unpack(archive, tmp_path / "saved")
    shutil.copytree(tmp_path / "saved" / "history", tmp_path / "live" / "history")   # (all written already)
    times = sorted(op["time"] for op in read_history(tmp_path / "live"))
    now = [times[len(times) // 3] + LAG_S]
    watch = FoldingWatch(tmp_path / "live", run=args["run"], clock=lambda: now[0])
    watch.poll()
    fold = watch.fold
    assert 0 < fold.folded_ops < len(times) / 2
    assert all(len(tail.ops) <= livefold.CHUNK_BYTES // 40 + 1 for tail in fold.tails.values())   # (a line >= 40 B)
    assert any(tail.offset < os.path.getsize(path) for path, tail in fold.tails.items())
    folded = Folded(watch)
    result = check_run(HistorySource(tmp_path / "live", run=args["run"]).without(NOT_READ), final,
                       observe=folded.notes.observe, folded=folded, **args)
    assert fold.void == "" and as_text(result) == expected


def test_a_large_runs_fold_runs_ahead_of_the_workers_in_its_own_thread(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """`ahead` (a run of AHEAD_EVENTS or more) runs the fold's thread at AHEAD_NICE where
    the process may (CAP_SYS_NICE), else at its nice, saying why; the nice is the thread's own.
    The polling thread runs at AHEAD_NICE too (the watch keeps up, the check is not left behind
    the workers) until the watch is released, then at its own nice again; another thread keeps
    its nice throughout; the check is the saved JSON."""
    monkeypatch.setattr(livefold, "AHEAD_NICE", -10)   # (the value measured; priority.AHEAD_NICE may be 0: off)
    archive = next(p for p in SAVED if p.name.startswith("baseline-none"))
    final, args, expected = unpack(archive, tmp_path / "saved")
    shutil.copytree(tmp_path / "saved" / "history", tmp_path / "live" / "history")
    before = os.getpriority(os.PRIO_PROCESS, 0)   # (Linux: this thread's)
    other: list[int] = []
    go, seen = threading.Event(), threading.Event()

    def bystander() -> None:
        other.append(thread_nice())
        seen.set()
        go.wait(30)
        other.append(thread_nice())

    beside = threading.Thread(target=bystander)
    beside.start()
    seen.wait(30)
    watch = FoldingWatch(tmp_path / "live", run=args["run"], clock=lambda: float("inf"), threaded=True, ahead=True)
    try:
        watch.poll()
        deadline = time.monotonic() + 30
        while watch.fold.nice is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if watch.fold.nice_refused:
            assert watch.fold.nice == before and f"nice {livefold.AHEAD_NICE} refused" in watch.fold.nice_refused
            assert f"nice {livefold.AHEAD_NICE} refused" in watch.watch_nice_refused
            assert os.getpriority(os.PRIO_PROCESS, 0) == before
        else:
            assert watch.fold.nice == livefold.AHEAD_NICE
            assert os.getpriority(os.PRIO_PROCESS, 0) == livefold.AHEAD_NICE and not watch.watch_nice_refused
        folded = Folded(watch)
        result = check_run(HistorySource(tmp_path / "live", run=args["run"]).without(NOT_READ), final,
                           observe=folded.notes.observe, folded=folded, **args)
        assert os.getpriority(os.PRIO_PROCESS, 0) == (before if watch.watch_nice_refused else livefold.AHEAD_NICE)
    finally:
        watch.release()   # (the polling thread's nice back: also when an assertion failed)
        go.set()
        beside.join()
    assert watch.fold.void == "" and as_text(result) == expected
    assert os.getpriority(os.PRIO_PROCESS, 0) == before
    assert other == [before, before]


def test_a_late_op_voids_the_fold_and_the_check_scans_the_files(tmp_path: Path) -> None:
    """An op stamped before the fold's mark, written after it (a writer held up longer than
    LAG_S): the fold is void, and the check is the check of the files all the same."""
    archive = next(p for p in SAVED if p.name.startswith("baseline-none"))
    final, args, _ = unpack(archive, tmp_path / "saved")
    first = sorted((tmp_path / "saved" / "history").glob("*.jsonl"))[0]
    op = parse_op(first.read_bytes().splitlines()[0])
    late = json.dumps({**op, "process": "N-late", "time": op["time"] + 0.001}).encode() + b"\n"
    result, watch, notes = replayed_check(tmp_path / "saved", tmp_path / "live", args, final, late=late)
    assert "came after the fold passed" in watch.fold.void
    live = read_history(tmp_path / "live", run=args["run"])
    assert len(live) == len(read_history(tmp_path / "saved")) + 1
    assert as_text(result) == as_text(check_run(live, final, **args))
    assert notes.work() == work_metrics(live)[:2]


def test_a_file_out_of_time_order_is_folded_in_the_checks_order(tmp_path: Path) -> None:
    """Two threads of one process wrote two ops in the other order than their times: the fold
    sorts that file's ops as the check's scan does (or, had the fold passed the earlier one,
    it is void): the saved JSON either way."""
    archive = next(p for p in SAVED if p.name.startswith("baseline-none"))
    final, args, expected = unpack(archive, tmp_path / "saved")
    path = sorted((tmp_path / "saved" / "history").glob("C*.jsonl"))[0]
    lines = path.read_bytes().splitlines(keepends=True)
    lines[100], lines[101] = lines[101], lines[100]
    path.write_bytes(b"".join(lines))
    result, watch, _ = replayed_check(tmp_path / "saved", tmp_path / "live", args, final)
    assert watch.fold.void == "" or "came after the fold passed" in watch.fold.void
    assert as_text(result) == expected


def test_the_folds_thread_freezes_what_it_folded_and_gives_it_back_to_the_gc(tmp_path: Path) -> None:
    """The fold's thread freezes the heap after a step that folded (the cyclic GC's full passes
    over 10^6 records were a fifth of the fold's CPU); once the check takes the fold, what was
    frozen is the GC's again, and the check is the saved JSON."""
    archive = next(p for p in SAVED if p.name.startswith("baseline-none"))
    final, args, expected = unpack(archive, tmp_path / "saved")
    shutil.copytree(tmp_path / "saved" / "history", tmp_path / "live" / "history")
    before = gc.get_freeze_count()
    watch = FoldingWatch(tmp_path / "live", run=args["run"], clock=lambda: float("inf"), threaded=True)
    watch.poll()
    deadline = time.monotonic() + 30
    while not watch.fold.frozen and time.monotonic() < deadline:
        time.sleep(0.01)
    assert watch.fold.frozen and watch.fold.folded_ops > 0 and gc.get_freeze_count() > before
    folded = Folded(watch)
    result = check_run(HistorySource(tmp_path / "live", run=args["run"]).without(NOT_READ), final,
                       observe=folded.notes.observe, folded=folded, **args)
    assert not watch.fold.frozen and gc.get_freeze_count() == before
    assert watch.fold.void == "" and as_text(result) == expected
