"""A fault must meet the workload: each declared effect, found and missed, on small histories."""
from __future__ import annotations

import pytest

from faults.effects import DIED_MID_WORK, LINK_FAILED, PUBLISH_FAILED, WINDOW_HIT, missing
from faults.registry import get_fault


class H:
    def __init__(self) -> None:
        self.t, self.ops = 0.0, []

    def op(self, type: str, f: str, process: str = "C1", at: float | None = None, **fields) -> H:
        self.t = self.t + 0.1 if at is None else at
        self.ops.append({"time": self.t, "process": process, "type": type, "f": f, **fields})
        return self

    def fault(self, name: str, phase: str, at: float | None = None) -> H:
        return self.op("info", "fault", "nemesis", at, value={"name": name, "phase": phase})

    def event(self, eid: str) -> H:
        self.op("invoke", "publish", "P-order", event_id=eid).op("ok", "publish", "P-order", event_id=eid)
        self.op("ok", "deliver", event_id=eid).op("invoke", "apply", event_id=eid)
        return self.op("ok", "apply", event_id=eid).op("ok", "ack", event_id=eid)


def test_a_kill_after_the_last_ack_missed_the_workload():
    h = H().event("e1").event("e2").fault("kill-consumer", "start", at=20.0)
    reason = missing(DIED_MID_WORK, "kill-consumer", h.ops)
    assert reason and reason.startswith("fault kill-consumer missed the workload")


def test_a_kill_while_an_event_is_unacked_or_a_publish_is_to_come_met_it():
    h = H().event("e1").op("invoke", "publish", "P-order", event_id="e2").op("ok", "publish", "P-order", event_id="e2")
    assert missing(DIED_MID_WORK, "kill-consumer", h.fault("kill-consumer", "start").ops) is None
    h = H().event("e1").fault("kill-consumer", "start").event("e2")
    assert missing(DIED_MID_WORK, "kill-consumer", h.ops) is None


def test_a_fault_that_never_started_is_named():
    assert "never started" in missing(DIED_MID_WORK, "kill-consumer", H().event("e1").ops)


def test_a_blip_needs_a_failed_or_unknown_publish():
    h = H().fault("publish-blip", "start").event("e1").fault("publish-blip", "stop")
    assert missing(PUBLISH_FAILED, "publish-blip", h.ops)
    h = H().fault("publish-blip", "start").op("invoke", "publish", "P-order", event_id="e1")
    h.op("info", "publish", "P-order", event_id="e1").fault("publish-blip", "stop")
    assert missing(PUBLISH_FAILED, "publish-blip", h.ops) is None


def test_a_partition_needs_an_op_on_a_cut_link_to_fail():
    h = H().fault("partition", "start").event("e1").fault("partition", "stop")
    assert missing(LINK_FAILED, "partition", h.ops)
    h = H().fault("partition", "start").op("info", "log", value={"link": "broken"}).fault("partition", "stop")
    assert missing(LINK_FAILED, "partition", h.ops) is None
    h = H().event("e0").op("fail", "apply", event_id="e0").fault("partition", "start").fault("partition", "stop")
    assert missing(LINK_FAILED, "partition", h.ops), "a failure before the window is not the partition's"


def test_a_nemesis_needs_one_window_that_an_op_fell_into():
    h = H().fault("nemesis", "start").event("e1").fault("latency", "start", at=5.0).fault("latency", "stop", at=5.3)
    h.fault("nemesis", "stop", at=6.0)
    assert "missed the workload" in missing(WINDOW_HIT, "nemesis", h.ops)
    h = H().fault("nemesis", "start").fault("pause", "start").event("e1").fault("pause", "stop").fault("nemesis", "stop")
    assert missing(WINDOW_HIT, "nemesis", h.ops) is None


def test_an_apply_in_flight_across_a_window_start_hits_it():
    h = H().fault("nemesis", "start").op("invoke", "apply", event_id="e1", at=1.0)
    h.fault("partition", "start", at=2.0).fault("partition", "stop", at=2.5).op("ok", "apply", event_id="e1", at=3.0)
    assert missing(WINDOW_HIT, "nemesis", h.fault("nemesis", "stop", at=4.0).ops) is None


@pytest.mark.parametrize("spec, effect", [("kill-consumer", DIED_MID_WORK), ("kill-dispatcher", DIED_MID_WORK),
                                          ("publish-blip", PUBLISH_FAILED), ("partition", LINK_FAILED),
                                          ("nemesis", WINDOW_HIT), ("sigterm", DIED_MID_WORK),
                                          ("promote-replica", DIED_MID_WORK), ("redis-restart", DIED_MID_WORK),
                                          ("latency", WINDOW_HIT), ("pg-reset", LINK_FAILED),
                                          ("maxmemory", PUBLISH_FAILED)])
def test_the_faults_declare_their_effect(spec, effect):
    assert get_fault(spec).effect == effect


def test_only_a_killed_producer_explains_unattempted_events():
    assert get_fault("kill-consumer:role=producer").explains() == {"unattempted"}
    assert get_fault("kill-consumer").explains() == frozenset()


def test_a_partition_of_one_worker_needs_that_worker_to_fail():
    start = {"name": "partition", "phase": "start", "workers": ["C1"]}
    h = H().op("info", "fault", "nemesis", value=start).op("info", "log", "C2", value={"link": "broken"})
    h.fault("partition", "stop")
    assert missing(LINK_FAILED, "partition", h.ops), "another worker's broken link is not this partition's"
    h = H().op("info", "fault", "nemesis", value=start).op("fail", "apply", "C1#2", event_id="e1")
    assert missing(LINK_FAILED, "partition", h.fault("partition", "stop").ops) is None
