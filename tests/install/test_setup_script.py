"""scripts/setup.sh where the user is: the servers it skips when CHAOS_REDIS_SERVER and
CHAOS_PG_BIN name them, what it says without apt, and the README's quick start run as
written in a fresh clone with only /usr/bin on PATH (Debian's own, externally managed
python3: the venv design, not a pip install into it)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "scripts" / "setup.sh"
BASH = shutil.which("bash") or "/bin/bash"


def _bin_without_servers(tmp_path: Path) -> Path:
    """A PATH dir with the tools the script uses, and no redis-server, apt-get or sudo."""
    bindir = tmp_path / "bin"
    if bindir.is_dir():
        return bindir
    bindir.mkdir()
    for tool in ("bash", "dirname", "ls", "id", "env"):
        found = shutil.which(tool)
        assert found, tool
        (bindir / tool).symlink_to(found)
    return bindir


def _setup(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    base = {"PATH": str(_bin_without_servers(tmp_path)), "HOME": str(tmp_path)}
    return subprocess.run([BASH, str(SETUP), *args], env={**base, **env}, capture_output=True, text=True, timeout=60)


def test_without_apt_it_says_what_to_install_and_exits_1(tmp_path):
    done = _setup(tmp_path, "--system-only")
    assert done.returncode == 1, done.stderr
    assert "no apt-get" in done.stderr and "redis-server" in done.stderr and "CHAOS_REDIS_SERVER" in done.stderr


def test_the_servers_it_is_given_need_no_apt(tmp_path):
    redis = shutil.which("redis-server")
    if redis is None:
        pytest.skip("no redis-server on this machine")
    done = _setup(tmp_path, "--system-only", CHAOS_REDIS_SERVER=redis)
    assert done.returncode == 0, done.stderr
    assert "apt" not in done.stderr


def test_a_wrong_server_variable_is_named_with_its_fix(tmp_path):
    done = _setup(tmp_path, "--system-only", CHAOS_PG_BIN="/opt", CHAOS_REDIS_SERVER=shutil.which("bash"))
    assert done.returncode == 1
    assert "CHAOS_PG_BIN=/opt holds no executable initdb and postgres" in done.stderr, done.stderr
    done = _setup(tmp_path, "--system-only", CHAOS_REDIS_SERVER="/nonexistent/redis-server")
    assert done.returncode == 1 and "CHAOS_REDIS_SERVER=/nonexistent/redis-server is not an executable" in done.stderr


def quick_start_command() -> str:
    """The README's first quick-start command, as written."""
    section = (ROOT / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return next(line.strip() for block in re.findall(r"```\n(.*?)```", section, flags=re.S)
                for line in block.splitlines() if "scripts/setup.sh &&" in line)


def _debians_distributions(env: dict[str, str]) -> str:
    """What Debian's python3 has installed (name==version of every distribution on its path, what
    `pip list --format=freeze` reads, without starting pip: 0.35 CPU s a call)."""
    code = "import importlib.metadata as m; print(sorted(f'{d.name}=={d.version}' for d in m.distributions()))"
    done = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _quick_start_in_a_fresh_clone(tmp_path: Path, **extra_env: str) -> tuple[subprocess.CompletedProcess, Path]:
    """`git clone` this checkout, then run the README's quick-start command verbatim with
    PATH=/usr/bin (Debian's python3); asserts nothing was installed into Debian's python3."""
    if not Path("/usr/bin/python3").exists() or not (ROOT / ".git").exists():
        pytest.skip("needs /usr/bin/python3 and a git checkout")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    command = quick_start_command()
    assert command.startswith("bash scripts/setup.sh && .venv/bin/python -m pytest"), command
    env = {"PATH": "/usr/bin", "HOME": os.environ.get("HOME", str(tmp_path)), "LANG": "C.UTF-8", **extra_env}
    env.update({k: v for k, v in os.environ.items() if k.startswith(("PIP_", "CHAOS_KEPT_"))})
    before = _debians_distributions(env)
    done = subprocess.run(["/usr/bin/bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True,
                          timeout=1500)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    assert (clone / ".venv" / "bin" / "python").exists()
    assert os.path.realpath(clone / ".venv" / "bin" / "python").startswith("/usr/bin/"), "the venv is Debian's python"
    after = _debians_distributions(env)
    assert before == after, "something was installed into Debian's own python3"
    return done, clone


@pytest.mark.slow(seconds=21)
def test_the_quick_start_sets_up_and_collects_in_a_fresh_clone_with_debians_python(tmp_path):
    """The README's command verbatim in a fresh clone with PATH=/usr/bin, its pytest told to
    collect only (PYTEST_ADDOPTS): setup.sh makes the venv with Debian's python3 (PEP 668),
    installs the checkout into it, nothing into Debian's python3, and the command's pytest loads
    the plugin and finds the quick start's 18 failover cells. This is CI's check of the quick
    start (about 30 s, beside the suite); the suite runs those 18 cells itself, and the nightly
    runs the whole command in a fresh clone (the test below, CHAOS_FRESH_CLONE_TEST=1)."""
    # PIP_COMPILE=0: pip does not compile the ~3,000 modules it installs (what the collection
    # imports is compiled then); it changes nothing the test checks.
    done, _ = _quick_start_in_a_fresh_clone(tmp_path, PYTEST_ADDOPTS="--collect-only -q", PIP_COMPILE="0")
    assert re.search(r"\b18 tests collected\b", done.stdout), done.stdout[-4000:] + done.stderr[-3000:]


@pytest.mark.slow(seconds=600)
@pytest.mark.skipif(os.environ.get("CHAOS_FRESH_CLONE_TEST") != "1",
                    reason="a fresh venv and 18 failover cells beside the suite: set CHAOS_FRESH_CLONE_TEST=1 "
                           "(the nightly runs it; CI runs the collect-only test above)")
def test_the_quick_start_passes_in_a_fresh_clone_with_debians_python(tmp_path):
    """`git clone`, then the README's command verbatim with PATH=/usr/bin: Debian's python3
    (PEP 668) makes the venv, nothing is installed into it, and the suite passes."""
    done, _ = _quick_start_in_a_fresh_clone(tmp_path)
    assert re.search(r"\b18 passed\b", done.stdout), done.stdout[-4000:] + done.stderr[-3000:]
