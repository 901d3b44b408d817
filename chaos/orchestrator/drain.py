"""The drain phase (recovery after the heal) and what the drain's end explains: `drain_end`
names why it ended, `live_consumers` who was live when it ended without progress (the
consumers' liveness, judged by the checker as `stopped-consuming`), and `leftovers` turns
entries nothing explains into a reason."""
from __future__ import annotations

import signal
import time

import redis

from chaos.events import Event
from chaos.orchestrator.phases import Planned, acked_or_none, consumers_idle, stall_s
from chaos.orchestrator.run import Run
from chaos.results import FinalState
from chaos.strategies.delivery.base import GROUP
from chaos.strategies.plan import CONSUMER, PRODUCER
from chaos.workload.final_state import pending_entries


def drain(run: Run, events: list[Event] | Planned) -> None:
    """Recovery: consumers run XAUTOCLAIM until everything is acked, or until every entry
    still pending was claimed again in the drain and failed again (a poison entry)."""
    cell, watch, workers = run.cell, run.progress, run.workers
    if acked_or_none(cell) and cell.pg(cell.strategy.producer.drained):
        run.drain_end = "acked"
        return
    run.log_op({"phase": "drain"})
    for handle in workers.live(CONSUMER):
        handle.drain_signalled = True
        handle.child.kill(signal.SIGCONT)
        handle.child.kill(signal.SIGUSR1)
    began = time.monotonic()
    claims = cell.strategy.delivery.claim != "never"
    # with max_attempts every failing entry reaches the DLQ in the end: wait for it
    final_when_failed = not cell.strategy.ack.max_attempts

    def drained() -> bool:
        for handle in workers.live(CONSUMER):
            if not handle.drain_signalled:
                handle.drain_signalled = True  # a respawned consumer joins the drain
                handle.child.kill(signal.SIGUSR1)
        if acked_or_none(cell) and cell.pg(cell.strategy.producer.drained):
            run.drain_end = "acked"
            return True
        if not workers.live(CONSUMER) and not workers.respawns:
            run.drain_end = "nobody left"
            return True  # nobody left to recover anything: report what is pending
        if not consumers_idle(run, watch) or not cell.pg(cell.strategy.producer.drained):
            return False
        if not claims:
            run.drain_end = "no claims"
            return True  # nobody will claim what is pending: report it
        try:
            pending = pending_entries(cell.redis.client(), cell.streams, GROUP)
        except (redis.ConnectionError, redis.TimeoutError):
            return False
        if final_when_failed and all(watch.failed_since(entry, began) for entry in pending):
            run.drain_end = "failed again"
            return True
        return False

    idle = cell.time_scale * cell.strategy.delivery.claim_idle_ms / 1000.0
    bound = max(10.0, 10 * idle + 30 * cell.time_scale)
    if cell.workload_bound_s is not None:
        bound = min(bound, cell.workload_bound_s)
    stalled = run.watch(drained, bound, watch, stall_s(run, events) + 2 * idle)
    if stalled is not None:
        run.drain_end = "timed out"
        run.live_consumers = live_consumers(run)
        live = (f"; consumers {', '.join(run.live_consumers)} were live and every fault had healed: what "
                f"they left unconsumed is theirs (stopped-consuming)") if run.live_consumers else ""
        run.reasons.append(f"the drain timed out after {stalled[0]:.1f} s: no progress for "
                           f"{stalled[1]:.1f} s ({run.stream_state()}){live}")
        run.log_op({"phase": "drain-end", "drain_end": run.drain_end, "live_consumers": run.live_consumers,
                    "no_progress_s": round(stalled[1], 3)})


def drainable(run: Run) -> bool:
    """Whether the drain runs: on a sound rig, when nothing went wrong but unexpected worker
    deaths, or a workload that stalled with its producers done (the consumers stopped: the
    drain then asks them to recover, and judges their liveness if they do not)."""
    if run.rig.failed.is_set():
        return False
    return all("died unexpectedly" in r or r == run.workload_stall for r in run.reasons)


def live_consumers(run: Run) -> list[str]:
    """The consumers alive at the drain's end, when nothing of the rig's stood between them
    and their work (no rig failure, every fault acted and healed, the producers done, no
    worker died unexpectedly, nothing went wrong but the stall): then what still waits in
    Redis was left by them. Else [] (the run cannot vouch for their liveness)."""
    workers = run.workers
    if run.rig.failures or run.rig.check(deep=True) or run.fault_errors:
        return []
    if workers.live(PRODUCER) or workers.respawn_due(PRODUCER) or workers.respawn_due(CONSUMER):
        return []
    if any(r != run.workload_stall for r in run.reasons):
        return []
    return sorted(h.name for h in workers.live(CONSUMER))


def leftovers(run: Run, final: FinalState) -> list[str]:
    """A run ends valid or invalid only when the drain reached a state the preset and faults
    explain: nothing undelivered, and pending entries only where nobody was left to claim
    them (every consumer gone by a configured kill), nobody claims (claim=never) or each
    failed again in the drain (a poison entry). Else a reason naming what was left."""
    if not final.undelivered and not final.pending:
        return []
    left = []
    if final.undelivered and run.drain_end != "nobody left":
        left.append(f"{len(final.undelivered)} undelivered")
    if final.pending and run.drain_end not in ("nobody left", "no claims", "failed again"):
        left.append(f"{len(final.pending)} pending")
    if not left:
        return []
    return [f"the run ended with {' and '.join(left)} entries that nothing explains "
            f"(the drain ended: {run.drain_end or 'not run'}; {run.stream_state()})"]
