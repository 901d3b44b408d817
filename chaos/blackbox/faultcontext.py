"""The FaultContext of a black-box run: faults.local.LocalContext plus the framework producer's
failpoints (the team's workers carry none). A failover that must hold replication while
publishes are still to come (`at=before_publish`) stops the producer at its before_publish
failpoint, puts the hold on and resumes it: a condition, not a time a loaded machine can miss."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos.workload import failpoints as fp
from faults.interface import FaultError
from faults.local import LocalContext, ProcessHandle

POLL_S = 0.005   # how often a failpoint wait looks for the producer's marker


@dataclass
class BlackBoxContext(LocalContext):
    """`wait_failpoint` for the framework producer (``producer``: its handle, set once it runs)."""

    run_dir: Path = Path()
    producer: ProcessHandle | None = None

    def wait_failpoint(self, name: str, timeout_ms: float) -> tuple[Any, dict]:
        """The producer stopped at failpoint `name` (its marker taken) within `timeout_ms`
        (scaled) and a second; a wait begun while the run goes on ends when it stops."""
        deadline = time.monotonic() + self.scale(timeout_ms) + 1.0
        marker = fp.failpoint_dir(self.run_dir) / f"{self.producer.name}.{name}" if self.producer else None
        stopped_before = self.stop_event.is_set()
        while time.monotonic() < deadline:
            if marker is not None and marker.exists():
                info = json.loads(marker.read_text() or "{}")
                marker.unlink()
                return self.producer, info
            if not stopped_before and self.stop_event.is_set():
                raise FaultError(f"the producer did not reach failpoint {name!r} before the run stopped")
            time.sleep(POLL_S)
        raise FaultError(f"the producer did not reach failpoint {name!r} within {timeout_ms} ms")
