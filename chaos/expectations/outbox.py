"""Expected figures for the transactional outbox, its dispatchers and the consumer inbox.

Workload of the p1 presets: two orders (keys 1 and 2 play the reference's #42 and #43),
`created` then `paid` each, written by the service in one transaction with their outbox
rows; one S1 consumer with a plain UPDATE, so the stream order *is* the final state.

* naive dispatcher, e1-1's publish fails twice: it skips the row, e1-2 overtakes it, and
  the late `created` is applied last: key 1 ends `created` (wrong) every run, key 2 `paid`.
  The overtaking is forced: the dispatcher pauses before e1-1's first try until e1-2 is
  written, so e1-2 is there to be relayed in the round that skips e1-1 (unforced, a loaded
  run's service wrote e1-2 only after e1-1's second failed round: reordered in 2 of 3 runs).
* per-key dispatcher, same failure: key 1 waits (about 2 poll rounds), both end `paid`.
* a dispatcher SIGKILLed between XADD and the mark: the row goes out again, so every run
  has at least one duplicate entry (exactly one unless an XADD reply also times out on a
  loaded machine: the relay is at-least-once, so the bound is >= runs). With a plain UPDATE the effect is applied twice
  (duplicated, projection drift); with the inbox it is applied once. Per-key order holds
  (the duplicate comes before the key's next row).
* 3 parallel dispatchers (4 orders x 5 events), the one holding e1-1 stalls before its
  XADD until the other two have sent e1-2..e1-5 (naive row claims let them), so key 1 ends
  `created` every run; one naive dispatcher with the same stall only waits (the break is
  the parallelism); per-key dispatchers skip the locked key. Killing one per-key
  dispatcher between XADD and mark leaves one duplicate entry, in order.
* the reply of a dispatcher's XADD lost on its link (publish-blip, downstream): Redis has
  the entry, the dispatcher does not know (`publish info`) and relays the row again; the
  inbox keeps the effect single, a plain UPDATE applies it twice.
* a service transaction that rolls back (e2-2): neither row exists, nothing is published,
  key 2 ends `created`, which is right (its highest *published* version).
"""
from __future__ import annotations

from chaos.expectations.cells import Cell, rows
from chaos.expectations.table import RUNS, each_run, eq, ge

KILL_AT_MARK = "kill-dispatcher"                      # at=after_xadd_before_mark, first row
# The reply of dispatcher-1's first XADD is dropped on its own link (Redis has the entry,
# the dispatcher records `publish info` and does not mark the row): a real network cause
# of "the relay sends twice".
REPLY_LOST = "publish-blip:target=dispatcher-1,stream=downstream,at=before_publish,duration_ms=300"
RUN_COUNT = 3
# e1-1's holder stalls until the other two dispatchers have published key 1's four later rows (at most
# 10 s): the overtaking is forced, not timed (a 3 s stall by the clock let a loaded machine's service
# and dispatchers fall behind)
NAIVE_N = "p1-naive-n:stall_until_later=4,stall_ms=10000"
# Where nobody can overtake (one dispatcher; per-key locks), the holder stalls until key 1's four later
# rows are written and the other dispatchers have published every other key's row written so far: the
# rows to overtake with were there and the others had their rounds, so the order held on a condition.
# It was the preset's 3 s by the clock (most of each run: workload 3.3 s, now ~0.4 s).
HELD = "stall_until_written=4,stall_ms=10000"

HOLDS = dict(wrong_final_state_runs=eq(0), reordered=eq(0), lost=eq(0), indeterminate=eq(0))
# e1-1's dispatcher waits before its first (failing) try until key 1's later row is written (at most
# 10 s): the round that skips e1-1 finds e1-2, so paid overtakes created every run by a condition
NAIVE = "p1-naive:stall_event=e1-1,stall_until_written=1,stall_ms=10000"

CELLS: list[Cell] = [
    Cell(NAIVE, (), RUN_COUNT,
         dict(wrong_final_state_runs=eq(RUNS), wrong_keys=eq(RUNS), reordered=eq(RUNS), lost=eq(0), indeterminate=eq(0),
              published=eq(4 * RUNS), duplicate_entries=eq(0)),
         note="naive: the failed created is skipped, paid (written before its first try) overtakes it, "
              "key 1 ends created"),
    Cell("p1-per-key", (), RUN_COUNT,
         dict(**HOLDS, published=eq(4 * RUNS), duplicate_entries=eq(0)),
         note="per-key: the failed created blocks only key 1; both end paid"),
    Cell("p1-per-key:rollback=e2-2", (), RUN_COUNT,
         dict(**HOLDS, published=eq(3 * RUNS)),
         note="the service rolls back e2-2 after writing both rows: it never existed"),
    Cell("p1-per-key", (KILL_AT_MARK,), RUN_COUNT,
         dict(**HOLDS, duplicate_entries=each_run(ge(1)), duplicated=each_run(ge(1)),
              projection_drift=each_run(ge(1))),
         note="crash between XADD and mark: the row is sent twice; plain applies it twice"),
    Cell("p1-inbox", (KILL_AT_MARK,), RUN_COUNT,
         dict(**HOLDS, duplicate_entries=each_run(ge(1)), redelivered=each_run(ge(1)), duplicated=eq(0),
              projection_drift=eq(0)),
         note="same crash, inbox by event_id: 2 entries, 1 inbox row, projection +1"),
    Cell("p1-inbox", (REPLY_LOST,), RUN_COUNT,
         dict(**HOLDS, duplicate_entries=each_run(ge(1)), duplicated=eq(0), projection_drift=eq(0)),
         note="XADD applied, reply lost: the row is relayed again; the inbox drops the copy"),
    Cell("p1-per-key:fail_event=", (REPLY_LOST,), RUN_COUNT,
         dict(**HOLDS, duplicate_entries=each_run(ge(1)), duplicated=each_run(ge(1)),
              projection_drift=each_run(ge(1))),
         note="same lost reply with a plain UPDATE: the copy is applied twice"),
    Cell(NAIVE_N, (), RUN_COUNT,
         dict(wrong_final_state_runs=eq(RUNS), reordered=each_run(ge(1)), lost=eq(0), indeterminate=eq(0),
              duplicate_entries=eq(0)),
         note="3 naive dispatchers, e1-1's holder stalls until the others have sent e1-2..e1-5"),
    Cell(f"p1-naive-n:dispatchers=1,{HELD}", (), RUN_COUNT,
         dict(**HOLDS, duplicate_entries=eq(0)),
         note="the same stall with one naive dispatcher only delays everything: the break is the parallelism"),
    Cell(f"p1-per-key-n:{HELD}", (), RUN_COUNT,
         dict(**HOLDS, duplicate_entries=eq(0)),
         note="3 per-key dispatchers, same stall: the stalled one holds key 1's lock, the others skip the key"),
    Cell(f"p1-per-key-n:{HELD}", (KILL_AT_MARK,), RUN_COUNT,
         dict(**HOLDS, duplicate_entries=each_run(ge(1)), duplicated=each_run(ge(1))),
         note="3 per-key dispatchers, one killed between XADD and mark: its key's re-send comes first"),
]
ROWS = rows(CELLS)
