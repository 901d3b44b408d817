"""The worker processes of one run: started through the fork server, watched for deaths
(an intended one is respawned when the plan says so, an unexpected one is a reason for
verdict `unknown`), and stopped."""
from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos.orchestrator.cellcontext import CellContext
from chaos.orchestrator.rigwatch import RigFailed, RigWatch
from chaos.strategies.plan import PRODUCER, ProcessPlan
from chaos.workload import failpoints as fp
from chaos.workload.env import ready_marker
from chaos.workload.forkserver import Child, ForkServerError, fork_server
from chaos.workload.procutil import describe_exit, tail
from chaos.workload.workerspec import HelperLinks, WorkerSpec

TERMINATING = {signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGQUIT}
POLL_S = 0.005
READY_TIMEOUT_S = 15.0
STOP_GRACE_S = 2.0
END_TIMEOUT_S = 15.0     # the fork server's end of a run's workers (SIGKILL and reap: ms)


class RunAborted(Exception):
    """A run could not get its workers going; the run's verdict is unknown."""


@dataclass
class WorkerHandle:
    """A running worker process (docs/INTERFACES.md section 7): name, pid, links, kill, alive."""

    name: str
    plan: ProcessPlan
    links: Any
    child: Child
    log: Path
    expected_exit: bool = False
    stopping: bool = False
    accounted: bool = False
    drain_signalled: bool = False

    @property
    def pid(self) -> int:
        return self.child.pid

    @property
    def role(self) -> str:
        return self.plan.role

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send `sig`; a terminating signal makes the coming exit expected (a fault's doing)."""
        if sig in TERMINATING:
            self.expected_exit = True
        self.child.kill(sig)

    def alive(self) -> bool:
        return self.child.alive()


def merge_failpoints(sources: list[dict[str, dict]], keys: set[str]) -> dict[str, dict]:
    merged: dict[str, dict] = {}
    for source in sources:
        for target, points in source.items():
            if target in keys:
                merged.update(points)
    return merged


class Workers:
    """Every incarnation of the run's worker processes. `current` maps a plan's name to its
    latest handle; `reasons` (the run's) receives an unexpected death."""

    def __init__(self, cell: CellContext, run_dir: Path, seed: int, rig: RigWatch,
                 log_op: Callable[[dict], None], reasons: list[str]) -> None:
        self.cell, self.dir, self.seed, self.rig = cell, run_dir, seed, rig
        self.log_op, self.reasons = log_op, reasons
        self.current: dict[str, WorkerHandle] = {}
        self.handles: list[WorkerHandle] = []
        self.respawns: list[tuple[float, WorkerHandle]] = []
        self.incarnation: dict[str, int] = {}
        self.fault_failpoints: list[dict[str, dict]] = []   # what the run's faults arm

    def spawn(self, plan: ProcessPlan, *, t0: float, name: str | None = None, failpoints: bool = True,
              gate: bool = False) -> WorkerHandle:
        """Start one worker. Refused once the rig failed (RigFailed): a worker started on a broken
        rig has nothing to show. A fork server that cannot start it is a rig failure too."""
        self.rig.raise_if_failed()
        cell = self.cell
        name = name or plan.name
        links = cell.cluster.worker_links(plan.name)
        keys = {plan.kind, plan.role, plan.name}
        sources = self.fault_failpoints + [cell.extra_failpoints]
        helpers = {}
        for helper in plan.helpers:
            hl = cell.cluster.worker_links(helper)
            helpers[helper] = HelperLinks(hl.redis_url, hl.pg_dsn, merge_failpoints(
                sources, {"worker", "consumer", helper}) if failpoints else {})
        spec = WorkerSpec(name=name, role=plan.role, run_dir=str(self.dir), redis_url=links.redis_url,
                          pg_dsn=links.pg_dsn, sentinels=tuple(links.sentinels), master_name=links.master_name,
                          time_scale=cell.time_scale, seed=self.seed, t0=t0, gate=gate,
                          failpoints=merge_failpoints(sources, keys) if failpoints else {},
                          worker_links=helpers, role_spec=plan.spec)
        log = self.dir / "logs" / f"{name}.log"
        if self.rig.forks is None:
            self.rig.forks = fork_server()
        forks = self.rig.forks      # the run's own: not a new one in place of one that died mid-run
        try:
            child = forks.spawn(spec, log)
        except ForkServerError as exc:
            if not self.rig.check():
                self.rig.record([f"worker fork server (pid {forks._proc.pid}) did not start {name}: "
                                 f"{type(exc).__name__}: {exc}; log tail:\n(it writes to the orchestrator's stderr)"])
            raise RigFailed(f"{name} not started: {exc}") from exc
        handle = WorkerHandle(name, plan, links, child, log)
        self.handles.append(handle)
        self.current[plan.name] = handle
        self.log_op({"spawned": name, "pid": child.pid, "role": plan.role})
        return handle

    def blocked_readers(self, r: Any = None) -> int:
        clients = (r or self.cell.redis).client_list()
        return sum(1 for c in clients if c.get("cmd") == "xreadgroup" and "b" in c.get("flags", ""))

    def wait_ready(self, handle: WorkerHandle, blocked: int) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while self.blocked_readers() < blocked:
            self.rig.raise_if_failed()
            if not handle.alive() or time.monotonic() > deadline:
                raise RunAborted(f"{handle.name} never started reading ({describe_exit(handle.child.exitcode)}); "
                                 f"log tail:\n{tail(handle.log)}")
            time.sleep(POLL_S)

    def wait_gated(self, handles: list[WorkerHandle]) -> None:
        """Until every gated worker waits for its start signal."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        for handle in handles:
            while not ready_marker(self.dir, handle.name).exists():
                self.rig.raise_if_failed()
                if not handle.alive() or time.monotonic() > deadline:
                    raise RunAborted(f"{handle.name} never got ready ({describe_exit(handle.child.exitcode)}); "
                                     f"log tail:\n{tail(handle.log)}")
                time.sleep(POLL_S / 5)

    def _killed_by_failpoint(self, handle: WorkerHandle) -> bool:
        directory = fp.failpoint_dir(self.dir)
        names = [handle.name, *handle.plan.helpers]
        return directory.is_dir() and any(any(directory.glob(f"{n}.*.kill")) for n in names)

    def check_deaths(self, t0: float, *, respawn: bool = True) -> None:
        """Account for every worker that exited; respawn what is due (its schedule from `t0`),
        unless `respawn` is off (the run is stopping: a worker started now would outlive it)."""
        now = time.monotonic()
        for handle in list(self.handles):
            if handle.accounted or handle.alive():
                continue
            handle.accounted = True
            code = handle.child.exitcode
            if handle.stopping:
                continue
            if handle.plan.kind == PRODUCER and code == 0:
                continue
            killed = handle.expected_exit or self._killed_by_failpoint(handle)
            self.log_op({"exited": handle.name, "how": describe_exit(code), "expected": killed})
            if killed:
                if handle.plan.respawn:
                    delay = self.cell.time_scale * handle.plan.respawn_ms / 1000.0
                    self.respawns.append((now + delay, handle))
                continue
            self.rig.check()     # at once: the fork server's death takes its workers (before the watch's next tick)
            self.reasons.append(f"{handle.name} (pid {handle.pid}) died unexpectedly: {describe_exit(code)}; "
                                f"log tail:\n{tail(handle.log)}")
        if self.rig.failed.is_set() or not respawn:
            self.respawns.clear()      # the rig is gone, or the run stops: nothing to respawn
        for due, handle in list(self.respawns):
            if due <= now:
                self.respawns.remove((due, handle))
                n = self.incarnation.get(handle.plan.name, 1) + 1
                self.incarnation[handle.plan.name] = n
                self.spawn(handle.plan, t0=t0, name=f"{handle.plan.name}#{n}", failpoints=False)

    def respawn_due(self, kind: str) -> bool:
        """Whether a worker of `kind` waits to be respawned."""
        return any(h.plan.kind == kind for _, h in self.respawns)

    def live_names(self) -> list[str]:
        """History names of the live workers and of their helper processes (fan-out workers)."""
        names = []
        for handle in self.live():
            names += [handle.name, *handle.plan.helpers]
        return names

    def live(self, kind: str | None = None) -> list[WorkerHandle]:
        return [h for h in self.current.values() if h.alive() and (kind is None or h.plan.kind == kind)]

    def stop_all(self, t0: float) -> None:
        """SIGTERM every live worker; after the grace the fork server SIGKILLs and reaps whatever
        it still runs of this run (it knows its children for sure, whatever a handle believes).
        One it ended that no live handle stood for (a handle taken for dead, a spawn given up)
        is named in the reasons: the run did not see all it ran."""
        live = [h for h in self.handles if h.alive()]
        for handle in live:
            handle.stopping = True
            handle.child.kill(signal.SIGCONT)
            handle.child.kill(signal.SIGTERM)
        grace = STOP_GRACE_S / 4 if self.rig.failed.is_set() else STOP_GRACE_S   # a broken rig: their history is moot
        deadline = time.monotonic() + grace
        for handle in live:
            handle.child.wait(max(0.0, deadline - time.monotonic()))
        lingering = {h.pid for h in live if h.alive()}
        forks = self.rig.forks
        try:
            running = forks.end(str(self.dir), timeout=END_TIMEOUT_S) if forks is not None else []
        except ForkServerError as exc:   # (a server that does not answer: what the handles know is killed)
            running = []
            for handle in live:
                handle.child.kill(signal.SIGKILL)
            self.reasons.append(f"the fork server did not end the run's workers: {exc}")
        deadline = time.monotonic() + END_TIMEOUT_S     # (their exit lines came before the end's reply)
        for handle in live:
            handle.child.wait(max(0.0, deadline - time.monotonic()))
        for pid, name in running:
            if pid not in lingering:
                self.log_op({"stray": name, "pid": pid})
                self.reasons.append(f"{name} (pid {pid}) was still running at the stop, unseen by the run "
                                    f"(no live handle stood for it); SIGKILLed then")
        self.check_deaths(t0, respawn=False)
