"""The load side of the workload: many-orders up to 1,000 events per key, workloads too large
for the machine refused up front, and the pipelined producer's history staying exact when a
real SIGKILL hits it mid-batch."""
from __future__ import annotations

import random

import pytest

import chaos.strategies  # noqa: F401 - loads the parts in dependency order
from chaos.errors import BadArguments
from chaos.history import read_history
from chaos.run import run_cell
from chaos.strategies.event_plans import ETYPES, ManyOrders, etype_of


def test_many_orders_numbers_the_statuses_past_the_named_ones():
    events = ManyOrders(keys=3, events=1000, cost_ms=0).make_events(random.Random(1))
    assert len(events) == 3000
    for key in ("1", "2", "3"):
        mine = [e for e in events if e.key == key]
        assert [e.version for e in mine] == list(range(1, 1001))  # per-key order, versions 1..E
        assert [e.etype for e in mine[:5]] == list(ETYPES)
        assert mine[5].etype == "step-6" and mine[-1].etype == "step-1000"
    assert etype_of(1000) == "step-1000"


def test_many_orders_above_1000_events_per_key_is_refused_naming_the_limit():
    with pytest.raises(BadArguments, match="events=1001 is above its maximum 1000"):
        ManyOrders(keys=1, events=1001)


def test_a_workload_too_large_for_the_machine_is_refused_with_the_size_it_needs():
    with pytest.raises(BadArguments) as info:
        ManyOrders(keys=100_000, events=1000)  # 10^8 events
    text = str(info.value)
    assert "100,000,000 events need about" in text and "GB" in text
    assert "lower keys/events/jobs" in text


def test_sigkill_of_the_pipelined_producer_mid_batch_keeps_the_counts_exact(cluster, tmp_path):
    """10^5 events due at once go out in pipelines; the producer is SIGKILLed after 2,000
    entries are in the stream. Every entry in the stream must have its publish invoke in the
    history (none `unexpected`), and every publish the history calls ok must be handled."""
    result = run_cell(cluster, "s1", ["kill-consumer:role=producer,after_entries=2000,at_ms=0"],
                      parts={"workload": "many-orders:keys=100,events=1000,cost_ms=0",
                             "producer": "direct", "guard": "noop",
                             "delivery": "single:count=200", "ack": "after:batch=1"},
                      run_root=tmp_path / "runs", keep_runs="always")
    run = result.runs[0].counts
    history = read_history(result.run_dirs[0])
    invokes = sum(1 for op in history if op["f"] == "publish" and op["type"] == "invoke")
    oks = {op["event_id"] for op in history if op["f"] == "publish" and op["type"] == "ok"}
    assert 2000 <= invokes < 100_000, "the kill must land while the producer is publishing"
    assert run.unexpected == 0, "an entry reached the stream without its invoke in the history"
    assert run.lost == 0
    # the batch in flight at the kill reached the stream with invokes and no outcome: those
    # count as published because they were seen downstream, so published >= the oks
    assert run.published >= max(len(oks), 2000)
    assert run.duplicated == 0 and run.reordered == 0  # (noop writes no state: the final state is not checked)
