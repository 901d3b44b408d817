"""A fault must meet the workload: each declared effect, found and missed, on small histories."""
from __future__ import annotations

import pytest

from faults.effects import (CLAIMED_WHILE_RUNNING, DIED_MID_WORK, FAILPOINT_FIRED, LINK_FAILED, PUBLISH_FAILED,
                            STOPPED_MID_WORK, STRUCK_UNSETTLED, WINDOW_HIT, missing)
from faults.registry import get_fault


class H:
    def __init__(self) -> None:
        self.t, self.ops = 0.0, []

    def op(self, type: str, f: str, process: str = "C1", at: float | None = None, **fields) -> H:
        self.t = self.t + 0.1 if at is None else at
        self.ops.append({"time": self.t, "process": process, "type": type, "f": f, **fields})
        return self

    def fault(self, name: str, phase: str, at: float | None = None, **value) -> H:
        return self.op("info", "fault", "nemesis", at, value={"name": name, "phase": phase, **value})

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
                                          ("maxmemory", PUBLISH_FAILED), ("pause", STOPPED_MID_WORK),
                                          ("sentinel-failover", DIED_MID_WORK), ("replica-overflow", DIED_MID_WORK),
                                          ("group-loss", DIED_MID_WORK), ("maxlen-trim", STRUCK_UNSETTLED),
                                          ("delete-consumer", STRUCK_UNSETTLED), ("poison:key=j7", FAILPOINT_FIRED),
                                          ("xautoclaim", CLAIMED_WHILE_RUNNING), ("long-job", CLAIMED_WHILE_RUNNING)])
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


def test_every_fault_but_none_declares_an_effect():
    from faults.registry import fault_class, fault_names
    assert [n for n in fault_names() if not fault_class(n).effect] == ["none"]


def test_a_failover_is_judged_when_the_primary_fails_not_when_replication_is_held():
    """The hold starts mid-work, the kill comes after the last ack: it missed."""
    h = H().event("e1").op("invoke", "publish", "P-order", event_id="e2").fault("promote-replica", "start", step="hold")
    h.op("ok", "publish", "P-order", event_id="e2").op("ok", "deliver", event_id="e2")
    h.op("invoke", "apply", event_id="e2").op("ok", "apply", event_id="e2").op("ok", "ack", event_id="e2")
    h.fault("promote-replica", "info", step="kill")
    assert "missed the workload" in missing(DIED_MID_WORK, "promote-replica", h.ops)
    h = H().event("e1").fault("sentinel-failover", "start", step="hold").event("e2")
    h.fault("sentinel-failover", "info", step="partition", struck=True).event("e3")
    assert missing(DIED_MID_WORK, "sentinel-failover", h.ops) is None


def test_a_pause_after_the_last_ack_missed_and_one_mid_work_met():
    h = H().event("e1").fault("pause", "start", at=9.0).fault("pause", "stop", at=10.0)
    assert "fault pause missed the workload" in missing(STOPPED_MID_WORK, "pause", h.ops)
    h = H().op("invoke", "publish", "P-order", event_id="e1").op("ok", "publish", "P-order", event_id="e1")
    h.fault("pause", "start").fault("pause", "stop").op("ok", "deliver", event_id="e1")
    assert missing(STOPPED_MID_WORK, "pause", h.ops) is None


def test_a_trim_or_deletion_needs_an_unsettled_entry_in_its_own_record():
    h = H().event("e1").fault("maxlen-trim", "start", trimmed={"orders": 1}, unsettled={"orders": 0})
    assert "fault maxlen-trim missed the workload" in missing(STRUCK_UNSETTLED, "maxlen-trim", h.ops)
    h = H().fault("maxlen-trim", "start", trimmed={"orders": 5}, unsettled={"orders": 3})
    assert missing(STRUCK_UNSETTLED, "maxlen-trim", h.ops) is None
    h = H().fault("delete-consumer", "start", dropped_entries={"orders": []}, unsettled=0)
    assert missing(STRUCK_UNSETTLED, "delete-consumer", h.ops)
    h = H().fault("delete-consumer", "start", dropped_entries={"orders": ["1-0"]}, unsettled=1)
    assert missing(STRUCK_UNSETTLED, "delete-consumer", h.ops) is None


def test_poison_needs_its_failpoint_to_have_acted():
    h = H().fault("poison", "start", failpoints={"before_apply": "fail"}).event("e1")
    assert "fault poison missed the workload" in missing(FAILPOINT_FIRED, "poison", h.ops)
    h.op("info", "failpoint", event_id="e2", value={"name": "before_apply", "action": "fail", "hit": 1})
    assert missing(FAILPOINT_FIRED, "poison", h.ops) is None
    other = H().fault("poison", "start", failpoints={"before_apply": "fail"})
    other.op("info", "failpoint", value={"name": "before_apply", "action": "kill", "hit": 1})
    assert missing(FAILPOINT_FIRED, "poison", other.ops), "another fault's kill at the same failpoint is not poison"


def _claim_history(first_acks_before_claim: bool, claimer: str = "C2") -> H:
    h = H().fault("xautoclaim", "start", worker="C1").op("ok", "deliver", "C1", event_id="e1")
    h.op("invoke", "apply", "C1", event_id="e1")
    if first_acks_before_claim:
        h.op("ok", "apply", "C1", event_id="e1").op("ok", "ack", "C1", event_id="e1")
    h.op("ok", "deliver", claimer, event_id="e1", via="claim")
    return h.fault("xautoclaim", "stop")


def test_a_claim_counts_only_while_the_first_consumer_still_holds_the_entry():
    assert missing(CLAIMED_WHILE_RUNNING, "xautoclaim", _claim_history(False).ops) is None
    assert "missed the workload" in missing(CLAIMED_WHILE_RUNNING, "xautoclaim", _claim_history(True).ops)
    assert missing(CLAIMED_WHILE_RUNNING, "xautoclaim", _claim_history(False, claimer="C1#2").ops), \
        "C1 restarted reading its own entry is no claim from another"


def test_a_claim_outside_the_stall_or_of_another_workers_entry_misses():
    h = H().op("ok", "deliver", "C1", event_id="e1").fault("xautoclaim", "start", worker="C1")
    h.fault("xautoclaim", "stop").op("ok", "deliver", "C2", event_id="e1", via="claim")
    assert missing(CLAIMED_WHILE_RUNNING, "xautoclaim", h.ops), "claimed after the stall ended"
    h = H().fault("xautoclaim", "start", worker="C1").op("ok", "deliver", "C3", event_id="e1")
    h.op("ok", "deliver", "C2", event_id="e1", via="claim").fault("xautoclaim", "stop")
    assert missing(CLAIMED_WHILE_RUNNING, "xautoclaim", h.ops), "C3's entry is not the stalled C1's"


def test_a_long_job_claimed_while_its_first_run_goes_on_met_the_workload():
    h = H().fault("long-job", "start", failpoints={"in_work": "pause"}).op("ok", "deliver", "C1", event_id="e42-1")
    h.op("invoke", "apply", "C1", event_id="e42-1")
    h.op("info", "failpoint", "C1", event_id="e42-1", value={"name": "in_work", "action": "pause", "hit": 1})
    assert "fault long-job missed the workload" in missing(CLAIMED_WHILE_RUNNING, "long-job", h.ops)
    h.op("ok", "deliver", "C2", event_id="e42-1", via="claim")
    assert missing(CLAIMED_WHILE_RUNNING, "long-job", h.ops) is None


def test_a_long_job_asks_for_a_claim_of_the_job_that_ran_long_not_of_any_entry():
    h = H().fault("long-job", "start", failpoints={"in_work": "pause"}).op("ok", "deliver", "C1", event_id="e7")
    h.op("ok", "deliver", "C2", event_id="e7", via="claim")
    assert "fault long-job missed the workload" in missing(CLAIMED_WHILE_RUNNING, "long-job", h.ops)
