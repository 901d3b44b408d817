"""Expected figures for delivery under a consumer crash (kill-consumer) and poison jobs.

Invariants, not the reference's machine-dependent 352: ack on receive loses exactly what
was delivered and not done (nothing is left to recover); ack after loses nothing and
leaves exactly that recoverable (pending, or recovered by XAUTOCLAIM in the drain).
"""
from __future__ import annotations

from chaos.expectations.cells import Cell, rows
from chaos.expectations.table import RUNS, each_run, eq, ge, satisfies

# SIGKILL once the consumer is seen holding entries it read (faults/kill_consumer.py at=holding: its
# group shows a read that handed it entries, then them in its PEL 30 ms, ack after, or acked on receive
# and the consumer stopped within 30 ms of the read, held_ms scaled), checked with the consumer
# stopped. By time (1.2 s after the first publish, the reference's) loaded runs' kills landed when
# the consumer had been handed 1-3 jobs a run and had done them (ack-after: in_flight failed with
# 2 of 4,000 delivered; ack-on-receive: a run lost 0): nothing was in its hand. `delivered`:
# only a read once the group handed out 100 entries counts, so the victim's read is a batch, not
# the first entry or two of a producer just starting (the consumer reads them at once and can be
# done with a two-entry read before the look stops it: an ack-on-receive kill that loses nothing).
KILL = "kill-consumer:at=holding,delivered=100"
# The kill cells run at this time scale at most: jobs 2.5 ms. A run is the 2000 jobs' cost (a
# respawned consumer works off the rest: 17.5 s at scale 1, 9.2 s at 0.5, load 8); the failpoint
# kills are forced.
TIME_SCALE = 0.5
# The respawn cells' runs go on after the kill until the restarted consumer has done every job:
# under load each job's own work (its UPDATE, XACK and history lines), not its 5 ms, sets the
# length (a cell of 2 runs of 2000 jobs: 67 s beside a loaded suite, load 30). They show the
# PEL recovered whatever follows it, so they run 600 jobs: the kill still comes in the first
# 500-entry batches (once the victim holds a read of a group that handed out 100, or at the 101st
# write), with up to 500 in its PEL; what follows it is the rest of the 600, not of 1000 (the
# restarted consumer's work, the run's length, is the PEL and those).
RESPAWN_PARTS = {"workload": "bulk:jobs=600,cost_ms=5"}



def handed_out_not_done(c) -> int:
    """Entries Redis handed to the consumer (the group cursor passed them) and not handled."""
    return c.counts.published - c.counts.undelivered - c.counts.handled


LOSES_IN_FLIGHT = satisfies(lambda c: c.counts.lost == handed_out_not_done(c) > 0,
                            "lost == published - undelivered - handled > 0 (all delivered and not done is gone)")
KEEPS_IN_FLIGHT = satisfies(
    lambda c: c.run_count <= handed_out_not_done(c) <= c.counts.pending_left <= handed_out_not_done(c) + c.run_count,
    "published - undelivered - handled <= pending_left <= that + runs (all delivered and not done "
    "stays recoverable in the PEL, plus at most the one entry per kill applied but not yet acked)")

CELLS: list[Cell] = [
    Cell("ack-on-receive", (KILL,), 2,
         dict(lost=each_run(ge(1)), in_flight=LOSES_IN_FLIGHT),
         note="ack on receive: the in-flight batch is gone with the consumer (0 recoverable)"),
    Cell("ack-after", (KILL,), 2,
         dict(lost=eq(0), indeterminate=eq(0), recovered=eq(0), in_flight=KEEPS_IN_FLIGHT),
         note="ack after processing: the in-flight batch stays in the PEL"),
    Cell("poison-no-dlq", ("poison:key=j7",), 1,
         dict(pending_left=eq(11 * RUNS), lost=eq(0), indeterminate=eq(0)),
         note="one more poison job (key j7) beside the workload's 10: 11 stay pending"),
    Cell("poison-dlq", ("poison:key=j7",), 1,
         dict(dlq=eq(11 * RUNS), pending_left=eq(0), lost=eq(0), indeterminate=eq(0)),
         note="one more poison job (key j7): 11 go to the DLQ after 3 attempts, none pending"),
    Cell("ack-on-receive", ("kill-consumer:at=mid_batch,after=250",), 2,
         dict(lost=each_run(ge(1)), in_flight=LOSES_IN_FLIGHT),
         note="killed by its own failpoint after 250 entries of a batch: the rest of the batch is gone"),
    # the failpoint forces the kill at the same write every run: one run shows it
    Cell("ack-after:respawn=1", ("kill-consumer:at=after_apply_before_ack,after=100",), 1,
         dict(lost=eq(0), indeterminate=eq(0), pending_left=eq(0), duplicated=eq(RUNS), recovered=each_run(ge(1))),
         parts=RESPAWN_PARTS,
         note="killed after its 101st DB write, before the XACK: that entry is redelivered and its "
              "plain effect applied twice (exactly one per run); the rest of the PEL is recovered"),
    Cell("ack-after:respawn=1", (KILL,), 2,
         dict(lost=eq(0), indeterminate=eq(0), pending_left=eq(0), recovered=each_run(ge(1))),
         parts=RESPAWN_PARTS,
         note="ack after, the consumer restarted under its name: its PEL is recovered"),
]
KILL_CELLS = [c for c in CELLS if c.faults[0].startswith("kill-consumer")]   # by holding or at a failpoint
POISON_CELLS = [c for c in CELLS if c.faults[0].startswith("poison")]
ROWS = rows(CELLS)
