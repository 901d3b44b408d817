"""hold: stop a worker at one failpoint until another worker has reached a second one.

A schedule a property needs, forced rather than timed: the first worker of the role that
reaches ``at`` (with an event of type ``etype``) stops itself there; it is resumed once
another worker has reached ``until`` with an event of type ``until_etype`` (that worker is
resumed at once), and not before ``min_ms``. E.g. ``hold:at=after_commit,etype=created,
until=after_apply_before_ack,until_etype=paid``: created's consumer has committed and not yet
logged its apply op while the other consumer commits and logs paid, however slowly a loaded
machine runs either. A pause of fixed length let the machine log paid only after it ended.

With ``gate`` the fault also orders what comes before the stop: the first worker of
``gate_role`` that reaches ``gate`` (with an event of type ``gate_etype``) stays stopped there
until the held worker has stopped at ``at``. E.g. ``gate=before_publish,gate_role=producer,
gate_etype=paid`` keeps paid unpublished until created's consumer has committed.

If ``until`` is not reached within ``wait_ms`` the worker is resumed and the fault fails
(the run is `unknown`: the schedule it forces did not happen).
"""
from __future__ import annotations

import threading
import time

from chaos.errors import BadArguments
from chaos.params import Param
from chaos.workload.failpoints import CONSUMER_FAILPOINTS, NAMES
from faults.effects import FAILPOINT_FIRED
from faults.helpers import arrivals, heal_stopped, process_alive
from faults.interface import Fault, FaultContext, FaultError

POINTS = tuple(sorted(CONSUMER_FAILPOINTS))


class Hold(Fault):
    name = "hold"
    touches_publish = False   # holds workers at failpoints; no link
    effect = FAILPOINT_FIRED   # the worker stopped at `at` (its failpoint acted)
    description = "stop a worker at a failpoint until another worker reaches a second failpoint"
    params = (
        Param("at", "after_commit", "the failpoint where the first arriving worker stops", choices=POINTS),
        Param("etype", "", "stop only on an event of this type (empty: the first event)"),
        Param("until", "after_apply_before_ack", "the failpoint another worker must reach first",
              choices=POINTS),
        Param("until_etype", "", "with an event of this type (empty: any event)"),
        Param("role", "consumer", "the role whose workers carry `at` and `until`"),
        Param("gate", "", "a failpoint where a worker of gate_role waits until the held one has stopped "
              "(empty: none)", choices=("", *NAMES)),
        Param("gate_role", "producer", "the role whose workers carry the gate"),
        Param("gate_etype", "", "the gate stops only an event of this type (empty: the first event)"),
        Param("min_ms", 0, "stay stopped at least this long"),
        Param("wait_ms", 30000, "how long to wait for each failpoint to be reached (unscaled)"),
    )

    def validate(self) -> None:
        if self.gate and self.gate_role == self.role and self.gate in (self.at, self.until):
            raise BadArguments(f"fault 'hold': gate {self.gate} is also at or until on role {self.role}; "
                               "give the gate another failpoint or another gate_role")
        if self.at == self.until:
            raise BadArguments(f"fault 'hold': at and until are both {self.at}; a worker carries one failpoint "
                               "of a name, so give two different failpoints (e.g. at=after_commit,"
                               "until=after_apply_before_ack)")

    def failpoints(self) -> dict[str, dict[str, dict]]:
        at: dict = {"action": "signal", "count": 1}
        until: dict = {"action": "signal", "count": 1}
        if self.etype:
            at["etype"] = self.etype
        if self.until_etype:
            until["etype"] = self.until_etype
        out = {self.role: {self.at: at, self.until: until}}
        if self.gate:
            gate: dict = {"action": "signal", "count": 1}
            if self.gate_etype:
                gate["etype"] = self.gate_etype
            out.setdefault(self.gate_role, {})[self.gate] = gate
        return out

    def arm(self, ctx: FaultContext) -> None:
        self.armed_for = id(ctx)
        self.stopped = None
        self.done = threading.Event()
        self.reached = threading.Event()
        self.reached_by: list[str] = []
        self.held = threading.Event()      # the worker stopped at `at`: the gate opens
        self.gated: list = []              # workers stopped at the gate, resumed when `held` is set
        self.gate_lock = threading.Lock()
        threading.Thread(target=self._watch_until, args=(ctx, self.done), daemon=True, name="hold-until").start()
        if self.gate:
            threading.Thread(target=self._watch_gate, args=(ctx, self.done), daemon=True, name="hold-gate").start()

    def _watch_gate(self, ctx: FaultContext, done: threading.Event) -> None:
        """Keep each worker reaching the gate stopped until the held worker has stopped."""
        for other in arrivals(ctx, self.gate, done):
            with self.gate_lock:
                if not self.held.is_set():
                    self.gated.append(other)
                    continue
            ctx.resume(other)

    def _open_gate(self, ctx: FaultContext) -> None:
        with self.gate_lock:
            self.held.set()
            gated, self.gated = self.gated, []
        for worker in gated:
            if process_alive(worker.pid):
                ctx.resume(worker)

    def _watch_until(self, ctx: FaultContext, done: threading.Event) -> None:
        """Resume every worker reaching `until` at once, and note that one did."""
        for other in arrivals(ctx, self.until, done):
            self.reached_by.append(other.name)
            self.reached.set()
            ctx.resume(other)

    def run(self, ctx: FaultContext) -> None:
        if getattr(self, "armed_for", None) != id(ctx):
            self.arm(ctx)
        worker, info = ctx.wait_failpoint(self.at, self.wait_ms)
        self.stopped = worker
        stopped_at = time.monotonic()
        ctx.record("start", name=self.name, spec=self.spec, worker=worker.name, pid=worker.pid,
                   failpoints={self.at: "signal"}, event_id=info.get("event_id"),
                   **({"gated": [w.name for w in self.gated]} if self.gate else {}))
        self._open_gate(ctx)
        ctx.sleep(self.min_ms)
        deadline = stopped_at + self.wait_ms / 1000
        while not self.reached.wait(0.01) and time.monotonic() < deadline and not ctx.stop_event.is_set():
            pass
        self._resume(ctx)
        ctx.record("stop", name=self.name, worker=worker.name, held_s=round(time.monotonic() - stopped_at, 4),
                   until_reached_by=list(self.reached_by))
        if not self.reached.is_set():
            raise FaultError(f"fault 'hold': no other worker reached {self.until} within {self.wait_ms} ms of the "
                             f"stop: the schedule it forces did not happen")

    def _resume(self, ctx: FaultContext) -> None:
        worker, self.stopped = self.stopped, None
        if worker is not None and process_alive(worker.pid):
            ctx.resume(worker)

    def heal(self, ctx: FaultContext) -> None:
        heal_stopped(self, ctx, lambda: self._open_gate(ctx), lambda: self._resume(ctx))
