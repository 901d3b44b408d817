"""A server of ours that is alive and running but misses its probe (a starved PostgreSQL on a
loaded machine) is not named until its probes have gone unanswered for SLOW_PATIENCE_S in a
row; one that died or was stopped is named at the next check, whatever the probe says.

The server here is a real process that accepts TCP connections and answers PING only while a
flag file exists: silent, it is exactly what a starved server looks like to the probe."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chaos.cluster import health
from chaos.cluster.health import Component, redis_probe

SERVER = r"""
import os, socket, sys, threading
flag = sys.argv[1]
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(16)
print(listener.getsockname()[1], flush=True)
held = []
def serve(conn):
    data = conn.recv(64)
    if os.path.exists(flag):
        conn.sendall(b"+PONG\r\n")
        conn.close()
    else:
        held.append(conn)            # silent: the probe waits for its timeout
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""


class OwnServer:
    """What health.Component reads of a server of ours: its process."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc

    def log_tail(self, lines: int = 20) -> str:
        return "(test server: no log)"


@pytest.fixture
def silent_server(tmp_path):
    flag = tmp_path / "answer"
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(flag)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        component = Component("PostgreSQL", "postgres", proc.pid, f"127.0.0.1:{port}", server=OwnServer(proc),
                              probe=redis_probe("127.0.0.1", port))
        yield component, flag
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
        proc.wait(5)
        proc.stdout.close()


def test_a_live_server_that_misses_its_probe_is_named_only_after_the_patience(silent_server, monkeypatch):
    component, _ = silent_server
    patience = 2.0
    monkeypatch.setattr(health, "SLOW_PATIENCE_S", patience)
    started = time.monotonic()
    first = component.problem(deep=True, timeout=0.2)
    # The patience runs from the first probe's miss, which the component notes when the probe
    # has timed out (0.2 s, later on a loaded machine): by the time `problem` returns. The
    # third probe waits from there, not from `started`, or a starved first probe leaves it short.
    first_missed = time.monotonic()
    second = component.problem(deep=True, timeout=0.2)
    if time.monotonic() - started >= patience:   # two 0.2 s probes outlasted the patience: a starved test
        pytest.skip(f"could not tell: two probes took {time.monotonic() - started:.1f} s, the patience is {patience} s")
    assert (first, second) == ("", "")                               # slow, not gone: not yet
    time.sleep(max(0.0, first_missed + patience + 0.05 - time.monotonic()))
    found = component.problem(deep=True, timeout=0.2)
    assert found.startswith(f"unreachable at {component.address}: "), found
    assert "alive and running, its probes unanswered for" in found


def test_an_answer_starts_the_patience_over(silent_server, monkeypatch):
    component, flag = silent_server
    monkeypatch.setattr(health, "SLOW_PATIENCE_S", 0.6)
    assert component.problem(deep=True, timeout=0.2) == ""
    time.sleep(0.5)
    flag.touch()
    # answered (the probe waits for the answer: a loaded run starved a 0.2 s probe past the
    # patience, 0.7 s from the first miss, and the answer this test is about never came)
    assert component.problem(deep=True, timeout=10.0) == ""
    flag.unlink()
    assert component.problem(deep=True, timeout=0.2) == ""          # silent again: a new window


@pytest.mark.parametrize("sig, expected", [(signal.SIGSTOP, "stopped (SIGSTOP)"), (signal.SIGKILL, "died: killed by SIGKILL")])
def test_a_stopped_or_killed_server_is_named_at_once_whatever_the_patience(silent_server, sig, expected):
    component, _ = silent_server
    assert health.SLOW_PATIENCE_S >= 10
    assert component.problem(deep=True, timeout=0.2) == ""          # silent and running: patience
    os.kill(component.pid, sig)
    deadline = time.monotonic() + 5
    found = ""
    while not found and time.monotonic() < deadline:
        found = component.problem(deep=True, timeout=0.2)
    assert found.startswith(expected), found


def test_a_server_that_is_not_ours_is_named_at_its_first_missed_probe(silent_server):
    component, _ = silent_server
    external = Component("PostgreSQL", "postgres", address=component.address, probe=component.probe)
    found = external.problem(timeout=0.2)
    assert found.startswith(f"unreachable at {component.address}: "), found
