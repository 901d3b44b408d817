"""Run by tests/cluster in a child pytest (not collected by the outer run: no test_ prefix).

Each test writes what its worker's cluster runs to $CHAOS_SCENARIO_OUT/<worker>.json, then
does what $CHAOS_SCENARIO says: pass, fail, block (until killed) or isolate (a 4-worker
barrier that checks no other worker's data shows up in this worker's servers).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

OUT = Path(os.environ.get("CHAOS_SCENARIO_OUT", "."))
MODE = os.environ.get("CHAOS_SCENARIO", "pass")
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "master")
BARRIER_S = 120.0


def record(cluster) -> dict:
    owner = json.loads((cluster.base_dir / "owner.json").read_text())
    info = {"worker": WORKER, "pid": os.getpid(), "dir": str(cluster.base_dir),
            "processes": owner["processes"],
            "ports": sorted({cluster.primary.port, cluster.replica.port, cluster.postgres.port, cluster.api.port,
                             *(cluster.proxy_endpoint(p).port for p in cluster.links.values())})}
    tmp = OUT / f"{WORKER}.json.tmp"
    tmp.write_text(json.dumps(info))
    tmp.replace(OUT / f"{WORKER}.json")
    return info


def test_scenario(cluster, redis_primary, postgres):
    redis_primary.set("owner", WORKER)
    postgres.execute("CREATE TABLE owner (worker text)")
    postgres.execute("INSERT INTO owner VALUES (%s)", (WORKER,))
    record(cluster)
    if MODE == "fail":
        pytest.fail("this scenario fails on purpose")
    elif MODE == "block":
        time.sleep(300)  # until the outer test kills us
    elif MODE == "isolate":
        expected = int(os.environ["CHAOS_SCENARIO_WORKERS"])
        deadline = time.monotonic() + BARRIER_S
        while len(list(OUT.glob("*.json"))) < expected:
            assert time.monotonic() < deadline, "not every worker reached the barrier"
            time.sleep(0.05)
        redis_primary.set(f"seen-by-{WORKER}", "1")
        time.sleep(0.5)   # the other workers write their keys now: none may show up here
        assert redis_primary.get("owner") == WORKER
        assert sorted(redis_primary.keys("*")) == sorted(["owner", f"seen-by-{WORKER}"])
        assert postgres.execute("SELECT worker FROM owner").fetchall() == [(WORKER,)]
