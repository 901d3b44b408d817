"""Expected figures for failures teams meet in production (`maxmemory`, `replica-overflow`).

`maxmemory` (noeviction, capped under the memory in use once 10 of the 50 events are in
the stream, the publisher held at its next publish until the cap is on; workload: 10 keys x 5 events, one every 20 ms, so the producer publishes for
about a second, all of it after the cap):

* for 2 s (longer than the retrying producer's retries, at +0.5 s and +1 s), counted from the
  75th refused XADD (3 attempts x 25 events: at least 25 events were tried under the cap by
  then, whatever the load did to the producer): every event first tried under the cap early
  enough is refused three times and dropped (the checker's `dropped`);
  nothing acknowledged is lost and the final state is the highest *published* version, so
  `lost`, `wrong_final_state_runs` and the verdict say all is well while 4 events in 5 are
  gone. A guard cannot help (s5 drops the same); the outbox keeps every row and relays it
  once XADD works again: 0 dropped, 0 lost, right final state (its 2 s count from the relay's
  first refused XADD: the relay polls, so 75 refusals may never come before the run ends).
* for 600 ms from the first refused XADD (shorter than the retries): every refused event gets through at a retry, after
  later versions of its key went out: the plain UPDATE ends wrong, CAS on the business
  version holds. An event refused at the window's start has its last attempt 1 s later, so
  the lift may come 400 ms late (a loaded machine) before anything is dropped; with 1 s it
  was a dead heat, and at load ~13-22 a run dropped 2-8 events.

Both windows count from refusals, not from the cap: at load 25-50 a starved producer published
5 events in a 2 s cap (dropped 5 of the row's >= 25) and none in a 600 ms one (0 refused). And the
cap goes on while the publisher (the producer; the outbox's relay) waits at its before_publish
failpoint after its 10th publish, so it meets the 40 publishes left however late the fault's thread runs.

`replica-overflow` (workload: 20 keys x 5 events, one every 6 ms, 25 ms of work each, so two
consumers read at most 80 a second of the 167 published: a backlog all through; once 40
events are in the stream the replication link is throttled to 256 KB/s, the replica stalls
while 6-20 MB of filler pass its 256 KB output buffer limit, the primary drops it, it resumes
behind the slow link, 300 ms later the link is held, and once the primary is ahead of the
replica and the failover would take back both kinds of work (`until=reread/unread`, read on
both servers) the primary is killed and the replica promoted): every write since the stall
is missing on the new primary, so a run loses the acknowledged events published after the
stall that nobody had read and redelivers processed ones (the group's cursor and acks were
not replicated either); a plain UPDATE applies the copies again, CAS rejects them.
With 10 ms of work the consumers kept up on a quiet CI machine: one run's kill found
everything written since the stall already read (6.2 MB unreplicated, lost 0, a mismatch).
Now the kill waits for an unread acked entry the replica lacks and a processed one it will
hand out again; a run where they never come is `unknown` (the took-back effect). The kill
op's figures foretell the run's: `unread` is the run's `lost`, `read + acked` its
`redelivered` (4 + 4 runs at load 6-8: equal in each, e.g. unread 54 / lost 54).
Measured before (Redis 7.0, loaded 2-core box, 10 ms of work, 4 cell runs of 2 runs each): s1
lost 23-58 a run, s5 0-53; `promote-replica` with its 500 ms hold on the same workload: s1
lost 75 in 2 runs.
"""
from __future__ import annotations

from chaos.expectations.cells import Cell, rows
from chaos.expectations.table import RUNS, each_run, eq, ge
from chaos.workload.rates import BreakRate

WORKLOAD = "many-orders:keys=10,events=5,gap_ms=20"
EVENTS = 50
ATTEMPTS = 3                                               # the retrying producer: first try + retries at +0.5 s, +1 s
# The cap goes on while the publisher waits at its before_publish failpoint after 10 publishes, so
# it always meets the rest (at load 26-36 a starved fault thread once capped after the producer had
# published all 50: nothing refused, the run `unknown`).
AT_PUBLISH = "maxmemory:at=before_publish,after_entries=10"
OOM_LONG = f"{AT_PUBLISH},refused={ATTEMPTS * (EVENTS // 2)}"   # duration_ms=2000 (default)
OOM_RELAYED = f"{AT_PUBLISH},publisher=dispatcher,refused=1"   # 2 s from the relay's first refused XADD
SHORT_MS = 600
OOM_SHORT = f"{AT_PUBLISH},refused=1,duration_ms={SHORT_MS}"
# The producer's retries count from each event's first attempt (+0.5 s, +1 s), so an event refused
# first at the window's start still gets in at its last retry while the cap, from that attempt to
# its lifting, lasts less than LAST_RETRY_MS. A run whose cap lasted longer (the fault's thread
# starved past its 600 ms) and dropped events did not have the window shorter than the retries that
# the 600 ms rows need: `unknown` (suites/production/test_maxmemory.py). While the retries were due
# from the planned time, the producer's wait at its failpoint for the cap was that measure instead
# (the retries of the events due meanwhile came sooner: held 3-75 ms a run at load 20-37; a fault
# thread delayed 1.5 s made it so); it no longer moves them.
LAST_RETRY_MS = 1000
OUTBOX = "p1-per-key:fail_event="                          # the per-key relay without its injected failure
RUN_COUNT = 2
# s1 under OOM_SHORT ends on a wrong final state (a retried older version written last), per
# run: measured with `python -m chaos run --preset s1 --part workload=<WORKLOAD> --fault <OOM_SHORT>
# --runs 16|84 --json`, seeds 1000 and 2000, at load 15-31: 16/16 + 83/84 runs. Run count and
# fraction follow (chaos.workload.rates.BreakRate: a correct framework misses the row with
# probability <= 1e-3).
OOM_SHORT_WRONG = BreakRate(99, 100, floor=RUN_COUNT)
# The retrying producer of the maxmemory rows waits up to 2 s for a reply (the steady producer's
# STEADY_TIMEOUT_MS), not 250 ms: a refusal is an immediate reply, so only a slow one changes, and on a
# loaded machine a slow reply is not the row's business. Beside two CPU hogs (load 8-11) the long-OOM
# s5 row ran at LONG_OOM_SCALE with 125 ms: an XADD due just as the cap went on timed out (128 ms,
# `info`), then was refused twice: indeterminate 1 against the row's 0 (s1 the same once at load 28).
OOM_PRODUCER = "retrying:timeout_ms=2000"
OVERFLOW_WORKLOAD = "many-orders:keys=20,events=5,gap_ms=6,cost_ms=25"
OVERFLOW = "replica-overflow:after_entries=40,at_ms=0,until=reread/unread"

CELLS: list[Cell] = [
    Cell("s1", (OOM_LONG,), RUN_COUNT,
         dict(dropped=each_run(ge(EVENTS // 2)), lost=eq(0), indeterminate=eq(0), wrong_final_state_runs=eq(0),
              verdict="valid"),
         parts={"workload": WORKLOAD, "producer": OOM_PRODUCER},
         note="OOM outlasts the retries: most events dropped, nothing counted lost, the state looks right"),
    Cell("s5", (OOM_LONG,), RUN_COUNT,
         dict(dropped=each_run(ge(EVENTS // 2)), lost=eq(0), indeterminate=eq(0)),
         parts={"workload": WORKLOAD, "producer": OOM_PRODUCER},
         note="a guard cannot bring back an event that never reached the stream"),
    Cell(OUTBOX, (OOM_RELAYED,), RUN_COUNT,
         dict(dropped=eq(0), lost=eq(0), indeterminate=eq(0), published=eq(EVENTS * RUNS),
              wrong_final_state_runs=eq(0)),
         parts={"workload": WORKLOAD},
         note="the outbox holds the rows through the OOM and relays them all, in key order"),
    Cell("s1", (OOM_SHORT,), OOM_SHORT_WRONG.runs,
         dict(dropped=eq(0), lost=eq(0), indeterminate=eq(0), published=eq(EVENTS * RUNS), reordered=each_run(ge(1)),
              wrong_final_state_runs=each_run(ge(1), rate=OOM_SHORT_WRONG)),
         parts={"workload": WORKLOAD, "producer": OOM_PRODUCER},
         note=f"OOM shorter than the retries: every event gets in, retried ones after later versions "
              f"(a wrong final state's rate: {OOM_SHORT_WRONG})"),
    Cell("s5", (OOM_SHORT,), RUN_COUNT,
         dict(dropped=eq(0), lost=eq(0), indeterminate=eq(0), published=eq(EVENTS * RUNS), reordered=eq(0),
              wrong_final_state_runs=eq(0)),
         parts={"workload": WORKLOAD, "producer": OOM_PRODUCER},
         note="same: CAS on the business version rejects the late older versions"),
]

OVERFLOW_CELLS: list[Cell] = [
    Cell("s1", (OVERFLOW,), RUN_COUNT,
         dict(lost=each_run(ge(1)), redelivered=each_run(ge(1)), duplicated=each_run(ge(1))),
         parts={"workload": OVERFLOW_WORKLOAD},
         note="failover while the dropped replica resyncs: writes since the stall lost, processed entries back"),
    Cell("s5", (OVERFLOW,), RUN_COUNT,
         dict(lost=each_run(ge(1)), redelivered=each_run(ge(1)), duplicated=eq(0), projection_drift=eq(0),
              reordered=eq(0)),
         parts={"workload": OVERFLOW_WORKLOAD},
         note="same loss; CAS rejects the redelivered copies and the retried older versions"),
]
CELLS += OVERFLOW_CELLS
ROWS = rows(CELLS)
