"""The bulk presets' producer does not mistake a late reply for a lost one.

CI (load 20-28): ack-after x kill-consumer held 2256 entries for 2000 published events. The
default producer's socket timeout, 250 ms (125 ms at time scale 0.5), expired on a 256-XADD
pipeline whose reply a loaded machine delivered late: all 256 were `info`, retried 250 ms on
and applied twice, so undelivered (counted in entries) was 2255 and the in_flight bound failed.
Here the late reply is made on purpose, a latency toxic on the producer's own link (150 ms a
chunk at this time scale, past the old timeout): every event goes in once, none unknown.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow(seconds=20)


def test_a_late_reply_is_not_a_failed_publish_in_the_bulk_presets(tmp_path):
    done = subprocess.run([sys.executable, "-m", "chaos", "run", "--preset", "ack-after",
                           "--fault", "latency:target=producer,stream=downstream,latency_ms=300,duration_ms=4000",
                           "--runs", "1", "--seed", "7", "--time-scale", "0.5", "--json", "--run-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.stdout, done.stderr[-3000:]
    cell = json.loads(done.stdout)
    figures = {k: cell[k] for k in ("published", "duplicate_entries", "indeterminate", "lost", "undelivered",
                                    "pending_left", "verdict")}
    assert figures == {"published": 2000, "duplicate_entries": 0, "indeterminate": 0, "lost": 0,
                       "undelivered": 0, "pending_left": 0, "verdict": "valid"}, (figures, done.stderr[-2000:])
