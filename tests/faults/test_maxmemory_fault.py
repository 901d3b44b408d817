"""maxmemory on a real primary: XADD refused with OOM, reads and acks still served, then lifted."""
from __future__ import annotations

import time

import pytest
import redis

from chaos.errors import BadArguments
from faults import get_fault
from faults.local import FaultThread, LocalContext


@pytest.mark.parametrize("spec, message", [
    ("maxmemory:headroom=1", "no parameter headroom"),
    ("maxmemory:duration_ms=0", "give duration_ms >= 1"),
    ("maxmemory:headroom_kb=lots", "not a valid int"),
    ("maxmemory:after_entries=-1", "give after_entries >= 0"),
])
def test_bad_parameters_are_refused_with_the_fix(spec, message) -> None:
    with pytest.raises(BadArguments, match=message):
        get_fault(spec)


def test_cap_refuses_xadd_serves_reads_and_acks_then_lifts(cluster) -> None:
    r = cluster.direct_redis()
    r.xgroup_create("orders", "g", mkstream=True)
    for i in range(50):
        r.xadd("orders", {"event_id": f"e{i}"})
    ctx = LocalContext(cluster, seed=1)
    thread = FaultThread(get_fault("maxmemory:after_entries=50,duration_ms=1500"), ctx).start()
    deadline = time.monotonic() + 5
    while "start" not in ctx.phases("maxmemory") and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        r.xadd("orders", {"event_id": "refused"})
    read = r.xreadgroup("g", "c1", {"orders": ">"}, count=10)
    assert len(read[0][1]) == 10, "XREADGROUP is not denyoom: consumers keep draining"
    assert r.xack("orders", "g", *[entry_id for entry_id, _ in read[0][1]]) == 10
    thread.join(10)
    assert ctx.phases("maxmemory") == ["start", "info", "stop"]
    lifted = [op["value"] for op in ctx.ops if op["value"].get("step") == "lifted"][0]
    assert lifted["oom_refusals"] >= 1
    assert r.config_get("maxmemory")["maxmemory"] == "0"
    assert r.xadd("orders", {"event_id": "after"})
