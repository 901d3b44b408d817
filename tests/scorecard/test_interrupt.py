"""Ctrl-C stops the scorecard: exit 130, no further fault, nothing left running.

Where the interrupt lands inside a client library (psycopg turns it into a cancelled query, an
ordinary error), the card once graded that cell unknown and went on through the catalogue; the
CLI's own flag now stops it after that cell. This test interrupts the first cell's workload and
holds the contract whichever way the interrupt surfaces."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tests.scorecard.test_cli import CAS, ROOT, small_config

FAULTS = "partition,pause,publish-blip"


def _ours(pid: int) -> list[str]:
    """Processes started for the scorecard of ``pid`` (its topology's dirs are named sc-<pid>-...)."""
    mark = f"sc-{pid}-"
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if mark in cmdline:
            found.append(cmdline[:160])
    return found


@pytest.mark.slow(seconds=2)
def test_ctrl_c_ends_the_card_after_the_cell_it_hit(tmp_path):
    config = small_config(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    log = tmp_path / "stderr"
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "chaos", "scorecard", CAS[0], CAS[1], "--worker-config",
                                 str(config), "--faults", FAULTS, "--out", str(tmp_path / "out"),
                                 "--run-dir", str(tmp_path / "runs")], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                stderr=err, text=True)
        try:
            deadline = time.monotonic() + 120
            while "publishing" not in log.read_text():     # the first cell's workload is under way
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)
            time.sleep(0.5)                                  # inside the first cell's fault window
            proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    text = log.read_text()
    assert code == 130, text[-3000:]
    assert "[2/" not in text, f"the card went on after Ctrl-C:\n{text[-3000:]}"
    assert text.rstrip().splitlines()[-1].startswith("interrupted"), text[-3000:]
    deadline = time.monotonic() + 10
    while (left := _ours(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"still running after the scorecard ended: {left}"
