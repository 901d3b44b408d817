"""Shared by the fault tests that start their own processes."""
from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator

import pytest


@pytest.fixture
def started_processes() -> Iterator[list[subprocess.Popen]]:
    """A list a test appends its `Popen`s (started with stdout=PIPE) to; each still running at
    the end is continued (a fault may have SIGSTOPped it) and killed, whatever the test did."""
    started: list[subprocess.Popen] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
        proc.wait(5)
        proc.stdout.close()
