"""The history folded into the checker's state while the run writes it, so that after the
drain only the files' last lines are left to fold (issue 23: the check's share of a run).

`FoldingWatch` is the run's progress watch (chaos.workload.progress) that parses each line it
tails once, for both: the phases' conditions, and the checker's scan (`chaos.checker._RunScan`)
with the work notes (`WorkNotes.feed`) folded in the exact order the check's own pass would
give them (`chaos.history.iter_history`: by time, a tie by file name, then line; ack lines
left unparsed). An op is folded only once it is older than `LAG_S` before the poll that read
it began: a writer stamps an op's time and writes it at once, so a later op older than that
is a writer held up for longer (a paused process, a loaded machine). Such a late op, a
corrupt line, a file that shrank or vanished, or a check that asks for the fold twice voids
the fold: `finish` then gives None, and the check scans the saved files as it always did.
What is folded and the verdict are therefore the full scan's, byte for byte
(tests/checker/test_livefold.py compares them on the saved histories).
"""
from __future__ import annotations

import bisect
import gc
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chaos.checker import NOT_READ, _RunScan
from chaos.history import HistoryError, history_files, op_time, parse_lines, parse_op, paused_gc
from chaos.orchestrator.notes import WorkNotes
from chaos.workload.progress import ProgressWatch, _useful

LAG_S = 1.0   # an op is folded once this much older than the poll that read it


class FoldingWatch(ProgressWatch):
    """A ProgressWatch that folds the run's history as it tails it (see the module doc).
    `finish(run)` (every writer closed) folds the rest and gives the scan, with `notes` fed
    alongside, or None when the fold was voided (`void` says why)."""

    def __init__(self, run_dir: Path, run: int | None = None, lag_s: float = LAG_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(run_dir)
        self.run, self.lag_s, self.clock = run, lag_s, clock
        self.scan: _RunScan | None = _RunScan()
        self.notes = WorkNotes()
        self.void = ""
        self.mark = float("-inf")            # every op older than this is folded; none newer
        self.pending: dict[str, list[dict]] = {}   # path -> ops read, not yet folded (file order)
        self.unsorted: set[str] = set()      # paths whose pending ops are out of time order
        self.numbers: dict[str, int] = {}    # path -> complete lines read (line numbers)
        self.folded_ops = 0
        self.fold_cpu_s = 0.0                # thread CPU spent parsing and folding (not tracking)

    def poll(self) -> float:
        began = self.clock()   # (before the files are read: what a writer stamped earlier - lag_s is in them)
        last = super().poll()
        if self.scan is not None:
            self._fold(began - self.lag_s)
        return last

    def _lines(self, path: str, name: str, lines: list[bytes]) -> None:
        if self.scan is None:
            self._scan(lines)
            return
        cpu = time.thread_time()
        ops = self._parse(path, lines)
        if ops is None:
            self._scan(lines)
            return
        self._progress(ops, lines)
        self.fold_cpu_s += time.thread_time() - cpu

    def _parse(self, path: str, lines: list[bytes]) -> list[dict] | None:
        """`lines` parsed as iter_history parses them and kept to be folded; None (and the fold
        void) for a line iter_history would refuse or an op older than what is folded."""
        first = self.numbers.get(path, 0) + 1
        self.numbers[path] = first - 1 + len(lines)
        try:
            with paused_gc():
                ops = parse_lines(lines, path, first, NOT_READ)
        except HistoryError as exc:
            self.abandon(f"{exc}")
            return None
        if ops:
            times = list(map(op_time, ops))
            if min(times) < self.mark:
                self.abandon(f"{path}: an op at {min(times)!r} came after the fold passed {self.mark!r}")
                return None
            buf = self.pending.setdefault(path, [])
            if (buf and times[0] < buf[-1]["time"]) or times != sorted(times):
                self.unsorted.add(path)
            buf += ops
        return ops

    def _progress(self, ops: list[dict], lines: list[bytes]) -> None:
        """What ProgressWatch._scan makes of the lines, from the ops parsed once."""
        last, track = self.last_useful, self._track
        for op in ops:
            f = op["f"]
            if f != "publish":   # (publish ops only say that work went on)
                track(op)
            if _useful(op):
                self.useful_ops += 1
                if op["time"] > last:
                    last = op["time"]
        acks = [line for line in lines if NOT_READ in line]   # (left unparsed: useful, and the last one's time)
        if acks:
            self.useful_ops += len(acks)
            op = parse_op(acks[-1])
            if op is not None and op.get("time", 0.0) > last:
                last = op["time"]
        self.last_useful = last

    def _fold(self, mark: float) -> None:
        """Fold every pending op older than `mark`, in iter_history's order."""
        if mark <= self.mark:
            return
        cpu = time.thread_time()
        batch: list[dict] = []
        for path in sorted(self.pending):    # (one directory: history_files' order)
            buf = self.pending[path]
            if path in self.unsorted:
                buf.sort(key=op_time)        # stable: a tie keeps line order
                self.unsorted.discard(path)
            cut = len(buf) if mark == float("inf") else bisect.bisect_left(buf, mark, key=op_time)
            if cut:
                batch += buf[:cut]
                del buf[:cut]
        self.mark = mark
        if batch:
            batch.sort(key=op_time)          # stable: a tie keeps file order, then line order
            if self.run is not None:
                for op in batch:
                    op["run"] = self.run
            scan = self.scan
            assert scan is not None
            with paused_gc():
                scan.scan(self.notes.feed(batch, counted=True))
            self.folded_ops += len(batch)
            # the records live until the check: out of the cyclic GC's sight, as the kept ops were
            # (its full passes over a heap of 10^6 records grow faster than linearly); release() gives them back
            gc.freeze()
            self.frozen = True
        self.fold_cpu_s += time.thread_time() - cpu

    def abandon(self, why: str) -> None:
        """Void the fold (the check then scans the files): keep tailing for progress only."""
        if self.scan is not None:
            self.void = why
            self.scan, self.pending, self.unsorted = None, {}, set()   # (the notes: reset by the scan's observe)

    def release(self) -> None:
        super().release()
        self.abandon(self.void or "released")   # (a check that never took the fold does not keep it)

    def finish(self) -> _RunScan | None:
        """Fold what is left (call once every writer of the run is closed) and give the scan,
        once; None when the fold was voided or the files are not those it read."""
        if self.scan is None:
            return None
        cpu = time.thread_time()
        try:
            paths = [str(p) for p in history_files(self.run_dir)]
        except HistoryError as exc:
            self.abandon(str(exc))
            return None
        gone = set(self.numbers) - set(paths)
        if gone:
            self.abandon(f"{sorted(gone)[0]}: read while the run went on, gone at its check")
            return None
        for path in paths:
            if not self._rest(path):
                return None
        self.fold_cpu_s += time.thread_time() - cpu
        self._fold(float("inf"))
        scan, self.scan = self.scan, None
        return scan

    def _rest(self, path: str) -> bool:
        """The rest of one file parsed (its unterminated last line too, as iter_history reads it)."""
        start = self.offsets.get(path, 0)
        try:
            with open(path, "rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                if size < start:
                    self.abandon(f"{path}: shorter ({size} B) than when it was read ({start} B)")
                    return False
                fh.seek(start)
                data = self.partial.pop(path, b"") + fh.read()
        except OSError as exc:
            self.abandon(f"{path}: {exc}")
            return False
        self.offsets[path] = start + len(data)
        if not data:
            return True
        lines = data.split(b"\n")
        if not lines[-1]:
            del lines[-1]
        return self._parse(path, lines) is not None


class Folded:
    """The fold a check takes once (`check_run(folded=...)`): a second pass, or the same check
    done again, scans the history itself."""

    def __init__(self, watch: Any) -> None:
        self.watch = watch if isinstance(watch, FoldingWatch) else None
        self.notes = self.watch.notes if self.watch is not None else WorkNotes()   # (the check's observe)

    def take(self) -> _RunScan | None:
        watch, self.watch = self.watch, None
        scan = watch.finish() if watch is not None else None
        if scan is not None:
            self.notes.finish(scan.events)
        return scan
