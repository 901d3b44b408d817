"""Is the run still making progress, and is there anything left in hand? A tail over every
history file of a run.

Useful is a publish, a first read, an effect, an ack or a DLQ move; a poison entry being
claimed and failing again forever is not (so `poison-no-dlq` settles with its entries
pending instead of timing out). In hand is an entry a process has delivered and not yet
applied (or failed to apply, or dead-lettered): an XACK that follows an apply is not
counted (a broken link may eat it, and nothing is written then), but the process sending
it is not blocked in XREADGROUP, which the orchestrator checks besides. It ends a phase on
these conditions, not on a quiet period.
"""
from __future__ import annotations

import gc
import os
import sys
import time
from collections import deque
from pathlib import Path

from chaos.history import HistoryError, history_dir, history_files, merge_files, parse_lines, parse_op, paused_gc


# Publish and ack ops only say that work went on: of those, only the last one read is parsed, for
# its time (half of a run's ops; the history writer writes them compact, so the text is exact).
_PUBLISH, _ACK = b'"f":"publish"', b'"f":"ack"'
# Read from one file at a time: a poll that comes seconds after the last one (a loaded machine)
# finds tens of MB written; read whole with its list of lines, that was 50-250 MB of the
# orchestrator's at once (bench/check_stages.py: the high-water mark rose inside the polls).
READ_BYTES = 4 << 20
# A settled entry is forgotten once every file was read to its end at a poll that began this long
# after its put-down: a writer stamps an op and writes it at once (a consumer's delivery at its
# apply's invoke), so the delivery that came before that put-down has been read by then.
FORGET_S = 2.0


def _useful(op: dict) -> bool:
    f, kind = op.get("f"), op.get("type")
    if f == "deliver":
        return op.get("via") in ("read", "pending")
    if f == "apply":
        return kind == "ok"
    return f in ("publish", "ack", "dlq", "fault")


class Settled:
    """The entries the watch saw settle lately, as read: `forget` drops those settled before a
    time every file has passed and not delivered since. A delivery read later is later than
    their put-down (a new one: in hand), or a late op, which the watch passes over (`before`).
    So the per-entry state is the entries in flight and those of the last FORGET_S, not every
    entry of the run (10^6 entries: ~130 MB until the check)."""

    def __init__(self) -> None:
        # each put-down as read: its time and its entry, side by side (a tuple each was 64 B more
        # an entry: ~48 MB of 10^6 events' when the watch lagged)
        self.downs: deque[float] = deque()
        self.ids: deque[str] = deque()
        self.before = float("-inf")   # every entry settled before this and not delivered since is forgotten

    def put(self, down: float, entry: str) -> None:
        self.downs.append(down)
        self.ids.append(entry)

    def __len__(self) -> int:
        return len(self.downs)

    def forget(self, horizon: float, entries: dict) -> None:
        if horizon <= self.before:
            return
        downs, ids = self.downs, self.ids
        while downs and downs[0] < horizon:
            down, entry = downs.popleft(), ids.popleft()
            if entries.get(entry) == down:   # (a float: still settled at that put-down)
                del entries[entry]
        self.before = horizon


class ProgressWatch:
    """`poll()` reads what the processes wrote since the last call and returns the time of the
    last useful op (monotonic seconds); `busy(processes)` says whether one of them is inside
    an apply (invoke not yet completed); `in_hand(processes)` counts the entries those
    processes hold; `failed_since(entry_id, t)` whether an entry's handling failed at or
    after `t` by the job itself (a poison job: the drain's "tried and still pending"; a broken
    link is not such a failure). Every answer is kept up to date op by
    op, so a poll costs what was written since the last one, not the size of the run.

    With `keep`, every op read is kept, exactly as `read_history` would parse it (torn lines
    skipped, a corrupt one an error naming its file and line, raised by `history()`), so the
    run's history is parsed once, while it is written, instead of once more at the check."""

    def __init__(self, run_dir: Path, keep: bool = False) -> None:
        self.run_dir = run_dir
        self.dir = history_dir(run_dir)
        self.keep = keep
        self.kept: dict[str, list[dict]] = {}     # path -> its ops in file order (keep)
        self.lines: dict[str, int] = {}           # path -> complete lines read (keep: line numbers)
        self.errors: dict[str, HistoryError] = {}  # path -> its first corrupt line (keep)
        self.frozen = False
        self.offsets: dict[Path, int] = {}
        self.partial: dict[Path, bytes] = {}
        self.last_useful = time.monotonic()
        self.useful_ops = 0
        self.handled = 0               # apply ok and DLQ moves: the work done
        self.open_applies: dict[str, int] = {}
        # Files are tailed one after another, so a worker's apply may be read before the
        # reader's deliver of the same entry: compare times, not the order ops are read in.
        # entry id -> (its last delivery's time, its process, its last put-down's time or None) while
        # delivered after its last put-down (an apply's completion or a DLQ move: in hand), else the
        # last put-down's time alone (settled, until FORGET_S later: then forgotten, see `Settled`)
        self.entries: dict[str, tuple[float, str, float | None] | float] = {}
        self.settled = Settled()
        self.failed_at: dict[str, float] = {}    # entry id -> time of its last failed apply
        self.holding: dict[str, set[str]] = {}   # process -> entries delivered to it, not put down since

    def busy(self, processes: list[str]) -> bool:
        return any(self.open_applies.get(p, 0) > 0 for p in processes)

    def in_hand(self, processes: list[str]) -> int:
        holding = self.holding
        return sum(len(holding.get(p, ())) for p in set(processes))

    def failed_since(self, entry_id: str, since: float) -> bool:
        return self.failed_at.get(entry_id, float("-inf")) >= since

    def _track(self, op: dict) -> None:
        # (10^5 events: 4 x 10^5 ops pass here, so `holding` is kept right inline below)
        f = op.get("f")
        if f != "deliver" and f != "apply" and f != "dlq":
            value = op.get("value")
            if f == "log" and isinstance(value, dict) and "started" in value:
                self.open_applies[op.get("process", "")] = 0  # a new incarnation: the dead one's invokes dangle
            return
        entry = op.get("entry_id")
        if entry is None:  # released parked events carry none
            return
        kind, at = op.get("type"), op.get("time", 0.0)
        entries, holding = self.entries, self.holding
        if f == "deliver":
            if kind == "ok":
                now = entries.get(entry)
                if now is None:
                    if at < self.settled.before:
                        return   # a late op (its writer held up FORGET_S): its entry was settled and forgotten, or will be
                    down = None
                elif now.__class__ is tuple:   # in hand: a later delivery moves it to its process
                    if at <= now[0]:
                        return
                    held = holding.get(now[1])
                    if held is not None:
                        held.discard(entry)
                    down = now[2]
                elif at <= now:
                    return   # settled, and this delivery came before its put-down: not in hand
                else:
                    down = now
                holder = sys.intern(op.get("process", ""))   # (one copy per process, not per entry)
                entries[entry] = (at, holder, down)
                held = holding.get(holder)
                if held is None:
                    held = holding[holder] = set()
                held.add(entry)
            return
        if f == "dlq":
            if kind == "ok":
                self.handled += 1
        else:  # apply
            process = op.get("process", "")
            open_applies = self.open_applies
            if kind == "invoke":
                open_applies[process] = open_applies.get(process, 0) + 1
                return
            n = open_applies.get(process, 0)
            open_applies[process] = n - 1 if n > 0 else 0
            if kind == "ok":
                self.handled += 1
            elif kind == "fail" and str(op.get("value")).startswith("poison:"):
                # the job's own failure (it fails again on every attempt); a broken link or a DB
                # error is not: the entry's next claim may well succeed, so a drain waits for it
                failed = self.failed_at.get(entry)
                if failed is None or at > failed:
                    self.failed_at[entry] = at
        # put down (an apply's completion or a DLQ move) at `at`: no longer in its holder's hand,
        # unless it was delivered again after that
        now = entries.get(entry)
        if now is None or now.__class__ is not tuple:
            if now is None or at > now:
                entries[entry] = at
                self.settled.put(at, entry)
            return
        last, holder, down = now
        if down is None or at > down:
            down = at
        held = holding.get(holder)
        if last > down:
            entries[entry] = (last, holder, down)
            if held is None:
                held = holding[holder] = set()
            held.add(entry)
        else:
            entries[entry] = down
            self.settled.put(down, entry)
            if held is not None:
                held.discard(entry)

    def poll(self) -> float:
        began = time.monotonic()
        try:
            names = [entry.name for entry in os.scandir(self.dir) if entry.name.endswith(".jsonl")]
        except FileNotFoundError:
            return self.last_useful
        for name in names:
            path = os.path.join(self.dir, name)
            start = self.offsets.get(path, 0)
            try:
                size = os.stat(path).st_size
            except FileNotFoundError:
                continue
            if size <= start:
                continue
            keep = self.keep and not name.startswith(".")   # (read_history's glob skips dot files)
            with open(path, "rb") as fh:
                fh.seek(start)
                while start < size:   # (READ_BYTES at a time: polls far apart found 100+ MB written)
                    chunk = fh.read(min(READ_BYTES, size - start))
                    if not chunk:
                        break
                    start += len(chunk)
                    self.offsets[path] = start
                    lines = (self.partial.pop(path, b"") + chunk).split(b"\n")
                    if lines[-1]:
                        self.partial[path] = lines[-1]
                    del lines[-1]
                    if keep:
                        self._keep(path, lines)
                    else:
                        self._scan(lines)
        self.settled.forget(began - FORGET_S, self.entries)   # (every file was read to its end)
        return self.last_useful

    def _scan(self, lines: list[bytes]) -> None:
        timed = b""   # the last of the lines whose only use here is their time
        for line in lines:
            if _PUBLISH in line or _ACK in line:
                timed = line
                self.useful_ops += 1
                continue
            op = parse_op(line)
            if op is None:
                continue
            self._track(op)
            if _useful(op):
                self.useful_ops += 1
                self.last_useful = max(self.last_useful, op.get("time", 0.0))
        op = parse_op(timed) if timed else None
        if op is not None:   # (a process's ops are in time order in its file)
            self.last_useful = max(self.last_useful, op.get("time", 0.0))

    def _keep(self, path: str, lines: list[bytes]) -> None:
        first = self.lines.get(path, 0) + 1
        self.lines[path] = first - 1 + len(lines)
        if path in self.errors:
            self._scan(lines)
            return
        try:
            with paused_gc():
                ops = parse_lines(lines, path, first)
        except HistoryError as exc:    # the check raises it; progress goes on from what parses
            self.errors[path] = exc
            self._scan(lines)
            return
        self.kept.setdefault(path, []).extend(ops)
        # They live until the check: out of the cyclic GC's sight (its full passes over the
        # growing heap of kept ops doubled the cost of tailing); history() gives them back.
        gc.freeze()
        self.frozen = True
        last, track = self.last_useful, self._track
        for op in ops:
            f = op["f"]
            if f != "publish" and f != "ack":   # (they only say that work went on)
                track(op)
            if _useful(op):
                self.useful_ops += 1
                if op["time"] > last:
                    last = op["time"]
        self.last_useful = last

    def history(self, run: int | None = None) -> list[dict]:
        """The run's whole history, as `read_history(run_dir, run=run)` returns it (keep only;
        call once every writer is done: it reads what is left, last unterminated lines included)."""
        if not self.keep:
            raise ValueError("ProgressWatch.history needs ProgressWatch(run_dir, keep=True)")
        paths = [str(p) for p in history_files(self.run_dir)]   # (raises as read_history does)
        self.poll()
        for path in paths:
            rest = self.partial.pop(path, b"")
            if rest and path not in self.errors:
                try:
                    self.kept.setdefault(path, []).extend(parse_lines([rest], path, self.lines.get(path, 0) + 1))
                except HistoryError as exc:
                    self.errors[path] = exc
        try:
            for path in paths:
                if path in self.errors:
                    raise self.errors[path]
            with paused_gc():
                return merge_files((self.kept.pop(path, []) for path in paths), run)
        finally:
            self.release()

    def shed(self) -> None:
        """Drop the per-entry state (the entries in flight and those settled in the last FORGET_S)
        once no phase asks any more (the orchestrator's check: the drain is over)."""
        self.entries, self.failed_at, self.holding, self.settled = {}, {}, {}, Settled()

    def release(self) -> None:
        """Drop the kept ops and give them back to the cyclic GC (history() does it; call it
        when a run ends without asking for its history)."""
        self.kept.clear()
        if self.frozen:
            gc.unfreeze()
            self.frozen = False
