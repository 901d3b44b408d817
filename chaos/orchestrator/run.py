"""One run of a cell: its state, and what every phase shares (the rig watch, the workers,
the orchestrator's history, the loop that waits for a phase's end while the run makes
progress). The phases themselves are in phases.py, drain.py and check.py; their order in
sequence.py."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import redis

from chaos.events import Event
from chaos.history import HistoryWriter
from chaos.orchestrator import wait
from chaos.orchestrator.cellcontext import CellContext
from chaos.orchestrator.phaseclock import PhaseClock
from chaos.orchestrator.rigwatch import RigFailed, RigWatch, disk_full, no_space, shut
from chaos.orchestrator.workers import POLL_S, Workers
from chaos.proxy.client import ToxiproxyError
from chaos.results import Phase
from chaos.strategies.plan import ProcessPlan
from chaos.workload.progress import ProgressWatch


class Run:
    """One run of a cell (see chaos/orchestrator/__init__.py for the phases)."""

    def __init__(self, cell: CellContext, index: int, seed: int,
                 workload: tuple[list[Event], list[ProcessPlan]] | None = None) -> None:
        self.cell, self.index, self.seed = cell, index, seed
        self.workload = workload   # (events, producer plans) of this seed, when already made
        self.dir = cell.root / f"run-{index:03d}"
        self.stop_event = threading.Event()
        self.reasons: list[str] = []
        self.fault_errors: list[str] = []
        self.phases: list[Phase] = []
        self.notes: list[str] = []
        self.rig = RigWatch(cell.cluster, cell.spared, self.dir, name=f"rig-watch-{index}",
                            on_failure=self._rig_failed)
        self.workers = Workers(cell, self.dir, seed, self.rig, self.log_op, self.reasons)
        self.progress: ProgressWatch | None = None   # tails the history from the workload on
        self.drain_end = ""        # why the drain ended (what explains the entries it left)
        self.live_consumers: list[str] = []   # live when the drain ended without progress (liveness)
        self.workload_stall = ""   # the reason of a workload that stalled with its producers done
        self.t0 = time.monotonic()
        self.orchestrator: HistoryWriter    # opened when the run starts (sequence.execute)
        self.nemesis: HistoryWriter

    def open_histories(self) -> None:
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        self.orchestrator = HistoryWriter.for_run(self.dir, "orchestrator")
        self.nemesis = HistoryWriter.for_run(self.dir, "nemesis")

    def log_op(self, value: dict) -> None:
        """An orchestrator info op; a full run dir is a rig failure, not a crash."""
        try:
            self.orchestrator.op("info", "log", value=value)
        except OSError as exc:
            self.disk_full_or_raise(exc)

    # -- the rig -----------------------------------------------------------------------
    @property
    def rig_failures(self) -> list[str]:
        return self.rig.failures

    def _rig_failed(self, new: list[str]) -> None:
        """The rig watch found a failure: end the run, and unblock the orchestrator's calls."""
        cell = self.cell
        self.stop_event.set()
        cell.redis.give_up()
        if any(f.startswith("PostgreSQL") for f in new):
            cell.pg_gone = True
            shut(cell._conn)
        if any(f.startswith("Redis") and "(primary)" in f.split(";")[0] for f in new):
            cell.redis.disconnect()

    def raise_if_rig_failed(self) -> None:
        self.rig.raise_if_failed()

    def disk_full_or_raise(self, exc: OSError) -> None:
        """A full run-dir disk is a rig failure; any other OSError is the framework's own."""
        if not no_space(exc):
            raise exc
        self.rig.record([disk_full(self.dir, exc)])

    def rig_error(self, exc: BaseException, where: str) -> None:
        """An orchestrator call failed under the rig: name the broken component (a confirmed
        probe), else the connection itself."""
        if isinstance(exc, RigFailed):
            return
        if self.rig.check(deep=True):
            return
        if isinstance(exc, ToxiproxyError):
            name = "proxy server (its API, asked by the orchestrator)"
        elif isinstance(exc, redis.RedisError):
            name = "Redis primary (the orchestrator's connection)"
        else:
            name = "PostgreSQL (the orchestrator's connection)"
        self.rig.record([f"{name} failed during the {where}: {type(exc).__name__}: {str(exc).strip()[:500]}; "
                         f"log tail:\n(the server itself answers its probe)"])

    # -- what the phases share ---------------------------------------------------------
    def stream_state(self) -> str:
        """The groups' pending and lag, for a reason text (what the run was waiting for)."""
        try:
            r = self.cell.redis
            parts = []
            for stream in self.cell.streams:
                for g in r.xinfo_groups(stream):
                    parts.append(f"{stream}: pending {g['pending']}, lag {g.get('lag')}, "
                                 f"last-delivered {g['last-delivered-id']}, length {r.xlen(stream)}")
            return "; ".join(parts) or "no groups"
        except Exception as exc:  # noqa: BLE001 - a diagnostic only
            return f"streams unreadable: {type(exc).__name__}: {exc}"

    def watch(self, done: Callable[[], bool], bound_s: float, progress: ProgressWatch,
              stall_s: float) -> tuple[float, float] | None:
        """Poll deaths/respawns and `done` until it holds (None); past `bound_s` on while the run
        makes progress (the one wait: chaos/orchestrator/wait.py, where its rules are)."""
        def tick() -> None:
            self.raise_if_rig_failed()
            self.workers.check_deaths(self.t0)
        return wait.watch(done, bound_s, progress, stall_s, tick, sleep_s=POLL_S * 2)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time one phase of this run on the phase clock; recorded even when the phase raises."""
        clock = PhaseClock(self.index, self.phases)
        clock.enter(name)
        try:
            yield
        finally:
            clock.close()
