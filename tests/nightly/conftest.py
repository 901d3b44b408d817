from __future__ import annotations

import pytest

from .helpers import collected_ids


@pytest.fixture(scope="session")
def whole_collection() -> list[str]:
    """Every test id of this repository's real collection (what the nightly shards split)."""
    ids = collected_ids()
    assert len(ids) > 100, "the real collection of this repository"
    return ids
