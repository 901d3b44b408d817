from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import collected_ids

REAL_SHARD = "2/3"    # the shard of the real collection that test_shard.py compares with `split`


@pytest.fixture(scope="session")
def real_collection(shared_once) -> dict[str, list[str]]:
    """This repository's real collection (what the nightly shards split) and its shard
    REAL_SHARD, from one child session (`--chaos-shard REAL_SHARD`, whose collected ids
    before the split tests/nightly/ids_before_split.py writes out): a collection of the whole
    suite costs about 5 CPU s. Once per session (xdist workers share it)."""
    def build(folder: Path) -> dict[str, list[str]]:
        out = folder / "ids.txt"
        shard = collected_ids("-p", "tests.nightly.ids_before_split", "--chaos-shard", REAL_SHARD,
                              env={"CHAOS_TEST_IDS_OUT": str(out)})
        return {"whole": out.read_text().splitlines(), "shard": shard}
    ids = shared_once("real-collection", build)
    assert len(ids["whole"]) > 100, "the real collection of this repository"
    return ids


@pytest.fixture(scope="session")
def whole_collection(real_collection) -> list[str]:
    """Every test id of this repository's real collection, in collection order."""
    return real_collection["whole"]
