"""A fault that cannot act or heal makes the cell error, and the cluster comes back sound."""
from __future__ import annotations

import pytest

from chaos import cellrun
from chaos.expectations.cells import Cell
from chaos.expectations.table import eq
from faults import get_fault
from faults.interface import FaultError
from faults.local import LocalContext


def test_a_fault_that_never_fires_errors_the_cell_and_rebuilds_the_cluster(cluster, chaos_options) -> None:
    # No event of type `shipped` in the pair workload: the stall failpoint is never reached.
    cell = Cell("s5", ("xautoclaim:etype=shipped,wait_ms=300",), 1, dict(lost=eq(0)))
    old_primary = str(cluster.primary)
    with pytest.warns(UserWarning, match="rebuilt"), pytest.raises(FaultError, match="failpoint 'before_apply'"):
        cellrun.run(cell, cluster, chaos_options)
    assert str(cluster.primary) != old_primary, "the topology was not rebuilt"
    r = cluster.direct_redis()
    r.set("k", "v")
    cluster.wait_replication()
    assert cluster.direct_redis("replica").get("k") == "v"


def test_heal_promotes_when_the_primary_was_killed_but_not_replaced(cluster) -> None:
    ctx = LocalContext(cluster, seed=1)
    fault = get_fault("promote-replica")
    fault.arm(ctx)
    cluster.kill_primary()       # as if run() died right after its kill
    fault.failover.killed = True
    fault.heal(ctx)
    assert cluster.failed_over
    assert cluster.direct_redis().ping()
