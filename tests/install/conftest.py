from __future__ import annotations

from pathlib import Path

import pytest

from install_helpers import build_wheel


@pytest.fixture(scope="session")
def chaos_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This working tree's wheel, built once per session (per xdist worker)."""
    return build_wheel(tmp_path_factory.mktemp("wheel"))
