"""scripts/loaded-run.sh: the suite beside CPU hogs; the hogs end whatever happens, and the
failures are printed at the end. Run for real on a tiny inner suite; the hogs here are
`sleep` processes ($LOADED_RUN_HOG), so that these tests do not load the suite they are in:
what is checked is that they start, are named, and end."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from .helpers import ROOT

SCRIPT = ROOT / "scripts" / "loaded-run.sh"
QUIET_HOGS = {"LOADED_RUN_HOG": "sleep 600"}
INNER = '''
import os, time

def test_passes():
    pass

def test_fails():
    assert 1 == 2, "inner failure"

def test_waits():
    if os.environ.get("LOADED_RUN_WAIT"):
        open(os.environ["LOADED_RUN_WAIT"], "w").close()
        time.sleep(120)
'''


def hog_pids(out: str) -> list[int]:
    match = re.search(r"CPU hog\(s\) \(pids ([\d ]+)\)", out)
    assert match, out[-2000:]
    return [int(p) for p in match.group(1).split()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:      # a zombie not yet reaped by init counts as gone
        return fh.read().rsplit(")", 1)[1].split()[0] != "Z"


def inner(tmp_path: Path) -> list[str]:
    (tmp_path / "test_inner.py").write_text(INNER)
    return ["--", str(tmp_path / "test_inner.py"), "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
            "--rootdir", str(tmp_path)]


def test_a_loaded_run_prints_its_failures_and_ends_its_hogs(tmp_path):
    log = tmp_path / "run.log"
    proc = subprocess.run(["bash", str(SCRIPT), "--hogs", "1", "--log", str(log), *inner(tmp_path)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, **QUIET_HOGS})
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    [hog] = hog_pids(proc.stdout)
    assert not alive(hog)
    tail = proc.stdout.split("loaded-run: pytest exit 1", 1)[1]
    assert "1 failure(s)/error(s):" in tail and "FAILED" in tail and "test_fails" in tail and "test_passes" not in tail
    assert "test_fails" in log.read_text()


def test_ctrl_c_ends_the_hogs(tmp_path):
    started = tmp_path / "started"
    proc = subprocess.Popen(["bash", str(SCRIPT), "--hogs", "2", "--log", str(tmp_path / "run.log"), *inner(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            env={**os.environ, **QUIET_HOGS, "LOADED_RUN_WAIT": str(started)})
    try:
        deadline = time.monotonic() + 240
        while not started.exists():
            assert time.monotonic() < deadline and proc.poll() is None, "the inner test never started"
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)          # what Ctrl-C in a terminal does
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    hogs = hog_pids(out)
    assert len(hogs) == 2 and not any(alive(p) for p in hogs), out[-2000:]
    assert proc.returncode != 0


def test_a_bad_hog_count_is_refused_before_anything_starts(tmp_path):
    proc = subprocess.run(["bash", str(SCRIPT), "--hogs", "two", "--log", str(tmp_path / "run.log")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 254 and proc.stdout == ""
    assert proc.stderr.strip() == "loaded-run: --hogs 'two' is not a whole number from 0 to 64; give e.g. --hogs 2"
    assert not (tmp_path / "run.log").exists()
