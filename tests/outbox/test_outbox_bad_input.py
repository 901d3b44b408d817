"""Bad input to the outbox parts is rejected before anything starts, naming the fix."""
from __future__ import annotations

import pytest

from chaos.errors import BadArguments
from chaos.strategies.producer_outbox import OutboxNaive, OutboxPerKey
from chaos.workload.dispatcher import DispatcherConfig
from chaos.events import Event
from faults.kill_dispatcher import KillDispatcher

EVENTS = [Event("e1-1", "1", "created", 1, stream="orders"), Event("e1-2", "1", "paid", 2, stream="orders")]


@pytest.mark.parametrize("params, message", [
    ({"dispatchers": 0}, "dispatchers=0 is below its minimum 1"),
    ({"dispatchers": "x"}, "dispatchers='x' is not a valid int"),
    ({"poll_ms": 0}, "poll_ms=0.0 is below its minimum"),
    ({"fail_event": "e1-1", "rollback": "e1-1"}, "also rolled back"),
    ({"fail_event": "e1-2", "rollback": "e1-1/e1-2"}, "also rolled back"),
    ({"rollback": "e1-1+e1-2"}, "joined by '/', not '\\+'.*write rollback=e1-1/e1-2"),
    ({"bogus": 1}, "its parameters are"),
])
def test_producer_part_rejects(params, message):
    with pytest.raises(BadArguments, match=message):
        OutboxPerKey(**params)


@pytest.mark.parametrize("param", ["rollback", "fail_event", "stall_event"])
def test_an_unknown_event_is_rejected_naming_the_events(param):
    with pytest.raises(BadArguments, match=f"{param} names e9-9, which the workload does not have"):
        OutboxNaive(**{param: "e9-9"}).plans(EVENTS)


def test_rollback_is_a_list_written_with_slashes():
    """One grammar: a list parameter joins its items by '/', so a spec holding it stays one
    fault or part wherever a cell's faults are joined by '+'."""
    part = OutboxPerKey(rollback="e1-1/e1-2")
    assert part.rolled_back() == ["e1-1", "e1-2"]
    assert part.label() == "outbox-per-key:rollback=e1-1/e1-2"
    assert part.plans(EVENTS)[0].spec["rollback"] == ["e1-1", "e1-2"]


def test_plans_are_one_service_and_n_dispatchers():
    plans = OutboxPerKey(dispatchers=3, fail_event="e1-1").plans(EVENTS)
    assert [(p.name, p.role, p.kind) for p in plans] == [
        ("P-order", "outbox-producer", "producer"),
        ("dispatcher-1", "dispatcher", "dispatcher"), ("dispatcher-2", "dispatcher", "dispatcher"),
        ("dispatcher-3", "dispatcher", "dispatcher")]
    assert plans[1].respawn and plans[1].spec["dispatcher"] == {
        "mode": "per-key", "poll_ms": 100.0, "timeout_ms": 2000.0, "fail": {"event_id": "e1-1", "attempts": 2},
        "stall": None}


@pytest.mark.parametrize("config, message", [
    ({"mode": "fifo"}, "mode 'fifo' is unknown; use one of naive, per-key"),
    ({"poll_ms": -1}, "must be > 0"),
    ({"fail": {"attempts": 2}}, "give attempts and one of event_id, key, etype"),
    ({"fail": {"stream": "x"}}, "give attempts and one of"),
    ({"stall": {"ms": 5}}, "give ms and one of event_id, key, etype"),
])
def test_dispatcher_config_rejects(config, message):
    with pytest.raises(ValueError, match=message):
        DispatcherConfig(**config)


@pytest.mark.parametrize("params, message", [
    ({"at": "mid_batch"}, "not one of time, after_xadd_before_mark"),
    ({"at": "time", "event_id": "e1-1"}, "with at=time give at_ms"),
    ({"after": -1}, "after=-1 is below its minimum 0"),
    ({"hold_ms": 3}, "has no parameter hold_ms"),
])
def test_kill_dispatcher_rejects(params, message):
    with pytest.raises(BadArguments, match=message):
        KillDispatcher(**params)


def test_kill_dispatcher_arms_every_dispatcher_or_the_named_one_with_the_selector():
    assert KillDispatcher(key="1", after=2).failpoints() == {"dispatcher": {"after_xadd_before_mark": {
        "action": "signal", "after": 2, "count": 1, "key": "1"}}}
    assert KillDispatcher(target="dispatcher-2").failpoints() == {"dispatcher-2": {"after_xadd_before_mark": {
        "action": "signal", "after": 0, "count": 1}}}
    assert KillDispatcher(at="time", at_ms=50).failpoints() == {}
