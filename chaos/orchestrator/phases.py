"""One run's phases before the drain: reset, arm, workload (the heal is faultthreads.acting's,
the drain in drain.py, the check in check.py, their order in sequence.py)."""
from __future__ import annotations

import random
import signal
import time
from typing import Any

import redis

from chaos.events import Event
from chaos.orchestrator.cellcontext import CellContext
from chaos.orchestrator.faultcontext import RunContext
from chaos.orchestrator.faultthreads import FaultSchedule, failure_text
from chaos.orchestrator.run import Run
from chaos.strategies.delivery.base import GROUP
from chaos.strategies.plan import CONSUMER, PRODUCER, ProcessPlan
from chaos.strategies.presets import Strategy
from chaos.workload import schema
from chaos.workload.final_state import fully_acked, undelivered
from chaos.workload.progress import ProgressWatch

STALL_S = 10.0              # no useful op for this long (plus the longest job, x3) past the bound: stalled
FLOOR_EVENTS_PER_S = 200.0  # the workload's first bound allows at least this slow a run


class Planned:
    """What the phases' bounds need of the planned events (their count, costs, last due time),
    so that the events themselves need not stay in memory through the workload (10^6 events:
    ~240 MB; the check reads the intended events back from a file, sequence.Orchestrated)."""

    def __init__(self, events: list[Event]) -> None:
        self.count = len(events)
        self.longest_ms = max((e.cost_ms for e in events), default=0.0)
        self.cost_ms = sum(e.cost_ms for e in events)
        self.last_at_ms = max((e.at_ms for e in events), default=0)

    @staticmethod
    def of(events: list[Event] | Planned) -> Planned:
        return events if isinstance(events, Planned) else Planned(events)


SEED_CHUNK = 100_000   # keys whose rows one statement creates (in the keys' order, as one statement did)


def plan_workload(strategy: Strategy, seed: int) -> tuple[list[Event], list[ProcessPlan]]:
    """One run's routed events and producer plans (10^5 events: about 0.5 CPU s, so made once per run)."""
    events = strategy.delivery.route(strategy.workload.make_events(random.Random(seed)))
    return events, strategy.producer.plans(events)


def reset(run: Run, events: list[Event]) -> None:
    """The state of the last run gone (truncate + flush), the schema, rows and groups made."""
    cluster = run.cell.cluster
    if getattr(cluster, "failed_over", False):
        cluster.reset()  # a failover changed the topology: the slow, full reset
        run.cell._conn = None
    r = run.cell.redis
    r.flushall()
    guard = run.cell.strategy.guard

    def prepare(conn: Any) -> None:
        schema.ensure_schema(conn)
        if guard.schema:
            conn.execute(guard.schema)
        schema.truncate_all(conn)
        if guard.seeds_rows:   # (in chunks: one statement of 10^6 keys took ~230 MB of this process at once)
            keys = sorted({e.key for e in events})
            for start in range(0, len(keys), SEED_CHUNK):
                schema.seed_rows(conn, keys[start:start + SEED_CHUNK])
    run.cell.pg(prepare)
    for stream in run.cell.streams:
        r.xgroup_create(stream, GROUP, id="0", mkstream=True)


def arm(run: Run, producer_plans: list[ProcessPlan], faults: list[Any], schedule: FaultSchedule) -> None:
    """Consumers (each until it blocks in XREADGROUP), gated producers, faults armed, then t0."""
    cell, workers = run.cell, run.workers
    run.log_op({"run": run.index, "seed": run.seed, "preset": cell.strategy.label()})
    blocked = 0
    for plan in cell.consumer_plans:
        handle = workers.spawn(plan, t0=run.t0)
        blocked += plan.ready_blocked
        if plan.ready_blocked:
            workers.wait_ready(handle, blocked)
    gated = [workers.spawn(plan, t0=0.0, gate=True) for plan in producer_plans if plan.gated]
    workers.wait_gated(gated)
    schedule.start(faults)
    run.t0 = time.monotonic()
    run.log_op({"phase": "workload", "t0": run.t0})
    for handle in gated:
        handle.child.kill(signal.SIGUSR2)  # its t0: the schedule starts now
    for plan in producer_plans:
        if not plan.gated:
            workers.spawn(plan, t0=run.t0)


def fault_schedule(run: Run) -> FaultSchedule:
    """The run's faults, acting through its RunContext; a failure is a reason and a fault error."""
    return FaultSchedule(RunContext(run), lambda fault, exc: fault_failed(run, fault, exc))


def fault_failed(run: Run, fault: Any, exc: BaseException) -> None:
    message = failure_text(fault, exc)
    run.reasons.append(message)
    run.fault_errors.append(message)


def stall_s(run: Run, events: list[Event] | Planned) -> float:
    """How long a healthy run may go without a useful op: the longest job three times
    over, plus slack for a loaded machine."""
    if run.cell.stall_s is not None:
        return run.cell.stall_s
    return STALL_S + 3 * run.cell.time_scale * Planned.of(events).longest_ms / 1000.0


def workload_bound_s(run: Run, events: list[Event] | Planned) -> float:
    """The workload's first bound, from its size: the schedule, the jobs' cost and the
    producer's retries (scaled, three times over), plus a floor rate per event. Past it
    the run goes on for as long as it makes progress (see `Run.watch`)."""
    if run.cell.workload_bound_s is not None:
        return run.cell.workload_bound_s
    producer = run.cell.strategy.producer
    planned = Planned.of(events)
    scheduled = planned.cost_ms + planned.last_at_ms + sum(producer.retry_delays_ms())
    return 20.0 + 3 * run.cell.time_scale * scheduled / 1000.0 + planned.count / FLOOR_EVENTS_PER_S


def consumers_idle(run: Run, watch: ProgressWatch) -> bool:
    """Nothing more happens without a drain: no consumer respawn due, nothing in hand or in
    an apply, nothing undelivered, and every live consumer blocked in XREADGROUP."""
    workers = run.workers
    if workers.respawn_due(CONSUMER):
        return False
    consumers = workers.live(CONSUMER)
    if not consumers:
        return True  # nobody left to do anything
    watch.poll()
    names = workers.live_names()
    if watch.busy(names) or watch.in_hand(names):
        return False
    try:
        r = run.cell.redis.client()
        if undelivered(r, run.cell.streams, GROUP):
            return False
        return workers.blocked_readers(r) >= sum(h.plan.ready_blocked for h in consumers)
    except (redis.ConnectionError, redis.TimeoutError):
        return False  # no primary answers (a failover): not yet


def workload(run: Run, events: list[Event] | Planned) -> None:
    """Until the producers are done and the consumers fully acked (ack after) or idle."""
    cell, watch, workers = run.cell, run.progress, run.workers
    producer = cell.strategy.producer

    def done() -> bool:
        if workers.live(PRODUCER) or workers.respawn_due(PRODUCER):
            return False
        if not cell.pg(producer.drained):
            return False
        if cell.strategy.ack.after and acked_or_none(cell):
            return True
        # acked on receive says nothing about the work: the consumers must be idle too
        return consumers_idle(run, watch)

    stalled = run.watch(done, workload_bound_s(run, events), watch, stall_s(run, events))
    if stalled is not None:
        names = workers.live_names()
        run.reasons.append(f"the workload did not finish within {stalled[0]:.1f} s: no progress for "
                           f"{stalled[1]:.1f} s (producers alive: {[h.name for h in workers.live(PRODUCER)]}; "
                           f"{run.stream_state()}; busy: {watch.busy(names)}; "
                           f"in hand: {watch.in_hand(names)})")
        if not workers.live(PRODUCER) and not workers.respawn_due(PRODUCER):
            run.workload_stall = run.reasons[-1]   # the consumers stalled: the drain judges them


def acked_or_none(cell: CellContext) -> bool | None:
    """fully_acked on the current primary; None (not yet) while it does not answer (a failover)."""
    try:
        return fully_acked(cell.redis.client(), cell.streams, GROUP)
    except (redis.ConnectionError, redis.TimeoutError):
        return None
