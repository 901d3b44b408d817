"""Pure tests of fault parameters, the registry, plan checks and the nemesis schedule."""
from __future__ import annotations

from random import Random

import pytest

from chaos.errors import BadArguments
from faults import FAULTS, Plan, fault_class, get_fault
from chaos.params import parse_spec
from faults.nemesis import schedule


def test_parse_spec_splits_name_and_params() -> None:
    assert parse_spec("promote-replica:hold_ms=300, hold=down") == (
        "promote-replica", {"hold_ms": "300", "hold": "down"})
    assert parse_spec("none") == ("none", {})


@pytest.mark.parametrize("spec, words", [
    ("", ["empty fault spec"]),
    (":a=1", ["no name"]),
    ("pause:at_ms", ["not k=v"]),
    ("pause:at_ms=1,at_ms=2", ["given twice"]),
])
def test_parse_spec_rejects_bad_syntax(spec: str, words: list[str]) -> None:
    with pytest.raises(BadArguments) as err:
        parse_spec(spec, "fault spec")
    for word in words:
        assert word in str(err.value)


def test_unknown_fault_lists_the_valid_ones() -> None:
    with pytest.raises(BadArguments) as err:
        get_fault("promote-primary")
    assert "unknown fault 'promote-primary'" in str(err.value)
    assert "promote-replica" in str(err.value) and "kill-consumer" in str(err.value)


def test_unknown_parameter_lists_the_valid_ones() -> None:
    with pytest.raises(BadArguments) as err:
        get_fault("promote-replica:hold=timeout,holdms=3")
    msg = str(err.value)
    assert "no parameter holdms" in msg and "hold_ms" in msg and "describe promote-replica" in msg


@pytest.mark.parametrize("spec, words", [
    ("promote-replica:hold_ms=abc", ["hold_ms='abc'", "milliseconds"]),
    ("promote-replica:hold_ms=-5", ["hold_ms=-5", ">= 0"]),
    ("promote-replica:hold=cut", ["hold='cut'", "timeout, down, latency, none"]),
    ("promote-replica:hold=latency,latency_ms=0", ["latency_ms > 0"]),
    ("kill-consumer:after=3", ["with at=time give at_ms"]),
    ("redis-restart:kill=maybe", ["kill='maybe'", "bool"]),
    ("publish-blip:toxic=down,stream=downstream", ["cuts both directions"]),
    ("nemesis:faults=latency/flood", ["faults='latency/flood'", "flood is not one of latency, partition, pause"]),
    ("nemesis:faults=latency+pause", ["joined by '/', not '+'", "write faults=latency/pause"]),
    ("latency:link=replication,target=C1", ["workers have no replication link"]),
    ("poison", ["needs a selector"]),
    ("partition:link=sideways", ["link='sideways'", "redis, replica, postgres, replication"]),
])
def test_bad_values_name_the_parameter_and_the_fix(spec: str, words: list[str]) -> None:
    with pytest.raises(BadArguments) as err:
        get_fault(spec)
    for word in words:
        assert word in str(err.value)


def test_values_are_typed_and_spec_round_trips() -> None:
    fault = get_fault("promote-replica:hold_ms=300,hold=down")
    assert fault.hold_ms == 300 and fault.hold == "down" and fault.at_ms == 300
    assert fault.spec == "promote-replica:hold_ms=300,hold=down"
    assert get_fault(fault.spec).values == fault.values
    assert get_fault("redis-restart:kill=false").kill is False


@pytest.mark.parametrize("name", list(FAULTS))
def test_every_fault_describes_all_its_parameters(name: str) -> None:
    cls = fault_class(name)
    assert cls.name == name and cls.description
    text = cls.describe()
    for param in cls.params:
        assert param.name in text and param.help


def test_failpoint_faults_name_their_failpoints() -> None:
    assert get_fault("kill-consumer").failpoints() == {}
    assert get_fault("kill-consumer:at=mid_batch,after=250").failpoints() == {
        "C1": {"mid_batch": {"action": "kill", "after": 250, "count": 1}}}
    assert get_fault("xautoclaim:target=C2").failpoints() == {
        "C2": {"before_apply": {"action": "signal", "count": 1}}}
    # until_etype: the commit the stall waits for is watched on every consumer of the role
    assert get_fault("xautoclaim:target=C2,etype=created,until_etype=paid").failpoints() == {
        "C2": {"before_apply": {"action": "signal", "count": 1, "etype": "created"}},
        "consumer": {"after_commit": {"action": "signal", "count": 1, "etype": "paid"}}}
    # late_write: the stalled consumer's own apply (and the others' held acks) seen on every consumer
    assert get_fault("xautoclaim:etype=created,late_write=1").failpoints() == {
        "consumer": {"before_apply": {"action": "signal", "count": 1, "etype": "created"},
                     "after_apply_before_ack": {"action": "signal", "count": 1, "etype": "created"}}}
    # long-job until_claimed: the job stops (signal) instead of sleeping, once per consumer
    assert get_fault("long-job:event_id=e42-1,until_claimed=1").failpoints() == {
        "consumer": {"in_work": {"action": "signal", "count": 1, "event_id": "e42-1"}}}
    # hold: the stop and the failpoint it waits for are carried by every worker of the role
    assert get_fault("hold:etype=created,until_etype=paid").failpoints() == {
        "consumer": {"after_commit": {"action": "signal", "count": 1, "etype": "created"},
                     "after_apply_before_ack": {"action": "signal", "count": 1, "etype": "paid"}}}


@pytest.mark.parametrize("spec, fix", [
    ("hold:at=before_apply,until=before_apply", "give two different failpoints"),
    ("xautoclaim:at=time,until_claimed=1", "drop until_claimed or use at=before_apply"),
    ("xautoclaim:at=time,late_write=1", "drop late_write or use at=before_apply"),
    ("long-job:etype=created,until_claimed=1", "give event_id"),
    ("xautoclaim:at=after_apply_before_ack,late_write=1", "must stall before the apply"),
    ("delete-consumer:at=before_apply,when=alive", "at=before_apply \\(when=dead\\) waits for the consumer's failpoint"),
    ("delete-consumer:at=before_apply,after_entries=5", "drop after_entries/at_ms"),
    ("delete-consumer:at=before_apply,at_ms=100", "drop after_entries/at_ms"),
    ("delete-consumer:after=3", "after= counts entries at the failpoint of at=before_apply"),
])
def test_a_condition_the_fault_cannot_watch_is_refused(spec: str, fix: str) -> None:
    with pytest.raises(BadArguments, match=fix):
        get_fault(spec)


def test_check_rejects_a_target_or_failpoint_the_run_lacks() -> None:
    plan = Plan(roles={"consumer": ["C1", "C2"], "producer": ["P-order"]},
                failpoints={"consumer": {"mid_batch", "before_apply"}})
    get_fault("kill-consumer:at=mid_batch,target=C2").check(plan)
    with pytest.raises(BadArguments, match="target=C9 is not a role or worker of this run; it has: consumer, producer, C1"):
        get_fault("kill-consumer:at=mid_batch,target=C9").check(plan)
    with pytest.raises(BadArguments, match="no consumer worker has failpoint after_apply_before_ack"):
        get_fault("kill-consumer:at=after_apply_before_ack").check(plan)
    with pytest.raises(BadArguments, match="target=C3 is not a role or worker of this run"):
        get_fault("pause:target=C3").check(plan)
    with pytest.raises(BadArguments, match="role=dispatcher is not a role or worker"):
        get_fault("sigterm:role=dispatcher").check(plan)
    with pytest.raises(BadArguments, match="no 'replication' link"):
        get_fault("latency:link=replication").check(Plan(roles=plan.roles, links={"redis", "postgres"}))
    get_fault("latency:link=postgres,target=consumer").check(plan)


def test_nemesis_schedule_replays_with_the_seed_and_stays_in_bounds() -> None:
    kinds = ["latency", "partition", "pause"]
    a = schedule(Random(7), kinds, 5000, 800, 300)
    b = schedule(Random(7), kinds, 5000, 800, 300)
    c = schedule(Random(8), kinds, 5000, 800, 300)
    assert a == b and a != c and len(a) >= 2
    for step, nxt in zip(a, a[1:]):
        assert nxt.at_ms >= step.at_ms + 300  # faults never overlap
    assert a[-1].at_ms + 300 <= 5000
    for step in a:
        get_fault(step.spec)  # every drawn spec is valid


def test_only_the_fanout_reader_reaches_before_ack() -> None:
    """The S3 acker's failpoint is the reader's: a fault may arm it there, a group consumer never reaches it."""
    from chaos.workload.failpoints import role_failpoints
    assert "before_ack" in role_failpoints("reader") and "before_apply" in role_failpoints("reader")
    assert "before_ack" not in role_failpoints("consumer")


def test_delete_consumer_at_before_apply_stops_its_victim_after_the_given_entries() -> None:
    """The accepted form of the refusals above: the victim (C1 unless target=) signals at its
    before_apply failpoint once `after` entries have passed it; at=time asks for no failpoint."""
    assert get_fault("delete-consumer:at=before_apply,after=5").failpoints() == {
        "C1": {"before_apply": {"action": "signal", "after": 5, "count": 1}}}
    assert get_fault("delete-consumer:at=before_apply,target=C3").failpoints() == {
        "C3": {"before_apply": {"action": "signal", "after": 10, "count": 1}}}
    assert get_fault("delete-consumer").failpoints() == {}
