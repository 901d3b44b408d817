"""A FaultContext with no orchestrator: drive a fault against a bare Cluster.

For the framework's own tests of faults that need only the topology (promote-replica
against a writer thread) and for poking at a cluster by hand. Workers are whatever
handles the caller passes; failpoints are not available (no worker carries them).
"""
from __future__ import annotations

import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from random import Random
from typing import Any

from faults.context import FaultContextBase
from faults.helpers import process_alive
from faults.interface import Fault, FaultError, WorkerHandle


@dataclass
class ProcessHandle:
    """A WorkerHandle over a subprocess the caller started."""

    name: str
    proc: subprocess.Popen
    links: Any = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)

    def alive(self) -> bool:
        return self.proc.poll() is None and process_alive(self.proc.pid)


@dataclass
class LocalContext(FaultContextBase):
    """FaultContext over a Cluster, a seed and a time scale; ops recorded in ``ops``."""

    cluster: Any
    seed: int = 0
    time_scale: float = 1.0
    roles: dict[str, list[WorkerHandle]] = field(default_factory=dict)
    ops: list[dict] = field(default_factory=list)
    stop_event: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.rng = Random(self.seed)
        self.t0 = time.monotonic()

    def workers(self, role: str) -> list[WorkerHandle]:
        if role in self.roles:
            return list(self.roles[role])
        return [w for ws in self.roles.values() for w in ws if w.name == role]

    def wait_failpoint(self, name: str, timeout_ms: float) -> tuple[WorkerHandle, dict]:
        raise FaultError(f"failpoint {name!r}: a LocalContext has no workers with failpoints")

    def record(self, phase: str, **value: Any) -> None:
        self.ops.append({"time": time.monotonic(), "process": "nemesis", "type": "info", "f": "fault",
                         "value": {"phase": phase, **value}})

    def phases(self, name: str) -> list[str]:
        return [op["value"]["phase"] for op in self.ops if op["value"].get("name") == name]


class FaultThread:
    """Arm, run in a thread, heal: the lifecycle an orchestrator gives a fault."""

    def __init__(self, fault: Fault, ctx: Any) -> None:
        self.fault, self.ctx = fault, ctx
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"fault-{fault.name}", daemon=True)

    def _run(self) -> None:
        try:
            self.fault.run(self.ctx)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller in join()
            self.error = exc

    def start(self) -> "FaultThread":
        self.fault.arm(self.ctx)
        self.thread.start()
        return self

    def join(self, timeout_s: float = 60.0) -> None:
        """Wait for run, then heal (always); raise run's or heal's error."""
        self.thread.join(timeout_s)
        hung = self.thread.is_alive()
        try:
            self.fault.heal(self.ctx)
        finally:
            if hung:
                raise FaultError(f"fault {self.fault.name!r} still running after {timeout_s} s")
            if self.error is not None:
                raise self.error

    def __enter__(self) -> "FaultThread":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.join()
