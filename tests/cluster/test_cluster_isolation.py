"""Four xdist workers get four clusters that share nothing: ports, dirs, data."""
from __future__ import annotations

from childrun import wait_no_survivors


def test_four_xdist_workers_get_isolated_clusters(child_pytest):
    run = child_pytest("isolate", workers=4)
    assert run.wait(300) == 0, run.output()
    records = run.records(count=4)
    assert sorted(r["worker"] for r in records) == ["gw0", "gw1", "gw2", "gw3"]
    assert len({r["dir"] for r in records}) == 4
    ports = [port for r in records for port in r["ports"]]
    assert len(ports) == len(set(ports)), "two workers' clusters share a port"
    assert wait_no_survivors(records) == []
