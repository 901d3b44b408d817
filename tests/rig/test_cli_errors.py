"""What `python -m chaos` prints when it cannot or must not go on, run as a user runs it.

Bad input or configuration: exit 254, exactly one line on stderr naming the fix (never a
traceback), nothing started (no process carrying the run's marker, no cluster dir, no run
dir). A framework crash: exit 255, one line naming the exception and a traceback file that
exists; with --json, the cell that finished is still printed.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from chaos.cluster.rundirs import base_dir
from rig_helpers import marked_processes

ROOT = Path(__file__).resolve().parents[2]
EXT = {"CHAOS_REDIS_PRIMARY": "127.0.0.1:{closed}", "CHAOS_REDIS_REPLICA": "127.0.0.1:{closed}",
       "CHAOS_POSTGRES": "127.0.0.1:{closed}", "TOXIPROXY_URL": "http://127.0.0.1:{closed}"}
SMALL = ["--preset", "s1", "--part", "workload=many-orders:keys=2,events=2,cost_ms=0", "--runs", "1"]


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str
    pid: int
    marker: str
    runs: Path


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("CHAOS_") or k.startswith("PYTEST_") or k == "TOXIPROXY_URL")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**env, **extra}


def chaos_cli(args: list[str], tmp_path: Path, env: dict[str, str] | None = None, argv0: list[str] | None = None,
              timeout: float = 120) -> Outcome:
    marker = uuid.uuid4().hex
    runs = tmp_path / "runs"
    env = {**clean_env(), **(env or {}), "CHAOS_RUNS_DIR": str(runs), "CHAOS_TEST_MARKER": marker}
    proc = subprocess.Popen([*(argv0 or [sys.executable, "-m", "chaos"]), *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
    return Outcome(proc.returncode, stdout, stderr, proc.pid, marker, runs)


def assert_bad_input(out: Outcome, *words: str) -> str:
    lines = out.stderr.splitlines()
    assert out.code == 254, out.stderr
    assert "Traceback" not in out.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    for word in words:
        assert word in lines[0], lines[0]
    assert out.stdout == ""
    assert not out.runs.exists() or not any(out.runs.iterdir()), list(out.runs.iterdir())
    try:
        base = base_dir()
    except OSError:       # CHAOS_CLUSTER_BASE is the bad input: nothing can be made there
        base = None
    # A dir the CLI would make names its pid as a whole dash-separated part (bb-<pid>-<hex>,
    # <stamp>-<pid>): a glob on the digits alone also matches another process's pid 12853.
    made = [] if base is None or not base.is_dir() else [d.name for d in base.iterdir() if str(out.pid) in d.name.split("-")]
    assert not made, f"a cluster dir was made: {made}"
    if out.marker:
        assert not marked_processes(out.marker)
    return lines[0]


def _started_by(me: psutil.Process, before: set[int]) -> list[psutil.Process]:
    """The live processes below `me` that are new, except a backend that the session's own
    PostgreSQL forked meanwhile (its autovacuum worker launches on its own timer): that is the
    server's, not the command's."""
    new = []
    for p in me.children(recursive=True):
        try:
            if p.pid in before or p.status() == psutil.STATUS_ZOMBIE:
                continue
            if p.name() == "postgres" and p.ppid() in before:
                continue
            new.append(p)
        except psutil.NoSuchProcess:
            continue
    return new


def in_process(args: list[str], tmp_path: Path, env: dict[str, str], monkeypatch, capfd) -> Outcome:
    """``main(args)`` in this process (no interpreter start per case); new child processes
    that are still alive afterwards count as started."""
    from chaos.cli import main

    for key in list(os.environ):
        if key.startswith("CHAOS_") or key.startswith("PYTEST_XDIST") or key == "TOXIPROXY_URL":
            monkeypatch.delenv(key)
    runs = tmp_path / "runs"
    for key, value in {**env, "CHAOS_RUNS_DIR": str(runs)}.items():
        monkeypatch.setenv(key, value)
    saved = dict(os.environ)
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    try:
        code = main(args)
    finally:
        os.environ.clear()
        os.environ.update(saved)       # whatever a command set
    assert not _started_by(me, before), [p.cmdline() for p in _started_by(me, before)]
    captured = capfd.readouterr()
    return Outcome(code, captured.out, captured.err, os.getpid(), "", runs)


@pytest.mark.parametrize("args, env, words", [
    (["run", *SMALL, "--backend", "external"], {**EXT}, ["set CHAOS_EXTERNAL_WIPE=yes"]),
    (["run", *SMALL, "--backend", "external"], {**EXT, "CHAOS_EXTERNAL_WIPE": "yes"},
     ["TOXIPROXY_URL=http://127.0.0.1:", "no Toxiproxy API answers", "start toxiproxy-server"]),
    (["run", *SMALL, "--backend", "bogus"], {}, ["unknown backend 'bogus'", "native, compose, external"]),
    (["matrix", "--presets", "s1", "--faults", "none"], {"CHAOS_BACKEND": "k8s"}, ["unknown backend 'k8s'"]),
    (["run", *SMALL, "--backend", "compose"], {"DOCKER_HOST": "unix:///nonexistent.sock"},
     ["needs a Docker engine", "--backend native"]),
    (["run", *SMALL], {"CHAOS_REDIS_SERVER": "/nonexistent/redis-server"}, ["CHAOS_REDIS_SERVER=", "unset it"]),
    (["run", *SMALL], {"CHAOS_PG_BIN": "/"}, ["CHAOS_PG_BIN='/'", "PostgreSQL bin dir"]),
    (["run", *SMALL], {"CHAOS_PROXY_SERVER": "no-such-toxiproxy-server"},
     ["no-such-toxiproxy-server not found", "unset CHAOS_PROXY_SERVER"]),
    (["run", *SMALL], {"TOXIPROXY_URL": "http://127.0.0.1:{closed}"},
     ["proxy server does not answer", "TOXIPROXY_URL"]),
    (["run", *SMALL], {"CHAOS_CLUSTER_BASE": "/etc/hostname/clusters"}, ["CHAOS_CLUSTER_BASE", "Not a directory"]),
    (["run", *SMALL, "--run-dir", "/etc/hostname/runs"], {}, ["/etc/hostname/runs", "--run-dir"]),
    (["matrix", "--presets", "s1", "--faults", "none", "--out", "/etc/hostname/m.html"], {},
     ["--out /etc/hostname/m.html", "writable dir"]),
    (["run", *SMALL, "--server", "memcached"], {}, ["unknown server 'memcached'", "redis, valkey"]),
    (["run", *SMALL, "--topology", "sentinel:quorum=9"], {}, ["quorum=9", "give a quorum"]),
    (["cluster", "status", "--name", "cli-errors-none"], {}, ["no cluster 'cli-errors-none' is up"]),
    (["proxy", "serve", "--port", "70000"], {}, ["--port 70000", "0-65535"]),
    (["run", "--preset", "baseline", "--fault", "long-job:event_id=e42-1", "--runs", "1"], {},
     ["fault 'long-job'", "never claims", "claim=always"]),
    (["run", "--preset", "s1", "--fault", "group-loss", "--runs", "1", "--backend", "external"], {**EXT},
     ["fault 'group-loss'", "set CHAOS_EXTERNAL_WIPE=yes"]),
    (["matrix", "--presets", "s1", "--faults", "long-job"], {}, ["no cells to run", "never claims"]),
], ids=["external-no-wipe", "external-no-toxiproxy", "unknown-backend", "matrix-env-backend",
        "compose-no-engine", "bad-redis-binary", "bad-pg-bin", "missing-toxiproxy-server", "shared-proxy-down",
        "cluster-base-unusable", "run-dir-unusable", "matrix-out-unusable", "unknown-server", "bad-topology", "cluster-status-none",
        "proxy-bad-port", "long-job-never-claims", "group-loss-external-no-wipe", "matrix-long-job-unfit"])
def test_a_configuration_error_is_one_line_and_exit_254(args, env, words, tmp_path, monkeypatch, capfd):
    closed = closed_port()
    env = {k: v.format(closed=closed) for k, v in env.items()}
    if env.get("CHAOS_PROXY_SERVER") and shutil.which(env["CHAOS_PROXY_SERVER"]):
        pytest.skip("the missing binary exists here")
    assert_bad_input(in_process(args, tmp_path, env, monkeypatch, capfd), *words)


@pytest.mark.parametrize("args", [
    ["run", *SMALL, "--backend", "external"],
    ["run", "--worker-cmd", "python -m examples.redis_py_ack_first", "--worker-config",
     "examples/redis_py_ack_first.toml", "--runs", "1", "--backend", "external"],
    ["cluster", "up", "--name", "cli-errors-ext", "--backend", "external"],
], ids=["run", "blackbox", "cluster-up"])
def test_python_m_chaos_without_the_external_variables_is_one_line_and_exit_254(args, tmp_path):
    """As a user runs it: `python -m chaos ...` in its own process (cluster up: through the supervisor)."""
    assert_bad_input(chaos_cli(args, tmp_path), "CHAOS_REDIS_PRIMARY (e.g.", "TOXIPROXY_URL", "set them")


@pytest.fixture
def proxy_api(tmp_path):
    """A real proxy server (the embedded one) playing a staging Toxiproxy."""
    port_file = tmp_path / "api.port"
    proc = subprocess.Popen([sys.executable, "-m", "chaos.proxy", "serve", "--port", "0", "--port-file",
                             str(port_file)], cwd=ROOT, env=clean_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not port_file.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the proxy server did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port_file.read_text().strip()}"
    proc.terminate()
    proc.wait(10)


def test_an_external_endpoint_that_does_not_answer_is_named_by_its_variable(proxy_api, tmp_path):
    closed = closed_port()
    env = {k: v.format(closed=closed) for k, v in EXT.items()}
    env.update(TOXIPROXY_URL=proxy_api, CHAOS_EXTERNAL_WIPE="yes")
    line = assert_bad_input(chaos_cli(["run", *SMALL, "--backend", "external"], tmp_path, env),
                            f"CHAOS_REDIS_PRIMARY=127.0.0.1:{closed}", "does not answer PING", "fix the variable")
    assert "Redis primary" in line


def test_a_server_that_will_not_start_gives_its_last_log_line(tmp_path):
    fake = tmp_path / "redis-server"
    fake.write_text("#!/bin/sh\necho 'FATAL: this redis-server refuses to start' >&2\nexit 3\n")
    fake.chmod(0o755)
    assert_bad_input(chaos_cli(["run", *SMALL], tmp_path, {"CHAOS_REDIS_SERVER": str(fake)}),
                     "exited with code 3 during start-up", "its log ends: FATAL: this redis-server refuses to start",
                     "fix what the log says")


CRASH = """
import sys
import chaos.cli.{module} as target
def crash(*args, **kwargs):
    raise ZeroDivisionError("forced: a framework bug")
target.{function} = crash
from chaos.cli import main
sys.exit(main(sys.argv[1:]))
"""


def crashing_cli(module: str, function: str) -> list[str]:
    """The CLI with one of its own functions replaced by one that raises (the crash is the stimulus;
    what is under test is how the CLI reports it)."""
    return [sys.executable, "-c", CRASH.format(module=module, function=function)]


def assert_crash_line(out: Outcome) -> Path:
    lines = out.stderr.strip().splitlines()
    assert out.code == 255, out.stderr
    assert "Traceback" not in out.stderr
    last = lines[-1]
    assert last.startswith("internal error: ZeroDivisionError: forced: a framework bug (a framework bug; "
                           "traceback in "), out.stderr
    path = Path(last.split("traceback in ", 1)[1].rstrip(")"))
    assert path.is_file()
    text = path.read_text()
    assert "Traceback (most recent call last)" in text and "ZeroDivisionError: forced" in text
    return path


def test_a_crash_before_anything_starts_is_one_line_and_a_traceback_file(tmp_path):
    out = chaos_cli(["run", *SMALL, "--json"], tmp_path, argv0=crashing_cli("run_cmd", "_check_inputs"))
    path = assert_crash_line(out)
    assert len(out.stderr.strip().splitlines()) == 1
    assert path.parent == out.runs                      # no run dir yet: beside where run dirs go
    assert out.stdout == ""                             # no cell result exists: no JSON
    assert not marked_processes(out.marker)


@pytest.mark.slow
def test_a_crash_after_the_cell_still_prints_its_json(tmp_path):
    out = chaos_cli(["run", *SMALL, "--time-scale", "0.2", "--json"], tmp_path,
                    argv0=crashing_cli("run_cmd", "_replay"))
    path = assert_crash_line(out)
    data = json.loads(out.stdout)
    assert data["published"] == 4 and data["per_run"], data
    assert data["internal_error"] == "ZeroDivisionError: forced: a framework bug"
    assert data["traceback"] == str(path) and path.parent == Path(data["run_dir"])   # in the cell's run dir
    assert not marked_processes(out.marker)
