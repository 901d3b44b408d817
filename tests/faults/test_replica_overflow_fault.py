"""replica-overflow on a real primary/replica pair: the limit drops the stalled replica, the
failover then promotes a replica that lacks what was written since the stall."""
from __future__ import annotations

import pytest

from chaos.errors import BadArguments
from faults import get_fault
from faults.local import FaultThread, LocalContext


@pytest.mark.parametrize("spec, message", [
    ("replica-overflow:limit_kb=1024,burst_kb=512", "cannot overflow a limit"),
    ("replica-overflow:limit_kb=8", "give limit_kb >= 16"),
    ("replica-overflow:resync_kbps=0", "give resync_kbps >= 1"),
    ("replica-overflow:stall_ms=100", "no parameter stall_ms"),
])
def test_bad_parameters_are_refused_with_the_fix(spec, message) -> None:
    with pytest.raises(BadArguments, match=message):
        get_fault(spec)


def test_limit_drops_the_stalled_replica_and_the_failover_loses_the_writes_since(cluster) -> None:
    old = cluster.direct_redis()
    old.xadd("orders", {"event_id": "before"})
    ctx = LocalContext(cluster, seed=1)
    FaultThread(get_fault("replica-overflow:after_entries=1,at_ms=0,resync_ms=200"), ctx).start().join(60)
    seen = {op["value"].get("step"): op["value"] for op in ctx.ops}
    assert set(seen) >= {"stall", "link-lost", "kill", "promote"}, seen
    assert seen["link-lost"]["burst_kb"] > 256, "the filler passed the 256 KB limit before the drop"
    assert seen["promote"]["failed_over"] and seen["promote"]["unreplicated_bytes"] > 0, seen["promote"]
    promoted = cluster.direct_redis("primary")
    assert promoted.info("replication")["role"] == "master"
    assert [f["event_id"] for _, f in promoted.xrange("orders")] == ["before"]
    assert cluster.api.toxics(cluster.links["replication"]) == []
