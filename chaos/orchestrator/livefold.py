"""The history folded into the checker's state while the run writes it, so that after the
drain only what the fold has not reached is left to fold (issue 23: the check's share of a run).

`HistoryFold` is the fold; `FoldingWatch` is the run's progress watch (chaos.workload.progress)
that holds one and, after each poll or in a thread of its own, spends up to `BUDGET_S` of CPU
time reading the history files a second time, as the check's own pass
reads them (`chaos.history.iter_history`: a chunk of the file that has reached the earliest
time next, ops merged by time, a tie by file name, then line; ack lines left unparsed), and
folds them into the checker's scan (`chaos.checker._RunScan`) and the work notes
(`WorkNotes.feed`). The files are its buffer: when the orchestrator gets little CPU the fold
falls behind (the check folds the rest), it does not hold the ops; nor does it parse ahead of
what it may fold. In a large run its thread may run ahead of the workers (AHEAD_NICE).

An op is folded once every file either has an op at least as late unread, or has been read
to its end at a poll that began `LAG_S` after the op's time: a writer stamps an op's time
and writes it at once, so an op older than that, read later, is a writer held up for longer
(a paused process, a loaded machine). Such a late op, a corrupt line, a file that shrank or
vanished voids the fold: `finish` then gives None, and the check scans the saved files as
it always did. What is folded, and so the verdict, is the full scan's, byte for byte
(tests/checker/test_livefold.py compares them on the saved histories).
"""
from __future__ import annotations

import bisect
import gc
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chaos.checker import NOT_READ, _RunScan
from chaos.history import CHUNK_LINES, HistoryError, history_files, op_time, parse_lines, paused_gc
from chaos.orchestrator.notes import WorkNotes
from chaos.orchestrator.priority import AHEAD_NICE, set_thread_nice, thread_nice
from chaos.workload.progress import ProgressWatch

LAG_S = 1.0       # an op is folded once every file read to its end was read this much after it
BUDGET_S = 0.05   # the fold's CPU time per poll, at most about (then the phases' conditions are asked again)
CHUNK_BYTES = 1 << 18   # read at a time from one file (about 1,000 lines: a few ms of the budget)
POLL_S = 0.1     # the fold's thread rests this long when it has caught up (0.01 cost a cell's run 0.06 CPU s)
INF = float("inf")


class _Tail:
    """One history file as the fold reads it: where it stands, its ops read and not folded."""

    __slots__ = ("path", "offset", "partial", "lines", "top", "ended", "ops", "unsorted")

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset, self.partial, self.lines = 0, b"", 0
        self.top = -INF           # the time of its latest op read: what is unread is later
        self.ended = False        # read to its end (as of the poll that read it)
        self.ops: list[dict] = []
        self.unsorted = False


class HistoryFold:
    """The run's history folded into the checker's scan while it is written (see the module
    doc): `step(began)` folds for up to `budget_s` of this thread's CPU time, `folding(wait)`
    steps until `wait` says stop; `finish()` (every writer closed) folds the rest and gives
    the scan, with `notes` fed alongside, or None when the fold was voided (`void` says why).
    Held by the orchestrator's FoldingWatch (in its polls, or a thread of its own); it needs
    no progress watch (a loop of its own: `folding`, until `wait` says stop)."""

    def __init__(self, run_dir: Path, run: int | None = None, lag_s: float = LAG_S,
                 clock: Callable[[], float] = time.monotonic, budget_s: float = BUDGET_S) -> None:
        self.run_dir, self.run, self.lag_s, self.clock, self.budget_s = run_dir, run, lag_s, clock, budget_s
        self.scan: _RunScan | None = _RunScan()
        self.notes = WorkNotes()
        self.void = ""
        self.mark = -INF                      # every op older than this is folded; none newer
        self.tails: dict[str, _Tail] = {}
        self.folded_ops = 0
        self.fold_cpu_s = 0.0                 # the folding thread's CPU spent reading and folding
        self.frozen = False                   # the folding thread froze the heap (see `folding`)
        self.nice: int | None = None          # the folding thread's nice, once `folding` runs
        self.nice_refused = ""                # why a nice asked for (`folding(nice=...)`) was not taken

    def step(self, began: float) -> bool:
        """One step of the fold; whether it caught up (every file read to its end, or past
        what it may fold now)."""
        cpu = time.thread_time()
        caught_up = self._advance(began - self.lag_s, cpu + self.budget_s)
        self.fold_cpu_s += time.thread_time() - cpu
        return caught_up

    def folding(self, wait: Callable[[float], bool], nice: int | None = None) -> None:
        """Steps (each up to `budget_s` of CPU time), resting POLL_S when caught up, until
        `wait(seconds)` says stop. After a step that folded, the heap is frozen (`gc.freeze`):
        the records live until the check, and the cyclic GC's full passes over them were a
        fifth of the fold's CPU at 10^6 events (27.4 -> 21.4 s); `thaw` gives them back.
        `nice`: this thread's own nice (chaos.orchestrator.priority), so that the fold keeps up
        with the workers instead of leaving most of the history to the check (refused without
        CAP_SYS_NICE: `nice_refused` says why)."""
        if nice is not None:
            self.nice_refused = set_thread_nice(nice)
        self.nice = thread_nice()
        try:
            while self.scan is not None:
                folded = self.folded_ops
                caught_up = self.step(self.clock())
                if self.folded_ops != folded:
                    gc.freeze()
                    self.frozen = True
                if wait(POLL_S if caught_up else 0.0):
                    return
        except Exception as exc:   # noqa: BLE001 - a fold that broke is void: the check scans the files
            self.abandon(f"the fold failed: {type(exc).__name__}: {exc}")

    def thaw(self) -> None:
        """What `folding` froze, the cyclic GC's again."""
        if self.frozen:
            gc.unfreeze()
            self.frozen = False

    def _list(self, final: bool) -> list[_Tail] | None:
        """The tails of the files there now (history_files' order), each knowing whether it
        has more to read; None when one shrank or vanished (the fold is then void)."""
        try:
            paths = [str(p) for p in history_files(self.run_dir)]
        except HistoryError as exc:
            if not final:
                return []      # (no history yet)
            self.abandon(str(exc))
            return None
        gone = set(self.tails) - set(paths)
        if gone:
            self.abandon(f"{sorted(gone)[0]}: read by the fold, gone later")
            return None
        tails = []
        for path in paths:
            tail = self.tails.get(path) or self.tails.setdefault(path, _Tail(path))
            try:
                size = os.stat(path).st_size
            except OSError as exc:
                self.abandon(f"{path}: {exc}")
                return None
            if size < tail.offset:
                self.abandon(f"{path}: shorter ({size} B) than the fold read ({tail.offset} B)")
                return None
            tail.ended = size == tail.offset and not (final and tail.partial)
            tails.append(tail)
        return tails

    def _advance(self, limit: float, deadline: float, final: bool = False) -> bool:
        """Read the file that has reached the earliest time next, a chunk at a time, folding
        what every file has passed, until each is read to its end or past `limit` (what is
        later waits in the files, not parsed in memory: a fold that kept up held LAG_S of
        ops, ~230k dicts at 10^6 events, a peak of 609 MB against 452), or this thread's CPU
        time passes `deadline` (a CPU budget: on a loaded machine the fold still gets its share)."""
        tails = self._list(final)
        if tails is None:
            return True
        while True:
            unread = [t for t in tails if not t.ended]
            mark = min([limit, *(t.top for t in unread)])
            if mark > self.mark:
                self._fold(tails, mark)
            if not unread or self.scan is None or mark >= limit:
                return True   # (every file read past what may be folded now: the rest waits in the files)
            if time.thread_time() > deadline:
                return False
            if not self._read(min(unread, key=lambda t: t.top), final):
                return True

    def _read(self, tail: _Tail, final: bool) -> bool:
        """One chunk of `tail`'s complete lines (at the end of a finished file, its last
        unterminated line too, as iter_history reads it), parsed and kept to be folded."""
        try:
            with open(tail.path, "rb") as fh:
                fh.seek(tail.offset)
                data = fh.read(CHUNK_BYTES)
        except OSError as exc:
            self.abandon(f"{tail.path}: {exc}")
            return False
        tail.offset += len(data)
        if len(data) < CHUNK_BYTES:
            tail.ended = True     # (until the next poll finds it grown)
        lines = (tail.partial + data).split(b"\n")
        tail.partial = lines.pop()
        if final and tail.ended and tail.partial:
            lines.append(tail.partial)
            tail.partial = b""
        first = tail.lines + 1
        tail.lines += len(lines)
        try:
            with paused_gc():
                ops = parse_lines(lines, tail.path, first, NOT_READ)
        except HistoryError as exc:
            self.abandon(str(exc))
            return False
        if ops:
            times = list(map(op_time, ops))
            if min(times) < self.mark:
                self.abandon(f"{tail.path}: an op at {min(times)!r} came after the fold passed {self.mark!r}")
                return False
            if (tail.ops and times[0] < tail.ops[-1]["time"]) or times != sorted(times):
                tail.unsorted = True
            tail.ops += ops
            tail.top = max(tail.top, times[-1] if not tail.unsorted else max(times))
        return True

    def _fold(self, tails: list[_Tail], mark: float) -> None:
        """Fold every op read older than `mark`, in iter_history's order."""
        batch: list[dict] = []
        for tail in tails:
            ops = tail.ops
            if tail.unsorted:
                ops.sort(key=op_time)        # stable: a tie keeps line order
                tail.unsorted = False
            cut = len(ops) if mark == INF else bisect.bisect_left(ops, mark, key=op_time)
            if cut:
                batch += ops[:cut]
                del ops[:cut]
        self.mark = mark
        if not batch:
            return
        batch.sort(key=op_time)              # stable: a tie keeps file order, then line order
        scan = self.scan
        assert scan is not None
        faults = self.notes.faults
        kept = len(faults)
        with paused_gc():
            scan.scan(self.notes.feed(batch, counted=True))
        if self.run is not None:   # (iter_history's ops carry their run; of the folded ones only these are kept)
            for op in faults[kept:]:
                op["run"] = self.run
        self.folded_ops += len(batch)

    def abandon(self, why: str) -> None:
        """Void the fold (the check then scans the files); the notes are reset by that scan."""
        if self.scan is not None:
            self.void = why
            self.scan, self.tails = None, {}

    def finish(self) -> _RunScan | None:
        """Fold the rest (call once every writer of the run is closed) and give the scan,
        once; None when the fold was voided."""
        self.thaw()
        if self.scan is None:
            return None
        cpu = time.thread_time()
        self._advance(INF, INF, final=True)
        self.fold_cpu_s += time.thread_time() - cpu
        scan, self.scan = self.scan, None
        return scan




class FoldingWatch(ProgressWatch):
    """A ProgressWatch that folds the run's history behind it: `fold` (a HistoryFold), stepped
    in each poll, or (`threaded`) in a thread of its own, one more share of the CPU; with
    `ahead` (a large run: chaos.orchestrator.priority) that thread runs at AHEAD_NICE, ahead
    of the workers and servers, and so does the polling thread (the orchestrator's) until
    `release`: its polls, the drain, and the check with the threads it starts."""

    def __init__(self, run_dir: Path, run: int | None = None, lag_s: float = LAG_S,
                 clock: Callable[[], float] = time.monotonic, budget_s: float = BUDGET_S,
                 threaded: bool = False, ahead: bool = False) -> None:
        super().__init__(run_dir)
        self.fold = HistoryFold(run_dir, run, lag_s, clock, budget_s)
        self.threaded = threaded
        self.ahead = ahead
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._watching: tuple[int, int] | None = None   # (native id, nice before) of the polling thread, while ahead
        self.watch_nice_refused = ""

    def _ahead(self) -> None:
        """The polling thread at AHEAD_NICE too, until `release`. At nice 0 beside a fold thread at
        -10 it got the GIL back late after each hand-over (10^6 events: polls of 1-9 s wall for
        0.1-0.7 CPU s), and the entries it saw settle meanwhile waited to be forgotten (up to 400k:
        the peak's +80-140 MB). And the check it then runs (the fold's rest, the final lists, the
        counts: ~4-5 CPU s at 10^6) took 27 s at nice 0 beside two CPU hogs."""
        tid = threading.get_native_id()
        before = thread_nice(tid)
        self.watch_nice_refused = set_thread_nice(AHEAD_NICE, tid)
        if not self.watch_nice_refused:
            self._watching = (tid, before)

    def poll(self) -> float:
        began = self.fold.clock()   # (before the files are listed: what a writer stamped before began - lag is in them)
        last = super().poll()
        if self.fold.scan is None:
            return last
        if not self.threaded:
            self.fold.step(began)
        elif self._thread is None:
            if self.ahead:
                self._ahead()
            self._thread = threading.Thread(target=self.fold.folding,
                                            args=(self._stop.wait, AHEAD_NICE if self.ahead else None),
                                            name="chaos-livefold", daemon=True)
            self._thread.start()
        return last

    @property
    def notes(self) -> WorkNotes:
        return self.fold.notes

    def halt(self) -> None:
        """Stop the fold's thread (it ends its step first)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.fold.thaw()

    def release(self) -> None:
        self.halt()
        if self._watching is not None:
            tid, before = self._watching
            self._watching = None
            try:
                set_thread_nice(before, tid)   # (a nice raised back: needs no capability)
            except OSError:   # (that thread has ended)
                pass
        super().release()
        self.fold.abandon(self.fold.void or "released")   # (a check that never took the fold does not keep it)

    def finish(self) -> _RunScan | None:
        """The fold's rest and its scan (HistoryFold.finish), its thread stopped first."""
        self.halt()
        return self.fold.finish()


class Folded:
    """The fold a check takes once (`check_run(folded=...)`): a second pass, or the same check
    done again, scans the history itself."""

    def __init__(self, fold: Any) -> None:
        """`fold`: a FoldingWatch, a HistoryFold, or anything else (nothing folded: the check scans)."""
        self.fold = fold if isinstance(fold, (FoldingWatch, HistoryFold)) else None
        self.notes = self.fold.notes if self.fold is not None else WorkNotes()   # (the check's observe)

    def take(self) -> _RunScan | None:
        fold, self.fold = self.fold, None
        scan = fold.finish() if fold is not None else None
        if scan is not None:
            self.notes.finish(scan.events)
        return scan
