"""The streams' entries as the orchestrator's check reads them (final_state.PagedEntries): the
first pass read from the moment the final state is read, each page two joined strs; an event
id holding the separator, an empty one and an entry without one give what the entry-by-entry
read gives, on a real Redis, in pages of any size."""
from __future__ import annotations

from typing import Any

import pytest
import redis

from chaos.cluster.endpoint import redis_url
from chaos.workload import final_state as fs


@pytest.mark.parametrize("page", [1, 3, 10_000])
def test_joined_pages_give_the_entries_one_by_one(chaos_reset_cluster: Any, page: int,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    r = redis.Redis.from_url(redis_url(chaos_reset_cluster.primary), decode_responses=True)
    odd = ["e\nwith a newline", "", None, "e\n", "\n", "last"]
    for n in range(10):
        r.xadd("orders", {"event_id": f"e{n}", "key": f"k{n}"})
        r.xadd("orders", {"key": "k"} if odd[n % 6] is None else {"event_id": odd[n % 6]})
    r.xadd("other", {"event_id": "o1"})
    monkeypatch.setattr(fs, "PAGE", page)
    expected = [(stream, pair) for stream in ("orders", "none", "other") for pair in fs._entry_events(r, stream)]
    entries = fs.PagedEntries(r, ["orders", "none", "other"])
    got = [(stream, pair) for stream, pairs in entries.pages() for pair in pairs]
    assert got == expected and len(got) == 21
    assert ("orders", (expected[1][1][0], "e\nwith a newline")) in got and got[3][1][1] is None
    assert [(e["stream"], (e["entry_id"], e["event_id"])) for e in entries] == expected   # read again
