"""A team's guard and fault from an installed package's entry points (groups
`redis_streams_chaos.guards` and `.faults`), outside the checkout: `python -m chaos run`
finds them, and the guard runs in the consumer processes.

The package is a wheel built here (the module, its `.dist-info` with `entry_points.txt`),
installed into a temporary site dir that only PYTHONPATH names by unpacking it, which is what
installing a pure-Python wheel is (`pip install --target` did the same for 0.56 CPU s a test):
no build backend, no network."""
from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

MODULE = '''
from chaos.params import Param
from chaos.strategies.guards.base import APPLIED, Guard, Outcome
from faults.window import WindowFault


class SkipGuard(Guard):
    """Says applied, writes nothing: the final state shows that it, not plain, ran."""
    name = "team-skip"
    summary = "says applied, writes nothing"
    params = ()

    def apply(self, ev, entry_id, work):
        work()
        return Outcome(1, APPLIED, {"status": ev.etype})


class Nudge(WindowFault):
    name = "team-nudge"
    description = "records a window, does nothing else"
    params = (Param("at_ms", 50, "when"), Param("duration_ms", 100, "how long"))

    def start(self, ctx):
        return {"nudged": True}

    def stop(self, ctx):
        return []
'''

ENTRY_POINTS = """[redis_streams_chaos.guards]
team-skip = team_chaos:SkipGuard

[redis_streams_chaos.faults]
team-nudge = team_chaos:Nudge
"""


def _wheel(folder: Path, entry_points: str) -> Path:
    """team_chaos 0.1 as a pure-Python wheel."""
    files = {
        "team_chaos/__init__.py": MODULE,
        "team_chaos-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: team-chaos\nVersion: 0.1\n",
        "team_chaos-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        "team_chaos-0.1.dist-info/entry_points.txt": entry_points,
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    files["team_chaos-0.1.dist-info/RECORD"] = "\n".join(record + ["team_chaos-0.1.dist-info/RECORD,,"]) + "\n"
    path = folder / "team_chaos-0.1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
    return path


def _install(site: Path, entry_points: str = ENTRY_POINTS) -> None:
    """The wheel unpacked into ``site``: a pure-Python wheel's files go to the site dir as they are
    (Root-Is-Purelib), the `.dist-info` with them."""
    with zipfile.ZipFile(_wheel(site.parent, entry_points)) as wheel:
        wheel.extractall(site)
    assert (site / "team_chaos-0.1.dist-info" / "entry_points.txt").is_file()


def _chaos(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    return subprocess.run([sys.executable, "-m", "chaos", *args], capture_output=True, text=True, env=env,
                          cwd=site, timeout=300)


def test_an_installed_packages_guard_and_fault_run_in_a_real_cell(tmp_path):
    site = tmp_path / "site"
    _install(site)
    done = _chaos(site, "run", "--preset", "s1", "--part", "guard=team-skip", "--fault", "team-nudge",
                  "--runs", "1", "--time-scale", "0.3", "--run-dir", str(tmp_path / "runs"), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["fault"] == "team-nudge" and out["handled"] == 2
    # plain s1 is valid; the team's guard writes nothing, so the consumers ran it
    assert (out["verdict"], out["wrong_final_state_runs"]) == ("invalid", 1), out


def test_an_entry_point_reusing_a_built_in_name_is_refused_naming_it(tmp_path):
    site = tmp_path / "site"
    _install(site, "[redis_streams_chaos.guards]\ncas = team_chaos:SkipGuard\n")
    done = _chaos(site, "list")
    assert done.returncode == 254, (done.returncode, done.stderr[-500:])
    assert "entry point cas = team_chaos:SkipGuard" in done.stderr and "rename it" in done.stderr


PLUGIN = '''
from chaos import extensions
extensions.register("faults", "team-plugin-nudge", "team_chaos:Nudge")
'''


def test_chaos_plugins_names_modules_that_register(tmp_path):
    site = tmp_path / "site"
    _install(site, "")
    (site / "team_plugin.py").write_text(PLUGIN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "CHAOS_PLUGINS": "team_plugin"}
    done = subprocess.run([sys.executable, "-m", "chaos", "describe", "team-plugin-nudge"], capture_output=True,
                          text=True, env=env, cwd=site, timeout=120)
    assert done.returncode == 0 and "records a window" in done.stdout, done.stderr[-1000:]
    env["CHAOS_PLUGINS"] = "team_plugin,no_such_module"
    done = subprocess.run([sys.executable, "-m", "chaos", "list"], capture_output=True, text=True, env=env,
                          cwd=site, timeout=120)
    assert done.returncode == 254 and "$CHAOS_PLUGINS names 'no_such_module'" in done.stderr, done.stderr
