"""Is the run still making progress? A tail over every history file of a run.

The orchestrator's drain waits until nothing useful happens for a settle window. Useful
is a publish, a first read, an effect, an ack or a DLQ move; a poison entry being
claimed and failing again forever is not (so `poison-no-dlq` settles with its entries
pending instead of timing out).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from chaos.history import history_dir


def _useful(op: dict) -> bool:
    f, kind = op.get("f"), op.get("type")
    if f == "deliver":
        return op.get("via") in ("read", "pending")
    if f == "apply":
        return kind == "ok"
    return f in ("publish", "ack", "dlq", "fault")


class ProgressWatch:
    """`poll()` returns the time of the last useful op seen so far (monotonic seconds);
    `busy(processes)` says whether one of them is inside an apply (invoke not yet completed),
    which no quiet period may cut short however long a stalled process takes."""

    def __init__(self, run_dir: Path) -> None:
        self.dir = history_dir(run_dir)
        self.offsets: dict[Path, int] = {}
        self.partial: dict[Path, bytes] = {}
        self.last_useful = time.monotonic()
        self.useful_ops = 0
        self.open_applies: dict[str, int] = {}

    def busy(self, processes: list[str]) -> bool:
        return any(self.open_applies.get(p, 0) > 0 for p in processes)

    def _track(self, op: dict) -> None:
        value = op.get("value")
        if op.get("f") == "log" and isinstance(value, dict) and "started" in value:
            self.open_applies[op.get("process", "")] = 0  # a new incarnation: the dead one's invokes dangle
            return
        if op.get("f") != "apply" or op.get("entry_id") is None:  # released parked events carry none
            return
        delta = 1 if op.get("type") == "invoke" else -1
        process = op.get("process", "")
        self.open_applies[process] = max(0, self.open_applies.get(process, 0) + delta)

    def poll(self) -> float:
        if not self.dir.is_dir():
            return self.last_useful
        for path in self.dir.glob("*.jsonl"):
            start = self.offsets.get(path, 0)
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            if size <= start:
                continue
            with open(path, "rb") as fh:
                fh.seek(start)
                data = self.partial.pop(path, b"") + fh.read(size - start)
            self.offsets[path] = size
            lines = data.split(b"\n")
            if lines[-1]:
                self.partial[path] = lines[-1]
            for line in lines[:-1]:
                try:
                    op = json.loads(line)
                except ValueError:
                    continue
                self._track(op)
                if _useful(op):
                    self.useful_ops += 1
                    self.last_useful = max(self.last_useful, op.get("time", 0.0))
        return self.last_useful
