"""Build this project's wheel from the working tree, and make fresh venvs outside the checkout
with it installed: what a team gets from `pip install`, not the editable install of a checkout."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What a build must not see: generated output, caches, venvs, earlier builds.
_IGNORE = shutil.ignore_patterns(".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__",
                                 ".pytest_cache", "allure-results", "allure-report", "screenshots", ".setup-stamp")


def build_wheel(workdir: Path) -> Path:
    """The wheel of the working tree, built from a copy (the build writes build/ and egg-info
    dirs next to its sources, which must not land in a checkout others use), in a fresh venv
    holding only what pyproject.toml's [build-system] requires: what pip's build isolation makes,
    made here with `make_venv` (2.9 -> 2.0 CPU s: no pip and no compiling in that venv)."""
    import tomllib
    source = workdir / "source"
    shutil.copytree(ROOT, source, ignore=_IGNORE)
    requires = tomllib.loads((source / "pyproject.toml").read_text())["build-system"]["requires"]
    builder = make_venv(workdir / "build-venv", *requires)
    out = workdir / "dist"
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(builder), "wheel", "--no-deps",
                           "--no-build-isolation", "--disable-pip-version-check", "-q", str(source), "-w", str(out)],
                          capture_output=True, text=True, timeout=600, env=clean_env(builder.parent.parent))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel,) = out.glob("redis_streams_chaos-*.whl")
    return wheel


def make_venv(path: Path, *requirements: str, python: str = sys.executable) -> Path:
    """A fresh venv at ``path`` with ``requirements`` pip-installed; returns its python. A throwaway
    venv: made without pip (ensurepip byte-compiles pip's ~700 modules: 2.7 CPU s a venv), which
    this interpreter's pip installs into (`pip_install`), nor does it compile what it installs
    (what a run imports is compiled then)."""
    subprocess.run([python, "-m", "venv", "--without-pip", str(path)], check=True, capture_output=True, timeout=300)
    venv_python = path / "bin" / "python"
    if requirements:
        pip_install(venv_python, *requirements)
    return venv_python


def pip_install(venv_python: Path, *args: str) -> None:
    """``pip install ARGS`` into the venv of ``venv_python`` (`pip --python`: pip runs in that
    interpreter, as the venv's own pip would), in the environment of a person who activated it."""
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv_python), "install", "-q",
                           "--disable-pip-version-check", "--no-compile", *args], capture_output=True, text=True,
                          timeout=900, env=clean_env(venv_python.parent.parent))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def clean_env(venv: Path) -> dict[str, str]:
    """The environment of a person who activated ``venv`` outside this checkout: no PYTHONPATH
    pointing back here, no xdist or pytest variables of the session running this test."""
    import os
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("PYTEST_", "PYTHON", "VIRTUAL_ENV", "COV_")) and k != "PATH"}
    keep["PATH"] = f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin"
    keep["VIRTUAL_ENV"] = str(venv)
    return keep
