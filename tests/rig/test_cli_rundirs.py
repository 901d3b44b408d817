"""`python -m chaos run` as a user runs it: its run dirs are bounded like pytest's kept dirs,
and nothing it started outlives it, not even as a zombie, also after a Ctrl-C mid-run.

"Nothing left" is checked two ways: every process of the command's session (it runs under a
new one, as with `setsid`; zombies count, a tool listing the group sees them), and every
process seen descending from it during the run (servers are their own group leaders and
PostgreSQL's children their own session leaders) that still exists with the same start time.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from chaos.cli import build_parser
from chaos.cli.options import bound_runs_root, new_run_dir, release_run_dir
from chaos.cluster.rundirs import process_started, same_process

from test_cli_errors import ROOT, clean_env

STAMP = "20261130T120000"


def cell_dirs(root: Path, *ages_s: float) -> list[Path]:
    """Run dirs as the CLI names them, each `age` seconds old, 1 KB each."""
    made = []
    for n, age in enumerate(ages_s):
        path = root / f"s5-{STAMP}-{1000 + n}"
        (path / "run-0").mkdir(parents=True)
        (path / "run-0" / "C1.log").write_bytes(b"x" * 1024)
        stamp = time.time() - age
        os.utime(path, (stamp, stamp))
        made.append(path)
    return made


def test_the_runs_root_is_bounded_like_kept_dirs_sparing_what_is_named_live_or_not_ours(tmp_path, monkeypatch):
    monkeypatch.setenv("CHAOS_KEPT_DIRS", "1")
    for var in ("CHAOS_KEPT_MB", "CHAOS_KEPT_DAYS"):
        monkeypatch.delenv(var, raising=False)
    newest, named, old = cell_dirs(tmp_path, 10, 20, 30)
    crash = tmp_path / f"crash-run-{STAMP}-77.txt"
    crash.write_text("Traceback ...")
    os.utime(crash, (time.time() - 40, time.time() - 40))
    mine = [tmp_path / "notes", tmp_path / "readme.txt", tmp_path / ".writable-1"]   # the user's, or hidden
    mine[0].mkdir()
    for path in mine[1:]:
        path.write_text("keep me")
    live = new_run_dir(tmp_path, "s5")          # a cell under way (owned by this process)
    (live / "run-0").mkdir()
    os.utime(live, (time.time() - 50, time.time() - 50))

    removed = bound_runs_root(tmp_path, spare=[named])

    assert sorted(removed) == sorted([old, crash])
    assert all(p.exists() for p in (newest, named, live, *mine))
    release_run_dir(live)                       # the cell is over: it is subject to retention
    os.utime(live, (time.time() - 50, time.time() - 50))
    assert bound_runs_root(tmp_path) == [named, live] and newest.exists()


def test_help_says_where_run_dirs_go_and_how_they_are_bounded():
    text = " ".join(build_parser()._subparsers._group_actions[0].choices["run"].format_help().split())
    for words in ("--run-dir", "CHAOS_RUNS_DIR", "mismatching or unknown cell", "CHAOS_KEPT_DIRS",
                  "CHAOS_KEPT_MB", "CHAOS_KEPT_DAYS"):
        assert words in text, text


class Watched:
    """`python -m chaos ARGS` in a new session (SIGINT at its default, as in a terminal), its
    descendants recorded every 50 ms while it runs."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "chaos", *args], cwd=ROOT, env=env, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        self.seen: dict[int, tuple[float, str]] = {}
        self.stderr: list[str] = []
        self.progress = threading.Event()
        self.stdout: list[str] = []
        self.readers = [threading.Thread(target=self._read_stderr, daemon=True),
                        threading.Thread(target=lambda: self.stdout.extend(self.proc.stdout), daemon=True)]
        for reader in self.readers:
            reader.start()
        threading.Thread(target=self._watch, daemon=True).start()

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            self.stderr.append(line)
            if "] run 1/" in line:
                self.progress.set()

    def _watch(self) -> None:
        try:
            me = psutil.Process(self.proc.pid)
        except psutil.Error:
            return
        while self.proc.poll() is None:
            try:
                for child in me.children(recursive=True):
                    self.seen.setdefault(child.pid, (process_started(child.pid), " ".join(child.cmdline())[:120]))
            except psutil.Error:
                pass
            time.sleep(0.05)

    def wait(self, timeout: float) -> tuple[int, str]:
        try:
            self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            for reader in self.readers:
                reader.join(10)
        return self.proc.returncode, "".join(self.stdout)

    def left(self) -> list[str]:
        """What of the command still exists (zombies included); SIGKILLed so a failure leaves nothing."""
        found = {}
        for proc in psutil.process_iter(["pid", "status", "cmdline"]):
            try:
                if os.getsid(proc.pid) == self.proc.pid:
                    found[proc.pid] = f"{proc.pid} ({proc.info['status']}, in the session): " \
                                      f"{' '.join(proc.info['cmdline'] or []) or self.seen.get(proc.pid)}"
            except (OSError, psutil.Error):
                continue
        for pid, (started, cmd) in self.seen.items():
            try:
                proc = psutil.Process(pid)
                if started is not None and same_process(pid, started):
                    found.setdefault(pid, f"{pid} ({proc.status()}, started by the run): {cmd}")
            except psutil.Error:
                continue
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        return sorted(found.values())


def test_a_run_that_ends_leaves_nothing_and_bounds_the_runs_root(tmp_path):
    runs = tmp_path / "runs"
    old = cell_dirs(runs, 10, 20, 30)
    cli = Watched(["run", "--preset", "p1-naive", "--runs", "1", "--time-scale", "0.3", "--json"],
                  {**clean_env(), "CHAOS_RUNS_DIR": str(runs), "CHAOS_KEPT_DIRS": "1"})
    code, out = cli.wait(timeout=120)
    left = cli.left()
    assert code == 0, "".join(cli.stderr)
    assert json.loads(out)["run_dir"] is None, "a cell that matches its expectation keeps no run dir"
    assert any("forkserver" in cmd for _, cmd in cli.seen.values()), "the run used worker processes"
    assert left == [], left
    assert sorted(runs.iterdir()) == [old[0]], "the retention ran after the cell: the newest one dir is kept"


def test_ctrl_c_mid_run_exits_130_and_leaves_nothing(tmp_path):
    runs = tmp_path / "runs"
    cli = Watched(["run", "--preset", "s5", "--fault", "kill-consumer", "--runs", "4"],
                  {**clean_env(), "CHAOS_RUNS_DIR": str(runs)})
    try:
        assert cli.progress.wait(90), "".join(cli.stderr)
        time.sleep(0.3)                                  # into run 2: workers, faults and proxies busy
        os.killpg(cli.proc.pid, signal.SIGINT)           # what a terminal's Ctrl-C does: the whole group
    finally:
        code, _ = cli.wait(timeout=60)
    left = cli.left()
    assert code == 130 and "interrupted" in "".join(cli.stderr), "".join(cli.stderr)
    assert left == [], left
    kept = [p for p in runs.iterdir() if not p.name.startswith(".")]
    assert len(kept) == 1 and not (kept[0] / "owner.json").exists(), \
        "the interrupted cell's dir stays (for a look), released to the retention"
    assert f"interrupted: the cell's run dirs so far are in {kept[0]}" in "".join(cli.stderr)


# An unknown cell keeps the dir it names even when the bound keeps none: test_run_rig_cli.py (its CLI runs
# with a killed rig part are those cells).
