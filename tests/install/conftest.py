from __future__ import annotations

from pathlib import Path

import pytest

from install_helpers import build_wheel


@pytest.fixture(scope="session")
def chaos_wheel(shared_once) -> Path:
    """This working tree's wheel, built once per session (xdist workers share it: the root
    conftest's `shared_once`)."""
    return Path(shared_once("chaos-wheel", lambda folder: str(build_wheel(folder))))
