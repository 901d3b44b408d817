"""Expected figures for a network blip on the order service's link while it publishes.

The reference: `created` (P-order) fails at 0 and 500 ms and succeeds at 1000 ms, while
`paid` (P-payment, its own link) succeeds at 300 ms, so the log holds paid before
created. The rows force that order: the blip starts at created's first publish and lasts
until paid is in the stream (`until_entries=1`) and created's retry comes (at 500 ms, which then succeeds). A plain UPDATE and a CAS on the stream entry id end `created` (wrong); a CAS on
the business version (assigned when the event was created) ends `paid`. When the blip
drops only the reply, Redis has the XADD, the producer saw an error (info) and retried:
the event is in the stream twice and is delivered twice.
"""
from __future__ import annotations

from chaos.expectations.cells import Cell, rows
from chaos.expectations.table import RUNS, each_run, eq, ge

# reset_peer on P-order's link from its first publish (created) until paid (P-payment, its own link) is in
# the stream and P-order comes back to publish (its retry, 500 ms after the first attempt): created's
# retry lands after paid every run, however late a loaded machine starts either producer (by the clock
# alone, 0-800 ms against paid at 300 ms, it was a race). duration_ms=1: the conditions hold the toxic,
# not the default 800 ms, which only made the retry at 500 ms fail too and wait for the one at 1000 ms
# (a run 1.0 -> 0.55 s)
BLIP = "publish-blip:at=before_publish,until_entries=1,duration_ms=1"
REPLY_BLIP = "publish-blip:stream=downstream,at=before_publish,duration_ms=300"
# `created` costs 100 ms, not the pair's 800: the blip decides where created lands (after paid, forced by
# until_entries), not its handling, whose 800 ms was most of a run (1.6 of 1.7 s after the blip's 0.8)
JOB = "created_ms=100"
S1_TWO_SERVICES = f"s1:paid_at_ms=300,payment_service=1,{JOB}"
RUN_COUNT = 5

CELLS: list[Cell] = [
    Cell(S1_TWO_SERVICES, (BLIP,), RUN_COUNT, dict(wrong_final_state_runs=eq(RUNS), published=eq(2 * RUNS)),
         note="S1 plain: the retried created lands after paid"),
    Cell(f"p2-business:{JOB}", (BLIP,), RUN_COUNT, dict(wrong_final_state_runs=eq(0), published=eq(2 * RUNS)),
         note="CAS on the business version: the late created is stale"),
    Cell(f"p2-entry-id:{JOB}", (BLIP,), RUN_COUNT, dict(wrong_final_state_runs=eq(RUNS), published=eq(2 * RUNS)),
         note="CAS on the stream entry id: the late created has the larger id and wins"),
    Cell(S1_TWO_SERVICES, (REPLY_BLIP,), 3,
         dict(duplicate_entries=each_run(ge(1)), redelivered=each_run(ge(1)), published=eq(2 * RUNS), lost=eq(0),
              indeterminate=eq(0)),
         note="reply lost: publish info, the retry adds a second entry of the same event"),
]
ROWS = rows(CELLS)
