"""The bulk presets' producer does not mistake a late reply for a lost one.

CI (load 20-28): ack-after x kill-consumer held 2256 entries for 2000 published events. The
default producer's socket timeout, 250 ms (125 ms at time scale 0.5), expired on a 256-XADD
pipeline whose reply a loaded machine delivered late: all 256 were `info`, retried 250 ms on
and applied twice, so undelivered (counted in entries) was 2255 and the in_flight bound failed.
Here the late reply is made on purpose, a latency toxic on the producer's own link (150 ms a
chunk at this time scale, past the old timeout): every event goes in once, none unknown. Two
chunks of 256 (512 jobs, not the preset's 2000: the consumer's 2000 x 2.5 ms of work showed
nothing more; 3.6 s instead of 12.6 at load 15) are enough: with the old timeout
(`--part producer=retrying:timeout_ms=250`) 256 of them end indeterminate and the figures
differ, as the 2000 jobs ended with 256 duplicate entries.
"""
from __future__ import annotations

import pytest

from chaos.run import run_cell

pytestmark = pytest.mark.slow(seconds=3)
JOBS = 512      # two pipelines of 256 XADDs


def test_a_late_reply_is_not_a_failed_publish_in_the_bulk_presets(cluster):
    # (on the session's cluster: `python -m chaos run` in a child process started a cluster of its own)
    cell = run_cell(cluster, "ack-after", ["latency:target=producer,stream=downstream,latency_ms=300,duration_ms=4000"],
                    runs=1, seed=7, time_scale=0.5, parts={"workload": f"bulk:jobs={JOBS}"})
    c = cell.counts
    figures = {"published": c.published, "duplicate_entries": c.duplicate_entries, "indeterminate": c.indeterminate,
               "lost": c.lost, "undelivered": c.undelivered, "pending_left": c.pending_left, "verdict": cell.verdict}
    assert figures == {"published": JOBS, "duplicate_entries": 0, "indeterminate": 0, "lost": 0,
                       "undelivered": 0, "pending_left": 0, "verdict": "valid"}, (figures, cell.unknown_reasons[:3])
