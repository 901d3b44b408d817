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
    """`poll()` returns the time of the last useful op seen so far (monotonic seconds)."""

    def __init__(self, run_dir: Path) -> None:
        self.dir = history_dir(run_dir)
        self.offsets: dict[Path, int] = {}
        self.partial: dict[Path, bytes] = {}
        self.last_useful = time.monotonic()
        self.useful_ops = 0

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
                if _useful(op):
                    self.useful_ops += 1
                    self.last_useful = max(self.last_useful, op.get("time", 0.0))
        return self.last_useful
