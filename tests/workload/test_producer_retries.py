"""The retrying producer spaces its retries from an event's first attempt as made, not as planned.

A producer that runs late (a loaded machine, or released late from its before_publish failpoint,
where the failover faults hold it) used to have retry k due at the event's planned time +
backoff*2^(k-1): already due, so every attempt went out in one burst and a short outage took the
event. Here a real producer process is held 800 ms at its failpoint before an event due at 0, its
link refused (nothing listens on the port): its retries must still come 500 and 1000 ms after the
first attempt (old code: at once and ~200 ms after it).
"""
from __future__ import annotations

import socket
from pathlib import Path

from chaos.history import read_history
from chaos.workload.forkserver import fork_server

HELD_MS = 800.0
SLACK_S = 0.02   # the history's clock against the producer's sleep (it never wakes early)


def _refused_url() -> str:
    """A Redis URL on a local port nobody listens on (the connect is refused: a `fail`)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"redis://127.0.0.1:{port}/0"


def _late_producer(run_dir: Path) -> dict:
    event = {"event_id": "e1-1", "key": "1", "etype": "created", "version": 1, "cost_ms": 0.0, "at_ms": 0.0,
             "producer": "P-order", "poison": False, "stream": "orders", "barrier": ""}
    return {"role": "producer", "name": "P-order", "run_dir": str(run_dir), "redis_url": _refused_url(),
            "pg_dsn": "", "time_scale": 1.0, "gate": False, "events": [event],
            "failpoints": {"before_publish": {"action": "pause", "pause_ms": HELD_MS, "count": 1}},
            "producer": {"name": "retrying", "params": {"retries": 2, "backoff_ms": 500.0}}}


def test_retries_count_from_the_first_attempt_of_a_late_producer(tmp_path):
    child = fork_server().spawn(_late_producer(tmp_path), tmp_path / "p.log")
    try:
        assert child.wait(20) == 0, (tmp_path / "p.log").read_text()
    finally:
        if child.alive():
            child.kill()
            child.wait(10)
    history = read_history(tmp_path)
    held = [op["time"] for op in history if op["f"] == "failpoint" and op["value"]["name"] == "before_publish"]
    tries = [op for op in history if op["f"] == "publish"]
    invokes = [op["time"] for op in tries if op["type"] == "invoke"]
    assert [op["type"] for op in tries] == ["invoke", "fail"] * 3, tries
    assert held and invokes[0] - held[0] >= HELD_MS / 1000 - SLACK_S, (
        f"the producer was not late: failpoint at {held}, first attempt at {invokes[0]}")
    gaps = [round(t - invokes[0], 3) for t in invokes[1:]]
    assert gaps[0] >= 0.5 - SLACK_S and gaps[1] >= 1.0 - SLACK_S, (
        f"retries {gaps} s after the first attempt, not 0.5 and 1.0 s (due from the planned time?)")
