"""`chaos run`'s human line says what the figures cannot: the cell's notes."""
from __future__ import annotations

from chaos.cli.run_cmd import _summary_line


def test_notes_follow_the_summary_line():
    out = {"preset": "baseline", "fault": "promote-replica", "runs": 1, "verdict": "valid", "published": 2,
           "lost": 0, "duplicated": 0, "reordered": 0, "wrong_final_state_runs": 0, "pending_left": 0, "dlq": 0,
           "expected": None, "matches_expectation": True, "wall_s": 3.2,
           "notes": ["run 0: promote-replica fired after the workload ended (at 2.1 s; last publish at 0.3 s): "
                     "raise the workload's size or fire earlier"]}
    first, second = _summary_line(out).splitlines()
    assert first.startswith("baseline x promote-replica: 1 runs, valid") and "(no expectation, 3.2 s)" in first
    assert second == "  note: " + out["notes"][0]
    assert "\n" not in _summary_line({**out, "notes": []})
