"""promote-replica's heal against a fault that is still running (the run ended and the heal's
bound passed while the fault waited), on the real topology: whatever the interleaving, the run
ends with one primary that answers, and the fault acts on nothing after its heal.

The interleavings are forced, not timed: the fault's context holds it in the sleep after the
step named (the hold, or the kill) until the test has healed it (faults/failover_steps.py).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

import pytest

from faults import get_fault
from faults.interface import FaultError
from faults.local import FaultThread, LocalContext

SPEC = "promote-replica:after_entries=0,at_ms=0,hold_ms=50,downtime_ms=50"


@dataclass
class HeldAfter(LocalContext):
    """A LocalContext whose first sleep after the op of step `step` waits for `go`."""

    step: str = "hold"
    there: threading.Event = field(default_factory=threading.Event)
    go: threading.Event = field(default_factory=threading.Event)

    def sleep(self, ms: float) -> bool:
        if self.ops and self.ops[-1]["value"].get("step") == self.step and not self.there.is_set():
            self.there.set()
            self.go.wait(30)
        return super().sleep(ms)


def heal_while_held(ctx: HeldAfter) -> FaultThread:
    """Start the fault, and once it waits after `ctx.step`, end the run and join it with a bound
    that passes at once: the heal runs while the fault is still on its way."""
    thread = FaultThread(get_fault(SPEC), ctx).start()
    assert ctx.there.wait(20), f"the fault never reached the step after {ctx.step}: {ctx.ops}"
    ctx.stop_event.set()
    with pytest.raises(FaultError, match="still running"):
        thread.join(timeout_s=0.05)
    return thread


def released(ctx: HeldAfter, thread: FaultThread) -> None:
    ctx.go.set()
    thread.thread.join(30)
    assert not thread.thread.is_alive(), "the fault did not end once released"


def test_a_heal_before_the_kill_ends_the_fault_there(cluster) -> None:
    # Before: the fault went on after its heal and killed the primary then, while the run read
    # its final state (the loaded runs' rig failure "Connection refused" to the old primary).
    primary = str(cluster.primary)
    ctx = HeldAfter(cluster, seed=1, step="hold")
    try:
        thread = heal_while_held(ctx)
    finally:
        ctx.go.set()
    released(ctx, thread)
    steps = [op["value"].get("step") for op in ctx.ops]
    assert "kill" not in steps, f"the fault killed after its heal: {ctx.ops}"
    assert isinstance(thread.error, FaultError) and "healed before its kill" in str(thread.error), thread.error
    assert str(cluster.primary) == primary and not cluster.failed_over
    assert cluster.direct_redis().ping()


def test_a_heal_after_the_kill_promotes_once_and_the_fault_finishes(cluster) -> None:
    # Before: the heal promoted, then the fault promoted again, REPLICAOF NO ONE on the node it
    # had killed (ConnectionError: the fault "did not act", the run unknown).
    old = str(cluster.primary)
    ctx = HeldAfter(cluster, seed=2, step="kill")
    try:
        thread = heal_while_held(ctx)
        assert cluster.failed_over and str(cluster.primary) != old, "the heal did not promote the replica"
        promoted = str(cluster.primary)
    finally:
        ctx.go.set()
    released(ctx, thread)
    assert thread.error is None, thread.error
    assert str(cluster.primary) == promoted and cluster.direct_redis().ping()
    steps = [op["value"].get("step") for op in ctx.ops]
    assert steps == ["hold", "kill", "heal", "promote"], ctx.ops     # the heal's promotion is in the history
    assert ctx.ops[2]["value"]["promoted"] and ctx.ops[-1]["value"]["new_primary"] == promoted
