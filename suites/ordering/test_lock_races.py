"""The lock races S4a and S4b: the mechanism shown deterministically, the rate measured.

Mechanism: fault `hold` stops `created`'s consumer at its `before_lock` failpoint (not a
change to the guard) until the other consumer has applied `paid` (the producer holds `paid`
before its publish until `created`'s consumer has stopped, so the two go to different
consumers), so the lock serializes the two writes in the wrong order: wrong every run, on
conditions rather than the 200 ms pause it was (forced: 2 runs show it, not 10).

Rate, S4a (no failpoint): the race is decided in the first millisecond after the XADDs
(whichever consumer wakes first locks first; the producer sends `paid` one round trip after
`created`, which favours the `created` consumer), so its rate depends on the machine.
Measured on this 2-core box shared with 4 other sessions: 31/200 = 15.5 % on direct links
(time scale 1 and 0.2 alike), through the proxies at scale 0.25: 32/270 = 11.9 % (99 %
Wilson CI 7.7..17.9 %) at load ~8 and 23/270 = 8.5 % (CI 5.1..13.9 %) at load ~18. The run
count takes a lower rate of 3 %, below every CI's lower bound: runs_for_false_zero(0.03) =
454 runs, so a correct framework reports a false zero with probability 0.97^454 < 1e-6.
The time scale is capped at 0.05 for these runs (0.1 before: see "Smaller scale" below): it
shortens the jobs and the gap between orders, not the race at the XADDs (same rate at scale 1
and 0.2). The producer's socket timeout scales too, and 25 ms fires on a loaded box (a retried
XADD then duplicates the event: measured 2 in 454 runs at load 23); 250 ms fired twice in 454
runs of a CI run at load ~20 as well, so these runs give it 2 s after scaling (40000 ms at
0.05): a timeout only ever adds a duplicate here, never a lock race. Measured with 250 ms after scaling: 49/454 = 10.8 %
(7.6..15.1 %) and 57/454 = 12.6 % (9.1..17.1 %) at load 16-23. Since the consumers' reads and
acks share one write (the consumer's hot path), `created` wins less often: 241/454 = 53.1 %
(47.0..59.0 %) in a CI run, 111/200 = 55.5 % (46.4..64.2 %) at load ~6; 3 % stays far below.

Job cost: the guard sleeps a job's cost after taking the lock, so the cost does not decide
who locks first, only how long the other consumer waits for the lock (the TTL, 500 ms after
scaling, is far above either cost). These runs give `created` 100 ms instead of 800 (10 ms
after the 0.1 scale of then), which took a run from ~220 to ~150 ms. Measured side by side, 200 runs
each at load ~6: 111/200 = 55.5 % (46.4..64.2 %) with 800 ms, 121/200 = 60.5 % (51.4..68.9 %)
with 100 ms: the same race.

Rate, S4b (0-30 ms jitter before locking): the jitter, not the wake-up order, decides, so
the rate is near half when the jitter dwarfs the consumers' wake-up gap (37.5 % at scale 1
on direct links, 20 % through the proxies at scale 0.25, where the jitter is only 7.5 ms).
Capped at scale 0.5, with a lower rate of 10 %: runs_for_false_zero(0.10) = 132 runs give
a false zero below 1e-6, and "not always wrong" (<= 85 %) fails for a true rate of 50 %
with probability far below that. The same 100 ms `created` (50 ms after scaling, 400 ms
before; now 30 ms, below) took a run from ~710 to ~300 ms; measured side by side, 100 runs each at load ~6:
60/100 = 60.0 % (47.1..71.6 %) with 800 ms, 55/100 = 55.0 % (42.3..67.1 %) with 100 ms. The
measured rate and its CI are printed.

Smaller scale (the issue's CI margin): S4a at scale 0.05 instead of 0.1 (`created` 5 ms,
`paid` 2.5 ms, 25 ms between orders; `block_ms=200` keeps XREADGROUP's BLOCK at the 10 ms it
had), S4b with `created` 30 ms and `paid` 20 ms (15 and 10 ms after its 0.5 scale: the 0-15 ms
jitter, the race, unchanged) and 80 ms between orders instead of 150. The run counts, and so
the false-zero bounds, are the same. Side by side, -n 0, the two tests one after the other,
old and new alternating, load 14-34: old 27.5 + 21.0, 29.5 + 22.2 and 33.8 + 23.4 s, new
16.0 + 11.1 and 17.5 + 13.0 s (a third, 29.2 + 17.9 s, beside another lock-race session); rates
new S4a 280/465 = 60.2 % and 194/465 = 41.7 % (99 % CI down to 36.0 %, wrong in 15 of 15
runs), S4b 76/135 = 56.3 % and 46/135 = 34.1 % (24.5..66.7 %), old at the same time S4a
54.8, 50.5 and 38.1 %, S4b 40.0 and 45.2 %; through `python -m chaos run` (5 runs of 31 orders, load
18-27) S4a at 0.05 26.5 % and 52.3 %, at 0.1 29.7 % and 51.6 %; S4b with 60 ms between orders
fell to 13/81 = 16.0 % (the consumers still busy with the previous order), so 80 ms it is. With one consumer
(`consumers=1`: no race) both tests fail, 0/465 and 0/135: the zero they assert against is
still reachable. At 0.05 the lock's TTL is 250 ms: a holder stalled past it on a loaded box
fails its release (0-11 a run of 465 races seen), which these tests do not bound.

Several races per reset: a run publishes up to 32 orders (`pair:pairs=N`), one order's
`created` and `paid` every `pair_gap_ms` (500 ms for S4a, 25 ms after the 0.05 scale; 160 ms
for S4b, 80 ms after the 0.5 scale; they were 50 and 150 ms, figures below), each gap past the previous order's handling (both
consumers are back in XREADGROUP when the next order comes), so each order is the same race
as a one-order run, and the rates count wrong orders (`wrong_keys`) of all races. A run's
reset, start and drain (~0.3-0.4 s, ~0.15 CPU s) are paid once per run, so a run holds as
many races as it can: S4a's 454 races take 15 runs of 31 orders, S4b's 132 races 5 runs of
27 (one race per run: 454 runs took ~140 s, 132 runs ~66 s). With 16 orders per run (29
and 9 runs) the S4a test took 7.97 and 8.19 CPU s (48 and 53 s), with 32 (15 runs) 6.43 and
6.08 CPU s (38 and 40 s), alone at load 17-19, the two interleaved. Rates at 32 orders per
run, load 17-19: S4a 148/480 = 30.8 % and 141/480 = 29.4 % (99 % CI down to 24.3 %, wrong
in 15 of 15 runs), S4b 76/160 = 47.5 % and 39/160 = 24.4 % (16.8..34.0 %, 5 of 5 runs); as
the tests run them (31 and 27 orders), beside two CPU hogs at -n 2 (load 15-21): S4a
118/465 = 25.4 % and 97/465 = 20.9 % (99 % CI down to 16.4 %), S4b 46/135 = 34.1 % and
54/135 = 40.0 % (24.5..51.1 %). At 16 orders per run, load ~18 with two CPU hogs and a whole-suite run beside them: S4a
169/464 = 36 % (wrong in 28 of 29 runs), S4b 59/144 = 41 % (9 of 9 runs). A 150 ms gap at
S4a's scale (15 ms) leaves the consumers busy with the previous order and the rate fell to
6/160 = 3.8 %, which is why the gap is wide. The races of one run share processes and so
are not strictly independent draws: the false-zero bounds above take them as independent,
and the per-run rates printed beside them (wrong in every run) show they are far from fully
correlated.
"""
from __future__ import annotations

import pytest

from chaos.workload.rates import runs_for_false_zero, wilson

S4A_LOW_RATE = 0.03
S4A_RACES = runs_for_false_zero(S4A_LOW_RATE)     # 454
S4B_LOW_RATE = 0.10
S4B_RACES = runs_for_false_zero(S4B_LOW_RATE)     # 132
S4A_SCALE_CAP, S4B_SCALE_CAP = 0.05, 0.5
MAX_PAIRS = 32                                    # races per run (one reset) at most


def _runs_and_pairs(races: int) -> tuple[int, int]:
    """The fewest runs of at most MAX_PAIRS races that hold `races`, the races spread evenly."""
    runs = -(-races // MAX_PAIRS)
    return runs, -(-races // runs)


S4A_RUNS, S4A_PAIRS = _runs_and_pairs(S4A_RACES)     # 15 runs of 31 orders (465 races)
S4B_RUNS, S4B_PAIRS = _runs_and_pairs(S4B_RACES)     # 5 runs of 27 orders (135 races)
# S4a: 25 ms between orders after the 0.05 scale; S4b: 80 ms after the 0.5 scale (module docstring)
S4A_ORDERS, S4B_ORDERS = f"pairs={S4A_PAIRS},pair_gap_ms=500", f"pairs={S4B_PAIRS},pair_gap_ms=160"

# 2 s after S4a's 0.05 scale (10 s after S4b's 0.5): no spurious publish retries
S4A_PRODUCER, S4B_PRODUCER = "timeout_ms=40000", "timeout_ms=20000"
S4A_BLOCK = "block_ms=200"             # XREADGROUP's BLOCK stays 10 ms at the 0.05 scale, as it was at 0.1
# the costs are spent after the lock: they do not decide the race
S4A_JOBS, S4B_JOBS = "created_ms=100", "created_ms=30,paid_ms=20"
CREATED_LOCKS_LAST = ("hold:at=before_lock,etype=created,until=after_apply_before_ack,until_etype=paid,"
                      "gate=before_publish,gate_role=producer,gate_etype=paid")


def test_s4a_paid_first_at_the_lock_is_wrong_every_run(chaos_cell):
    outcome = chaos_cell("s4a", CREATED_LOCKS_LAST, runs=2, expected=False)
    for run in range(outcome.result.run_count):
        stop = [v for v in outcome.fault_ops(run, "hold") if v.get("phase") == "stop"]
        assert stop and stop[0]["until_reached_by"], f"run {run}: the hold never saw paid applied: {stop}"
    cell = outcome.result
    c = cell.counts
    print(f"s4a + created held before its lock until paid applied: wrong {c.wrong_final_state_runs}/{cell.run_count}")
    assert c.wrong_final_state_runs == cell.run_count, f"expected wrong every run, got {c}"
    assert c.releases_failed == 0 and c.lost == 0  # the locks worked; the order did not


def _scale(options, cap: float) -> float:
    return min(options.time_scale, cap)


@pytest.mark.slow(seconds=S4A_RUNS * 1.2)    # among the longest tests: started early (conftest.py)
def test_s4a_wrong_rate_is_above_zero(chaos_cell, chaos_options, record_property):
    cell = chaos_cell(f"s4a:{S4A_PRODUCER},{S4A_BLOCK},{S4A_JOBS},{S4A_ORDERS}", runs=S4A_RUNS, fixed_runs=True,
                      time_scale=_scale(chaos_options, S4A_SCALE_CAP), expected=False).result
    rate = _race_rate(cell, S4A_RACES, S4A_PAIRS)
    print(f"S4a wrong rate per race: {rate}; wrong runs {cell.counts.wrong_final_state_runs}/{cell.run_count}; "
          f"releases that found the lock expired: {cell.counts.releases_failed}")
    record_property("s4a_wrong_rate", str(rate))
    assert rate.k > 0, f"S4a never went wrong in {rate.n} races: {rate}"


def _race_rate(cell, races: int, pairs: int):
    """Wrong orders of all the cell's races (`pairs` per run), after what a lock guarantees
    whatever the race: nothing lost, nothing applied twice, every event handled, at least
    `races` races run."""
    c = cell.counts
    assert cell.verdict != "unknown", cell.unknown_reasons[:3]
    orders = pairs * cell.run_count
    assert orders >= races, f"{orders} races, the false-zero bound needs {races}"
    assert c.lost == 0 and c.duplicated == 0 and c.handled == c.published == 2 * orders, c
    return wilson(c.wrong_keys, orders)


@pytest.mark.slow(seconds=S4B_RUNS * 2.6)
def test_s4b_wrong_about_half(chaos_cell, chaos_options, record_property):
    cell = chaos_cell(f"s4b:{S4B_PRODUCER},{S4B_JOBS},{S4B_ORDERS}", runs=S4B_RUNS, fixed_runs=True,
                      time_scale=_scale(chaos_options, S4B_SCALE_CAP), expected=False).result
    rate = _race_rate(cell, S4B_RACES, S4B_PAIRS)
    print(f"S4b wrong rate per race: {rate}; wrong runs {cell.counts.wrong_final_state_runs}/{cell.run_count}")
    record_property("s4b_wrong_rate", str(rate))
    assert rate.k > 0, f"S4b never went wrong in {rate.n} races: {rate}"
    assert rate.value <= 0.85, f"S4b is a race, not always wrong: {rate}"


def test_s4c_a_release_leaves_the_next_holders_lock(chaos_cell, chaos_options):
    """S4c with paid (600 ms) outlasting the 500 ms TTL too: created's release (at 800 ms) meets
    paid's lock, and a compare-and-delete must leave it; a release by plain DEL deletes it
    (the `lock-without-owner-check` mutant, docs/mutants.md: 1 failed release per run).
    At half scale (TTL 250, paid 300, created 400 ms: the same order by construction; 4.58 / 4.15
    -> 2.50 / 2.10 s, -p no:xdist, load 7-8, releases failed >= 2 a run at both scales)."""
    cell = chaos_cell("s4c:paid_ms=600", runs=3, time_scale=min(chaos_options.time_scale, 0.5)).result
    c = cell.counts
    print(f"s4c paid 600 ms: releases failed {c.releases_failed} in {cell.run_count} runs, wrong "
          f"{c.wrong_final_state_runs}/{cell.run_count}")
    assert c.releases_failed >= 2 * cell.run_count, "each run's two releases must answer 0 (neither lock was theirs)"
