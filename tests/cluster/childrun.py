"""A child pytest running tests/cluster/scenarios, and checks that its servers are gone."""
from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from chaos.cluster.rundirs import same_process

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = Path(__file__).parent / "scenarios" / "scenario_record.py"


@dataclass
class ChildRun:
    """A child pytest process and the records its workers wrote."""

    proc: subprocess.Popen
    out: Path

    def records(self, count: int = 1, timeout: float = 90.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while len(found := sorted(self.out.glob("*.json"))) < count:
            if self.proc.poll() is not None and len(found) < count:
                raise AssertionError(f"child pytest exited {self.proc.returncode} early:\n{self.output()}")
            assert time.monotonic() < deadline, f"only {len(found)} of {count} records after {timeout} s"
            time.sleep(0.05)
        return [json.loads(path.read_text()) for path in found]

    def wait(self, timeout: float = 90.0) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise

    def output(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        return (self.proc.stdout.read() if self.proc.stdout else "")[-4000:]


def survivors(records: list[dict]) -> list[str]:
    """Recorded server processes that still run (same pid *and* start time)."""
    alive = []
    for record in records:
        for proc in record["processes"]:
            if same_process(proc["pid"], proc["create_time"]):
                alive.append(f"{proc['name']} pid {proc['pid']}")
    return alive


def wait_no_survivors(records: list[dict], timeout: float = 10.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while (alive := survivors(records)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive
