"""Failpoint selection and the trace format (pure parts of the worker machinery)."""
from __future__ import annotations

import pytest

from chaos.workload.failpoints import FailpointFailure, Failpoints, validate
from chaos.trace import trace_lines


def _fps(tmp_path, spec):
    ops = []
    fps = Failpoints.from_spec(spec, process="C1", run_dir=tmp_path,
                               record=lambda *a, **k: ops.append((a, k)) or {"f": a[1]},
                               sleep_ms=lambda ms: ops.append(("slept", ms)))
    return fps, ops


def test_after_count_and_selectors(tmp_path):
    fps, ops = _fps(tmp_path, {"before_apply": {"action": "pause", "after": 1, "count": 2, "pause_ms": 5,
                                                "etype": "created"}})
    for etype in ("created", "paid", "created", "created", "created"):
        fps.hit("before_apply", etype)
    assert [o for o in ops if o[0] == "slept"] == [("slept", 5), ("slept", 5)]


def test_fail_action_raises(tmp_path):
    fps, _ = _fps(tmp_path, {"before_publish": {"action": "fail", "key": "42"}})
    fps.hit("before_publish", "created", key="43")
    with pytest.raises(FailpointFailure):
        fps.hit("before_publish", "created", key="42")


@pytest.mark.parametrize("spec, word", [
    ({"nowhere": {"action": "kill"}}, "unknown failpoint"),
    ({"before_apply": {"action": "explode"}}, "action"),
    ({"before_apply": {"action": "kill", "when": 1}}, "unknown keys"),
])
def test_validate_rejects_bad_specs(spec, word):
    with pytest.raises(ValueError, match=word):
        validate(spec)


def test_trace_reads_like_a_lab_notebook():
    t0 = 100.0
    history = [
        {"time": t0 + 0.002, "process": "C1", "type": "ok", "f": "deliver", "event_id": "e42-1",
         "etype": "created", "version": 1, "entry_id": "1792500000000-0", "via": "read"},
        {"time": t0 + 0.816, "process": "C1", "type": "ok", "f": "apply", "event_id": "e42-1",
         "etype": "created", "version": 1, "rows": 1, "effect": "applied", "value": {"status": "created"}},
        {"time": t0 + 0.9, "process": "C2", "type": "ok", "f": "unlock", "key": "42", "value": 0},
    ]
    lines = trace_lines(history, origin=t0)
    assert lines[0] == "t=     2 ms  C1         got ..00000-0 created (v=1)"
    assert lines[1].endswith("C1         wrote status=created -> UPDATE 1")
    assert "lock had expired" in lines[2]
