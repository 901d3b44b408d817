from __future__ import annotations

import pytest

from .helpers import collected_ids


@pytest.fixture(scope="session")
def whole_collection(shared_once) -> list[str]:
    """Every test id of this repository's real collection (what the nightly shards split),
    collected once per session (xdist workers share it)."""
    ids = shared_once("whole-collection", lambda _folder: collected_ids())
    assert len(ids) > 100, "the real collection of this repository"
    return ids
