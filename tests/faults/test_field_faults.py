"""group-loss and delete-consumer on a real Redis: what vanishes or is dropped, read in the same
script that removes it; long-job's refusals name the fix."""
from __future__ import annotations

import pytest

from chaos.errors import BadArguments
from chaos.strategies.presets import resolve
from faults import get_fault
from faults.delete_consumer import delete_consumer
from faults.group_loss import vanish
from faults.interface import Plan


def _stream(r, name: str, group: str = "g") -> list[str]:
    r.delete(name)
    r.xgroup_create(name, group, id="0", mkstream=True)
    return [r.xadd(name, {"event_id": f"e{i}", "key": str(i)}) for i in range(1, 5)]


def test_evict_reads_what_vanishes_and_deletes_stream_group_and_pel_at_once(cluster) -> None:
    r = cluster.direct_redis()
    _stream(r, "field-orders")
    r.xreadgroup("g", "C1", {"field-orders": ">"}, count=2)           # e1, e2 pending
    r.xreadgroup("g", "C2", {"field-orders": ">"}, count=1)           # e3 pending
    r.xack("field-orders", "g", r.xpending_range("field-orders", "g", "-", "+", 10, "C2")[0]["message_id"])
    gone = vanish(r, ["field-orders"], "", delete=True)
    assert gone == {"entries": {"field-orders": 4}, "vanished_events": ["e1", "e2", "e3", "e4"],
                    "pending_events": ["e1", "e2"], "undelivered_events": ["e4"]}
    assert not r.exists("field-orders")
    with pytest.raises(Exception, match="NOGROUP"):
        r.xreadgroup("g", "C1", {"field-orders": ">"})


def test_delconsumer_drops_only_that_consumers_pel_in_every_group(cluster) -> None:
    r = cluster.direct_redis()
    ids = _stream(r, "field-del", group="workers")
    r.xreadgroup("workers", "C1", {"field-del": ">"}, count=2)
    r.xreadgroup("workers", "C2", {"field-del": ">"}, count=1)
    dropped = delete_consumer(r, ["field-del"], "C1")
    assert dropped == {"dropped_entries": {"field-del": ids[:2]}, "dropped_events": ["e1", "e2"],
                       "unsettled": 2}
    left = r.xpending_range("field-del", "workers", "-", "+", 10)
    assert [(p["message_id"], p["consumer"]) for p in left] == [(ids[2], "C2")]
    _, claimed, *_ = r.xautoclaim("field-del", "workers", "C2", 0)    # nobody can claim the dropped ones
    assert [entry_id for entry_id, _ in claimed] == [ids[2]]
    r.delete("field-del")


@pytest.mark.parametrize("preset, spec, words", [
    ("baseline", "long-job:event_id=e42-1", ["never claims", "claim=always"]),
    ("s3:claim=always", "long-job:event_id=e42-1", ["never claims", "delivery fanout"]),
    ("baseline:claim=always", "long-job:event_id=e42-1,claimers=2", ["has 2 consumer(s)", "needs 3"]),
    ("baseline:claim=always,claim_idle_ms=2000", "long-job:duration_ms=1500", ["does not outlast claim_idle_ms=2000"]),
])
def test_long_job_that_cannot_be_claimed_is_refused_with_the_fix(preset, spec, words) -> None:
    with pytest.raises(BadArguments) as info:
        get_fault(spec).check(Plan(strategy=resolve(preset)))
    assert all(w in str(info.value) for w in words), str(info.value)


def test_long_job_selectors_are_exclusive_and_every_k_arms_a_repeating_failpoint() -> None:
    with pytest.raises(BadArguments, match="one selector"):
        get_fault("long-job:event_id=e1-1,every=3")
    point = get_fault("long-job:every=3,duration_ms=900").failpoints()["consumer"]["in_work"]
    assert point["every"] == 3 and point["pause_ms"] == 900 and point["count"] > 1000
    get_fault("long-job:event_id=e42-1").check(Plan(strategy=resolve("baseline:claim=always,claim_idle_ms=300")))


def test_a_failpoint_with_every_k_fires_on_the_kth_hits() -> None:
    from chaos.workload.failpoints import Failpoint
    point = Failpoint("in_work", "pause", count=10**9, every=3)
    assert [n for n in range(1, 10) if point.due(None, None, None)] == [3, 6, 9]


def test_delete_only_when_holding_deletes_nothing_from_a_consumer_with_an_empty_pel(cluster) -> None:
    r = cluster.direct_redis()
    _stream(r, "field-hold")
    r.xreadgroup("g", "C1", {"field-hold": ">"}, count=1)
    r.xack("field-hold", "g", r.xpending_range("field-hold", "g", "-", "+", 10, "C1")[0]["message_id"])
    assert delete_consumer(r, ["field-hold"], "C1", only_holding=True) is None
    assert [c["name"] for c in r.xinfo_consumers("field-hold", "g")] == ["C1"], "deleted though it held nothing"
    r.xreadgroup("g", "C1", {"field-hold": ">"}, count=1)
    assert delete_consumer(r, ["field-hold"], "C1", only_holding=True)["unsettled"] == 1
    assert r.xinfo_consumers("field-hold", "g") == []


def test_the_trim_counts_the_unacked_entries_it_removes(cluster) -> None:
    from faults.maxlen_trim import trim
    r = cluster.direct_redis()
    _stream(r, "field-trim")                                             # e1..e4
    r.xreadgroup("g", "C1", {"field-trim": ">"}, count=2)               # e1, e2 pending
    r.xack("field-trim", "g", r.xpending_range("field-trim", "g", "-", "+", 10, "C1")[0]["message_id"])  # e1 acked
    assert trim(r, ["field-trim"], 1) == {"trimmed": {"field-trim": 3}, "unsettled": {"field-trim": 2}}  # e2, e3
    assert r.xlen("field-trim") == 1
    assert trim(r, ["field-trim"], 5) == {"trimmed": {"field-trim": 0}, "unsettled": {"field-trim": 0}}


def test_long_job_freshens_the_job_only_in_its_holders_name(cluster) -> None:
    """The script long-job keeps the job's entry fresh with: idle back to 0 while the consumer it
    names holds it, no delivery counted; a claim that came meanwhile is not undone."""
    from faults.long_job import _FRESHEN
    r = cluster.direct_redis()
    job, _, *_ = _stream(r, "field-fresh")
    r.xreadgroup("g", "C1", {"field-fresh": ">"}, count=1)
    r.xclaim("field-fresh", "g", "C1", 0, [job], idle=5000, justid=True)      # idle 5 s, as if long held
    assert r.eval(_FRESHEN, 1, "field-fresh", "g", job, "C1") == 1
    held = r.xpending_range("field-fresh", "g", job, job, 1)[0]
    assert (held["consumer"], held["times_delivered"]) == ("C1", 1) and held["time_since_delivered"] < 1000
    r.xclaim("field-fresh", "g", "C2", 0, [job])                              # claimed meanwhile
    assert r.eval(_FRESHEN, 1, "field-fresh", "g", job, "C1") == 0
    assert r.xpending_range("field-fresh", "g", job, job, 1)[0]["consumer"] == "C2"
    r.delete("field-fresh")


def test_long_job_claim_waits_for_a_holder_slower_than_the_min_idle(cluster) -> None:
    """The claim comes after the holder stopped at in_work even when its way there (its first
    PostgreSQL connection, BEGIN and a SELECT: here through a 300 ms latency toxic on the consumers'
    PostgreSQL links) takes longer than the 1 s min-idle, as beside two CPU hogs: without the
    fault's freshening the claim came first and the run was unknown (the effect missing).
    `paid` comes at 3 s, so the other consumer is free to claim meanwhile; the latency fault
    starts first (a fault that starts inside long-job's window would count as one it ran)."""
    import json
    from pathlib import Path

    from chaos.run import run_cell
    cell = run_cell(cluster, "s5:claim=always,claim_idle_ms=1000",
                    ["latency:link=postgres,target=consumer,latency_ms=300,stream=downstream,duration_ms=2000",
                     "long-job:event_id=e42-1,duration_ms=100,until_claimed=1"],
                    runs=1, parts={"workload": "pair:created_ms=100,paid_at_ms=3000"}, keep_runs="always")
    ops = sorted((json.loads(line) for path in (Path(cell.run_dirs[0]) / "history").glob("*.jsonl")
                  for line in path.read_text().splitlines() if line), key=lambda op: op["time"])
    job = [op for op in ops if op.get("event_id") == "e42-1"]
    read = next(op for op in job if op["f"] == "deliver" and op.get("via") == "read")
    stop = next(op for op in job if op["f"] == "failpoint" and op["process"] == read["process"])
    claim = next(op for op in job if op["f"] == "deliver" and op.get("via") == "claim")
    assert stop["time"] - read["time"] > 1.0, "the holder was not slower than the min-idle: nothing tested"
    assert claim["time"] > stop["time"], (read, stop, claim)
    assert cell.verdict != "unknown", cell.unknown_reasons


def test_group_loss_without_catch_up_meets_a_backlog_however_fast_the_consumer(cluster) -> None:
    """catch_up=false: the loss meets entries nobody has read, even where the consumer keeps up
    with its producer (here 40 ms between publishes, 1 ms of work): each consumer stops before
    applying its first entry and the loss waits for it. Stopped from outside once the producer
    had stopped, such a consumer had read everything (a slow outbox relay beside two CPU hogs:
    stream-lost 0 in a run, the row's race missed)."""
    from chaos.run import run_cell
    cell = run_cell(cluster, "s1:on_nogroup=recreate-from-0",
                    ["group-loss:after_entries=20,at_ms=0,window=10,catch_up=false"], runs=1,
                    parts={"workload": "many-orders:keys=10,events=5,gap_ms=40,cost_ms=1"}, keep_runs="never")
    assert cell.anomaly_counts.get("stream-lost") == 19, (cell.anomaly_counts, cell.unknown_reasons)
