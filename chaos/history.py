"""The per-process operation log (Jepsen-style invoke/ok/fail/info ops, one JSON line each).

Each worker process owns one file, `<run_dir>/history/<process>.jsonl`, written with one
unbuffered `os.write` (O_APPEND) per op, so a SIGKILL loses at most the op being written;
ops produced together (a pipelined batch of publishes) may go in one write (`ops`), and a
SIGKILL then loses at most that batch, as if the process had died before producing it.
bench/history_bench.py measures the options: on the shared 2-core machine one op costs 4-10 us
written alone either way (the system call dominates; orjson and no Python buffer shave 10-50 %),
and about half of that in a batch. The reader merges all
files by the system-wide monotonic clock and skips torn lines (the prefix of an op that a
SIGKILL leaves); anything else that does not parse is an error naming the file and line,
because a silently skipped op would change the checker's counts.
"""
from __future__ import annotations

import bisect
import gc
import itertools
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from operator import itemgetter
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

try:  # orjson parses about 5x faster; the checker bench reads 10^6 lines
    import orjson as _orjson
except ModuleNotFoundError:  # pragma: no cover - exercised only where orjson is absent
    _orjson = None

HISTORY_DIR = "history"
OP_TYPES = frozenset({"invoke", "ok", "fail", "info"})
REQUIRED_KEYS = ("time", "process", "type", "f")
_monotonic = time.monotonic


def _dumps_json(op: dict) -> bytes:
    return (json.dumps(op, default=str, separators=(",", ":")) + "\n").encode()


if _orjson is not None:
    _OPTIONS = _orjson.OPT_APPEND_NEWLINE | _orjson.OPT_NON_STR_KEYS

    def dump_op(op: dict) -> bytes:
        """One op as a JSON line (bytes, newline included)."""
        try:
            return _orjson.dumps(op, default=str, option=_OPTIONS)
        except TypeError:  # what orjson refuses (an int beyond 64 bits): the stdlib writes it
            return _dumps_json(op)
else:  # pragma: no cover
    dump_op = _dumps_json


def json_fields(fields: dict) -> bytes:
    """`fields` serialised for `HistoryWriter.line`: the inside of a JSON object, led by a comma
    (b'' when empty). A hot path serialises an event's fields once and splices them into each
    of its ops instead of building and dumping a dict per op."""
    if not fields:
        return b""
    data = dump_op(fields)      # b'{...}\n'
    return b"," + data[1:-2]


class HistoryError(ValueError):
    """A history file or op that the checker cannot trust; the message names the file and line."""


@contextmanager
def paused_gc() -> Iterator[None]:
    """Suspend the cyclic GC while building 10^6 acyclic dicts: its full passes over every
    live op made reading and checking grow faster than linearly. Nested use is fine."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def history_dir(run_dir: Path) -> Path:
    """Where a run keeps its per-process history files."""
    return Path(run_dir) / HISTORY_DIR


class HistoryWriter:
    """Appends ops for one process; thread-safe so per-key worker threads may share it."""

    def __init__(self, path: Path, process: str) -> None:
        if not process:
            raise HistoryError("HistoryWriter needs a process name such as 'C1' or 'P-order'")
        self.path = Path(path)
        self.process = process
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if _ends_torn(self.path):  # a killed predecessor left half a line: end it first
            os.write(self._fd, b"\n")
        self._lock = threading.Lock()
        self._heads: dict[tuple[str, str], bytes] = {}   # (type, f) -> b',"process":..,"type":..,"f":..'

    @classmethod
    def for_run(cls, run_dir: Path, process: str) -> HistoryWriter:
        """The writer at the conventional place, `<run_dir>/history/<process>.jsonl`."""
        return cls(history_dir(run_dir) / f"{process}.jsonl", process)

    def make(self, type: str, f: str, **fields: Any) -> dict:
        """An op of this process, not yet written (for `ops`); `time` is now."""
        if type not in OP_TYPES or not f or not isinstance(f, str) or "time" in fields or "process" in fields:
            self._refuse(type, f, fields)
        if None in fields.values():   # (the common case, no None, skips building a second dict)
            fields = {k: v for k, v in fields.items() if v is not None}
        return {"time": _monotonic(), "process": self.process, "type": type, "f": f, **fields}

    @staticmethod
    def _refuse(type: Any, f: Any, fields: dict) -> None:
        if type not in OP_TYPES:
            raise HistoryError(f"op type {type!r} is not one of {sorted(OP_TYPES)}")
        if not isinstance(f, str) or not f:
            raise HistoryError(f"op f must be a non-empty string such as 'publish', got {f!r}")
        raise HistoryError("time and process are set by HistoryWriter.op; pass the other fields only")

    def op(self, type: str, f: str, **fields: Any) -> dict:
        """Write one op (one unbuffered write); `time` and `process` are filled in, the op is returned.
        (The workers' per-event ops go through `line`/`lines`, which serialise an event's fields once.)"""
        op = self.make(type, f, **fields)
        self._write(dump_op(op))
        return op

    def line(self, type: str, f: str, body: bytes) -> bytes:
        """One op as a line ready for `lines` (time taken now), its fields already serialised by
        `json_fields` (None values left out by the caller): the same JSON as `make` + `dump_op`."""
        head = self._heads.get((type, f))
        if head is None:
            self.make(type, f)      # refuses a bad type or f, as op does
            head = self._heads[type, f] = b"," + dump_op({"process": self.process, "type": type, "f": f})[1:-2]
        return b'{"time":%a%b%b}\n' % (_monotonic(), head, body)

    def lines(self, lines: list[bytes]) -> None:
        """Write op lines (from `line`) produced together in one write, as `ops` does."""
        if lines:
            self._write(b"".join(lines))

    def ops(self, ops: list[dict]) -> None:
        """Write ops produced together (from `make`) in one write: a SIGKILL keeps a prefix of them."""
        if ops:
            self._write(b"".join(dump_op(op) for op in ops))

    def _write(self, data: bytes) -> None:
        with self._lock:
            if self._fd is None:
                raise HistoryError(f"history writer for {self.process} is closed ({self.path})")
            written = os.write(self._fd, data)
            while written < len(data):  # a regular file takes it in one write; a short one is finished
                data = data[written:]
                written = os.write(self._fd, data)

    def close(self) -> None:
        """Close the file; further ops raise."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ends_torn(path: Path) -> bool:
    with open(path, "rb") as fh:
        if fh.seek(0, 2) == 0:
            return False
        fh.seek(-1, 2)
        return fh.read(1) != b"\n"


def _loads(line: bytes) -> Any:
    return _orjson.loads(line) if _orjson is not None else json.loads(line)


def parse_op(line: bytes) -> dict | None:
    """One history line as an op, None for what is not one (a torn or blank line): for
    tailing a history while it is written (chaos/workload/progress.py)."""
    try:
        op = _loads(line)
    except ValueError:
        return None
    return op if type(op) is dict else None


def parse_lines(lines: Iterable[bytes], source: str, first: int = 1, skip: bytes | None = None) -> list[dict]:
    """Ops from one file's lines, skipping torn lines (`first`: the number of the first line,
    for a file read in pieces while it is written).

    A torn line is what a SIGKILL or a full disk leaves: a prefix of an op, so it does not
    end in `}`, or its JSON ends before the op does (cut right after an inner `}`).
    It is skipped wherever it is (a restarted process appends after its predecessor's torn
    line). A line that ends in `}` and still does not parse was corrupted some other way
    (two writers on one file), and that is an error. A line holding `skip` is passed over.
    """
    if _orjson is not None and lines.__class__ is list:   # (a chunk: not a whole file, joined once more)
        ops = _parse_whole(lines if skip is None else [raw for raw in lines if skip not in raw])
        if ops is not None:
            return ops
    ops = []
    append = ops.append
    loads = _orjson.loads if _orjson is not None else json.loads
    for number, raw in enumerate(lines, first):
        if skip is not None and skip in raw:
            continue   # (ops its reader does not need, such as acks for the checker: not parsed)
        try:
            op = loads(raw)
        except ValueError as exc:
            text = raw.strip()
            if not text or not text.endswith(b"}") or getattr(exc, "pos", -1) >= len(text):
                continue  # a blank line, or torn by a crash or a full disk mid-write (the data
                #           ends inside the op, even when cut right after an inner `}`)
            raise HistoryError(f"{source}:{number}: not a JSON op ({exc}); is the file written "
                               "by two processes at once? Give each process its own name") from None
        if type(op) is not dict or "time" not in op or "process" not in op or "type" not in op \
                or "f" not in op:
            missing = [k for k in REQUIRED_KEYS if not isinstance(op, dict) or k not in op]
            raise HistoryError(f"{source}:{number}: op lacks {missing}; write ops with HistoryWriter.op")
        append(op)
    return ops


def _parse_whole(lines: list[bytes]) -> list[dict] | None:
    """`lines` parsed in one call, as one JSON array (orjson: a call per line was a third of
    the parse at 10^6 events), when each is one whole op; else None (a torn, blank or corrupt
    line: parse_lines then goes line by line, to skip it or name it). A torn line is a prefix
    of an op: its brackets or a string stay open, so the array does not parse, or gives
    another count of items than of lines."""
    if not lines:
        return []
    try:
        ops = _orjson.loads(b"[%b]" % b",".join(lines))
    except ValueError:
        return None
    if len(ops) != len(lines):
        return None
    for op in ops:
        if op.__class__ is not dict or "time" not in op or "process" not in op or "type" not in op \
                or "f" not in op:
            return None
    return ops


def read_file(path: Path) -> list[dict]:
    """All complete ops of one history file, in file order."""
    with open(path, "rb") as fh:
        return parse_lines(fh, str(path))


def history_files(run_dir: Path) -> list[Path]:
    """A run's history files, in the order their ops are merged (by name); a missing history
    directory is an error naming what a run dir holds."""
    directory = history_dir(run_dir)
    if not directory.is_dir():
        raise HistoryError(f"no history directory at {directory}: is {run_dir} a run dir? "
                           f"Workers write <run_dir>/{HISTORY_DIR}/<process>.jsonl")
    return sorted(directory.glob("*.jsonl"))


def merge_files(per_file: Iterable[list[dict]], run: int | None = None) -> list[dict]:
    """Files' ops (given in history_files order) merged by time; with `run`, each op gets it."""
    ops: list[dict] = []
    for file_ops in per_file:
        ops.extend(file_ops)
    ops.sort(key=op_time)  # stable: a process's own order survives equal timestamps
    if run is not None:
        for op in ops:
            op["run"] = run
    return ops


def read_history(run_dir: Path, *, run: int | None = None) -> list[dict]:
    """Every process's ops of one run, merged by time; with `run`, each op gets `run` set."""
    paths = history_files(run_dir)
    with paused_gc():
        return merge_files((read_file(path) for path in paths), run)


op_time = itemgetter("time")     # an op's time: the merge's sort key (and a bisect's over a history)

CHUNK_LINES = 4096   # lines parsed at a time per file by iter_history


class HistoryOrderError(HistoryError):
    """A file whose ops are not in time order (threads of one process took their times in one
    order and wrote in the other): iter_history cannot merge it lazily; `path` names it."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path}: ops out of time order; read it whole (iter_history(sort_whole=...))")
        self.path = path


def _file_chunks(path: str, sort_whole: bool, skip: bytes | None = None) -> Iterator[list[dict]]:
    """One file's ops in chunks, each in time order and after the previous one (a file out
    of order raises HistoryOrderError, unless `sort_whole`: then it is read and sorted whole)."""
    if sort_whole:
        with open(path, "rb") as fh:
            ops = parse_lines(fh, path, skip=skip)
        ops.sort(key=op_time)
        yield ops
        return
    last = float("-inf")
    with open(path, "rb") as fh:
        first = 1
        while True:
            lines = list(itertools.islice(fh, CHUNK_LINES))
            if not lines:
                return
            ops = parse_lines(lines, path, first, skip)
            first += len(lines)
            if ops:
                times = list(map(op_time, ops))
                if times[0] < last or times != sorted(times):
                    raise HistoryOrderError(path)
                last = times[-1]
                yield ops


def iter_history(run_dir: Path, *, run: int | None = None, sort_whole: frozenset[str] = frozenset(),
                 skip: bytes | None = None) -> Iterator[dict]:
    """read_history's ops in read_history's order (by time; a tie by file, then line), read
    lazily: about a chunk of each file in memory at a time, not the run. The file that has
    reached the earliest time is read next; every op before the earliest time any unfinished
    file has reached is then given out, the files' ops sorted together (stable: the order of
    one sort of every op). A file out of time order raises HistoryOrderError when its first op
    out of order is read; pass its path in `sort_whole` (HistorySource does). Lines holding
    `skip` are left out unparsed (b'"f":"ack"': the checker reads no ack; a line written
    otherwise, with spaces, is parsed and given out)."""
    return itertools.chain.from_iterable(_batches(run_dir, run, sort_whole, skip))


def _batches(run_dir: Path, run: int | None, sort_whole: frozenset[str], skip: bytes | None
             ) -> Iterator[list[dict]]:
    """The batches iter_history chains: ops up to the files' mark, sorted together."""
    paths = [str(p) for p in history_files(run_dir)]
    readers = [_file_chunks(path, path in sort_whole, skip) for path in paths]
    buffers: list[list[dict]] = [[] for _ in paths]
    tops = [float("-inf")] * len(paths)   # each file's latest time read: the rest of it is later
    live = list(range(len(paths)))
    with paused_gc():
        while live:
            i = min(live, key=tops.__getitem__)
            chunk = next(readers[i], None)
            if chunk is None:
                live.remove(i)
            else:
                buffers[i].extend(chunk)
                tops[i] = chunk[-1]["time"]
            mark = min([tops[j] for j in live], default=None)
            batch: list[dict] = []
            for buf in buffers:
                cut = len(buf) if mark is None else bisect.bisect_left(buf, mark, key=op_time)
                if cut:
                    batch += buf[:cut]
                    del buf[:cut]
            if batch:
                batch.sort(key=op_time)   # stable: a tie keeps file order, then line order
                if run is not None:
                    for op in batch:
                        op["run"] = run
                yield batch


class HistorySource:
    """A run's history on disk that can be read again: each iteration is iter_history, so
    the check and the notes pass over it without the run's ops ever all in memory. A file out
    of time order raises HistoryOrderError in the pass that finds it: fold with `passes`,
    which does the fold again with that file read whole (and every later pass reads it so)."""

    def __init__(self, run_dir: Path, run: int | None = None, skip: bytes | None = None) -> None:
        self.run_dir, self.run, self.skip = Path(run_dir), run, skip
        self.sort_whole: set[str] = set()   # (shared with its `without` views)

    def __iter__(self) -> Iterator[dict]:
        return iter_history(self.run_dir, run=self.run, sort_whole=frozenset(self.sort_whole), skip=self.skip)

    def without(self, skip: bytes) -> HistorySource:
        """The same history without the ops whose lines hold `skip` (left unparsed)."""
        out = HistorySource(self.run_dir, self.run, skip)
        out.sort_whole = self.sort_whole
        return out

    def passes(self, fold: Callable[[Iterable[dict]], T]) -> T:
        """`fold(self)`, done again when a file turned out to be out of time order (at most
        once per file): a fold over ops in the wrong order would be wrong."""
        while True:
            try:
                return fold(self)
            except HistoryOrderError as exc:   # this pass is void: the next reads that file whole
                if exc.path in self.sort_whole:
                    raise
                self.sort_whole.add(exc.path)

    def first_time(self) -> float | None:
        """The time of the history's first op (None for an empty history)."""
        for op in self:
            return op["time"]
        return None


def format_op(op: dict, origin: float = 0.0) -> str:
    """One op as a history.txt line: time in ms from `origin`, process, type, f, then fields."""
    head = f"{(op['time'] - origin) * 1000:10.3f} ms  {op['process']:<14} {op['type']:<6} {op['f']:<9}"
    rest = " ".join(f"{k}={v}" for k, v in op.items() if k not in ("time", "process", "type", "f", "run"))
    return f"{head} {rest}".rstrip()


def format_history(ops: list[dict]) -> str:
    """A whole history as text, times relative to its first op (the Allure attachment)."""
    if not ops:
        return "(empty history)\n"
    origin = ops[0]["time"]
    return "\n".join(format_op(op, origin) for op in ops) + "\n"
