"""Expected figures for operational incidents job-library users report: the consumer group
lost with its stream (`group-loss`), a consumer deleted with entries pending
(`delete-consumer`), a job that outlives the claim idle time (`long-job`).

`group-loss` (workload: 10 keys x 5 events, one every 20 ms, so about a second of
publishing; the stream key is deleted as an `allkeys-lru` eviction would, once 10 entries
are in). The evict rows force the schedule (`window=10`): the consumers (caught up, in the
steady rows) are stopped across the loss, the producer publishes 10 events into the stream without a
group and waits until the group is back (or the consumer left). What the policy `on_nogroup`
does then decides the damage: `fail` (exit) loses all 40 events published after the loss,
`recreate-from-$` the window's 10 (fewer only where a publish attempt in it failed and was
retried: suites/operations checks each run's count against the events the window held),
`recreate-from-0` none. Timed by the
consumer's 200 ms back-off instead, `recreate-from-$` lost about 10 a run on a quiet machine
and 37 beside two CPU hogs (a starved consumer recreated the group late). With a backlog
at the loss (`catch_up=false`: each consumer stopped with its first entry in hand, 20 entries
in), what was published and not yet read vanishes for every strategy, outbox and CAS
included: the checker names those events `stream-lost`.
`how=restart-empty` (the primary SIGKILLed and started with no data) does the same, forced
the same way: the restart falls inside the window, while nobody publishes (timed, a restart
that took 1.23 s beside two CPU hogs outlasted the retrying producer's retries: 9 of 100
events given up).

`delete-consumer` (XGROUP DELCONSUMER, as a clean-up script of "idle" consumers does):
of a dead consumer (SIGKILLed, deleted at once) its pending entries are gone for good
(`pel-dropped`), while the same kill without the deletion loses nothing (the survivor
claims them in the drain). The kill is forced: C1 stops at its `before_apply` failpoint
with an entry it has not applied (killed from outside at a moment its PEL held one, it had
applied it already in both runs of a loaded run, and the deletion lost nothing). Deleted while alive, it finishes and acks what it holds (the
XACKs match no PEL entry) and reads on: nothing lost. No preset here keeps its own
record of what it read, so the outbox + inbox preset loses the dropped entries as well.

`long-job` (the `pair` workload's order 42: `created` stops in its work until another
consumer has claimed it, past the group's 1 s XAUTOCLAIM min-idle time, both consumers claiming
all along): the other consumer claims it and runs it while the first still does. Plain UPDATE and a Redis
marker set after the effect (`setnx-dedupe:mark=after`) apply it twice (a `duplicated`
whose detail gives the two runs' overlap); CAS, the inbox and a marker set before the work
apply it once. With `claimers=2` (3 consumers, min-idle 100 ms) it is claimed twice and
runs three times.
"""
from __future__ import annotations

from chaos.expectations.cells import Cell, rows
from chaos.expectations.table import RUNS, between, each_run, eq, ge, satisfies

RUN_COUNT = 2
EVENTS = 50

# -- group-loss ---------------------------------------------------------------------------
STEADY = "many-orders:keys=10,events=5,gap_ms=20"                # consumers keep up
BACKLOG = "many-orders:keys=10,events=5,gap_ms=5,cost_ms=20"     # a backlog builds up
SKIPPED = 10    # events published into the stream without a group, between the loss and the recreate
EVICT_WINDOW = f"group-loss:after_entries=10,at_ms=0,window={SKIPPED}"
# Evicted with a backlog, forced: the producer (an outbox preset's relay) stops after 20 XADDs and
# each consumer before applying its first entry (no catch-up), so the loss meets unread entries and
# the consumers must meet NOGROUP. Timed (once 20 entries were in), beside two CPU hogs a run met no
# NOGROUP at all (s1); with the consumers stopped from outside once the relay had stopped, one met no
# backlog (p1-per-key: stream-lost 1 in 2 runs: its consumer had kept up with a slow relay).
EVICT_BACKLOG = f"group-loss:after_entries=20,at_ms=0,window={SKIPPED},catch_up=false"
EVICT_BACKLOG_RELAYED = EVICT_BACKLOG + ",publisher=dispatcher"
RESTART = f"group-loss:how=restart-empty,after_entries=10,at_ms=0,window={SKIPPED}"


def _kind(c, kind: str) -> int:
    return int(c.anomaly_counts.get(kind, 0))


def after_loss(low: int, high: int | None = None):
    """Lost events that had not vanished with the stream (published after the loss), per run."""
    text = f"lost events published after the loss >= {low} per run" + (f", <= {high} per run" if high else "")
    return satisfies(lambda c: low * c.run_count <= _kind(c, "lost") <= (high or 10**9) * c.run_count, text)


STREAM_LOST = satisfies(lambda c: _kind(c, "stream-lost") >= c.run_count and c.counts.lost >= _kind(c, "stream-lost"),
                        "stream-lost >= runs (events unprocessed at the loss vanished with the stream)")
NOTHING_VANISHED = satisfies(lambda c: _kind(c, "stream-lost") == 0,
                             "stream-lost == 0 (the consumers had caught up at the loss)")
NOTHING_AFTER = satisfies(lambda c: _kind(c, "lost") == 0, "no event published after the loss is lost")

# A fault here applies no event twice. The retrying producer may: a publish whose reply took longer
# than its 250 ms timeout (a loaded box) is retried and lands as a second entry, which a plain
# UPDATE applies again (measured beside two CPU hogs, load ~25: 1 run of 16, e4-1's first reply
# timed out, both entries applied: duplicated 1, projection_drift 1). Such copies are the
# producer's, counted in duplicate_entries; a copy of one entry (what a deletion or a recreate could cause)
# is not, and fails the row.
NO_COPY = satisfies(lambda c: max(c.counts.duplicated, c.counts.projection_drift) <= c.counts.duplicate_entries,
                    "duplicated, projection_drift <= duplicate_entries (an event applied twice only when the "
                    "producer published it twice)")

GROUP_LOSS: list[Cell] = [
    Cell("s1:on_nogroup=fail", (EVICT_WINDOW,), RUN_COUNT, dict(after=after_loss(25), verdict="invalid"),
         parts={"workload": STEADY},
         note="ag2ai/faststream#2611: the consumer gives up on NOGROUP; every event published after "
              "the eviction stays in a stream without a group (measured 40 a run)"),
    Cell("s1:on_nogroup=recreate-from-$", (EVICT_WINDOW,), RUN_COUNT,
         dict(after=after_loss(1, SKIPPED), vanished=NOTHING_VANISHED),
         parts={"workload": STEADY},
         note="flightctl/flightctl#2227: recreated from $ (after its back-off), it skips what was published "
              "meanwhile: the events of the forced window (10 publishes), every run, and reads on"),
    Cell("s1:on_nogroup=recreate-from-0", (EVICT_WINDOW,), RUN_COUNT,
         dict(after=NOTHING_AFTER, no_copy=NO_COPY, published=eq(EVENTS * RUNS)),
         parts={"workload": STEADY},
         note="redis/redis#6576: recreated from 0, it reads everything published since the eviction "
              "(measured lost 0)"),
    # 40 orders x 3 events (sent twice), not the preset's 200: the window forces NOGROUP on each shard's
    # consumer either way (6 of 6 runs met it, lost 0, 9.4 s against 18.6 s with 200 orders)
    Cell("recommended", (EVICT_WINDOW,), RUN_COUNT,
         dict(after=NOTHING_AFTER, duplicated=eq(0), projection_drift=eq(0), reordered=eq(0)),
         parts={"workload": "many-orders:keys=40,events=3,resend=1"},
         note="redis/redis#6576 on the recommended preset (4 shards, recreate-from-0, inbox + CAS): its "
              "consumers recreate each shard's group and read on (measured lost 0 in 2 runs; timed, a run "
              "beside CPU hogs at load 28 met no NOGROUP, so the window forces it too)"),
    Cell("s1:on_nogroup=recreate-from-0", (EVICT_BACKLOG,), RUN_COUNT, dict(vanished=STREAM_LOST),
         parts={"workload": BACKLOG},
         note="redis/redis#8842: evicted with a backlog: the unprocessed entries vanish with the stream "
              "(measured 38 lost in 2 runs: the 19 unread of each run)"),
    Cell("s5:on_nogroup=recreate-from-0", (EVICT_BACKLOG,), RUN_COUNT, dict(vanished=STREAM_LOST, reordered=eq(0)),
         parts={"workload": BACKLOG},
         note="redis/redis#8842: CAS cannot bring back an entry that vanished (measured 36 lost in 2 runs: "
              "two consumers, 18 unread a run)"),
    Cell("p1-per-key:fail_event=,on_nogroup=recreate-from-0", (EVICT_BACKLOG_RELAYED,), RUN_COUNT,
         dict(vanished=STREAM_LOST),
         parts={"workload": BACKLOG},
         note="redis/redis#8842: the outbox marked the rows published at XADD, so it never relays them "
              "again (measured 38 lost in 2 runs)"),
    Cell("s1:on_nogroup=recreate-from-0", (RESTART,), RUN_COUNT,
         dict(after=NOTHING_AFTER, published=eq(EVENTS * RUNS)),
         parts={"workload": STEADY},
         note="eggai-tech/EggAI#204: Redis restarted without persistence (inside the forced window); recreated "
              "from 0, the consumer reads what the producer published into the empty server (measured lost 0)"),
]

# -- delete-consumer ----------------------------------------------------------------------
# both consumers always hold one entry: a job (60 ms, 30 after CI's 0.5 scale) outlasts the gap between
# two publishes. At 40 ms a loaded run (two CPU hogs, load 10-12) left C1 short of the 10 entries
# before its failpoint in both at=before_apply cells (the fault never fired): the slower job keeps
# the survivor from working the stream off alone
BUSY = "many-orders:keys=10,events=5,gap_ms=20,cost_ms=60"
DELETE_DEAD = "delete-consumer:target=C1,at=before_apply,after=10"
DELETE_ALIVE = "delete-consumer:when=alive,target=C1,after_entries=10,at_ms=0"
PEL_DROPPED = satisfies(lambda c: c.counts.lost >= 1 and _kind(c, "pel-dropped") == c.counts.lost,
                        "lost >= 1, every lost event pel-dropped")
DELETE: list[Cell] = [
    Cell("baseline", (DELETE_DEAD,), RUN_COUNT, dict(dropped_pel=PEL_DROPPED, no_copy=NO_COPY), parts={"workload": BUSY},
         note="redis/redis#9745: C1 killed (at its failpoint, an entry read and not applied) and deleted by a "
              "clean-up script: the entry it held is never claimed (measured 1 a run)"),
    Cell("baseline", ("kill-consumer:target=C1,at=before_apply,after=10",), RUN_COUNT,
         dict(lost=eq(0), indeterminate=eq(0), pending_left=eq(0)),
         parts={"workload": BUSY},
         note="the same kill without the deletion: the survivor claims C1's entry in the drain"),
    Cell("baseline", (DELETE_ALIVE,), RUN_COUNT, dict(lost=eq(0), indeterminate=eq(0), no_copy=NO_COPY),
         parts={"workload": BUSY},
         note="ThreeDotsLabs/watermill-redisstream#24: deleted while it works, C1 finishes its entry "
              "(its XACK matches nothing) and its next read makes it again: nothing lost"),
    # 600 jobs, not the preset's 2000: the kill comes in the first 500-entry batch either way, what
    # follows the restart is the rest of the jobs' work (1000 -> 600: 4.7 / 6.5 s -> 2.5 / 2.7 s, -n 0)
    Cell("ack-after:respawn=1", ("delete-consumer:at_ms=1200",), 1, dict(dropped_pel=PEL_DROPPED),
         parts={"workload": "bulk:jobs=600,cost_ms=5"},
         note="redis/redis#9745: the consumer killed 1.2 s into its 500-entry batch and deleted before "
              "its restart reads its PEL: the batch's unprocessed entries are lost (measured 644 in 2 runs of 1000 jobs, "
              "314 and 439 in a run of 600)"),
]

# -- long-job -----------------------------------------------------------------------------
# a 1 s min-idle: the holder must reach the long job's `in_work` before the claimer may take it
# (with 300 ms, a holder starved 0.53 s beside two CPU hogs was claimed from before its long run
# began: no claim in the fault's window, the run unknown)
CLAIMING = "claim=always,claim_idle_ms=1000"
TWO_CLAIMING = "group:consumers=2,claim=always,claim_idle_ms=1000"
# until another consumer claimed it and the claimer's run has begun: the claim is forced, not timed
# (the claimer's XAUTOCLAIM had to land inside a 1.5 s sleep; a loaded machine could miss it).
# duration_ms=100: the first run lasts until the claim anyway (the 1 s min-idle and a claim round),
# and the last run, whom nobody claims from, needs only to have begun inside the first (it stops at
# in_work before the first is resumed): it stops 100 ms, not 1.5 s, of nobody doing anything
LONG = "long-job:event_id=e42-1,duration_ms=100,until_claimed=1"
# the inbox and marker presets send every event twice; here once, so the long job's second run is
# the claimed one (two copies read by the two consumers at once, under load, ran long side by side
# and nobody claimed: the claim the cell is about did not happen)
# `created` costs 100 ms, not the pair's 800: the cost is spent after `in_work`, once per run of the
# job (up to three on a run's critical path, the stop waiting for the last), and the runs overlap
# by the fault's stop at `in_work` (resumed only once claimed), whatever the cost
LONG_PAIR = "pair:created_ms=100"
ONE_COPY = {"delivery": TWO_CLAIMING, "workload": LONG_PAIR}
TWICE = dict(duplicated=each_run(ge(1)), redelivered=each_run(ge(1)))   # the long job applied twice in every run

LONG_JOB: list[Cell] = [
    Cell(f"baseline:{CLAIMING}", (LONG,), RUN_COUNT, dict(**TWICE, lost=eq(0), indeterminate=eq(0)),
         parts={"workload": LONG_PAIR}, note="celery/celery#2599: plain UPDATE: the claimed copy runs beside the first, both apply "
              "(measured 2 duplicated in 2 runs)"),
    Cell(f"s5:{CLAIMING}", (LONG,), RUN_COUNT,
         dict(duplicated=eq(0), projection_drift=eq(0), redelivered=each_run(ge(1)), wrong_final_state_runs=eq(0),
              reordered=eq(0)),
         parts={"workload": LONG_PAIR}, note="celery/celery#3270: CAS: the second run's write matches 0 rows"),
    Cell("inbox", (LONG,), RUN_COUNT, dict(duplicated=eq(0), projection_drift=eq(0), redelivered=each_run(ge(1))),
         parts=ONE_COPY,
         note="celery/celery#9882: the inbox row commits with the effect: the second run is a duplicate"),
    Cell("setnx-dedupe:mark=after", (LONG,), RUN_COUNT, dict(TWICE),
         parts=ONE_COPY,
         note="celery/celery#2599: a Redis marker set after the effect: both runs pass the check first"),
    Cell("setnx-dedupe", (LONG,), RUN_COUNT, dict(duplicated=eq(0), projection_drift=eq(0),
                                                   redelivered=each_run(ge(1))),
         parts=ONE_COPY,
         note="the marker SET NX before the work: the claimed copy sees it (it would lose the job on a crash)"),
    Cell("baseline:consumers=3,claim=always,claim_idle_ms=100", ("long-job:event_id=e42-1,duration_ms=100,claimers=2,until_claimed=1",),
         RUN_COUNT, dict(duplicated=each_run(ge(1)), redelivered=each_run(ge(2)), projection_drift=each_run(ge(2))),
         parts={"workload": LONG_PAIR},
         note="redis/redis#13956: three consumers claiming with a 100 ms min-idle hand the job on twice: "
              "it runs three times (measured projection drift 2 a run; 3 in a loaded run, where paid's "
              "50 ms job outlived the 100 ms min-idle too and was applied twice)"),
]

CELLS: list[Cell] = GROUP_LOSS + DELETE + LONG_JOB
ROWS = rows(CELLS)
