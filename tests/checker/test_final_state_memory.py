"""What the final state's read holds while the checker folds the history, as bounds that fail
on the old code (issue 23: the 10^6 run's peak RSS was at the end of the history's fold, with
the streams' first pass held beside it and the heap's free holes under it):

* the streams' first pass (final_state.PagedEntries) holds each page compressed: at most
  12 B an entry of harness-like ids, where the pages joined alone held ~27 B;
* with final_state imported, a block of 1 MiB or more is mapped on its own and so given back
  when freed (glibc): a large block freed earlier does not make the next ones come from the heap.
"""
from __future__ import annotations

import ctypes
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import redis

from chaos.cluster.endpoint import redis_url
from chaos.workload import final_state as fs

ENTRIES = 100_000
# harness-like entries, written by Redis itself (a few ms, not 10^5 round trips)
_FILL = """for i = 1, tonumber(ARGV[1]) do
  redis.call('XADD', KEYS[1], '*', 'event_id', 'ej' .. i .. '-1', 'key', 'j' .. i, 'type', 'done')
end"""


def test_the_first_pass_holds_the_streams_pages_compressed(chaos_reset_cluster: Any) -> None:
    r = redis.Redis.from_url(redis_url(chaos_reset_cluster.primary), decode_responses=True)
    r.eval(_FILL, 1, "orders", ENTRIES)
    expected = fs._entry_events(r, "orders")
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        entries = fs.PagedEntries(r, ["orders"])
        first = entries._first
        assert first is not None
        first._thread.join(timeout=60)
        assert not first._thread.is_alive(), "the first pass did not end"
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held <= 12 * ENTRIES, f"the first pass holds {held / ENTRIES:.1f} B an entry"
    assert [pair for _, page in entries.pages() for pair in page] == expected


_MAPPED = """import ctypes, sys
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
import chaos.workload.final_state as final_state   # (importing it changes nothing: the run sets the bound)
if sys.argv[1] == "policy":
    final_state.map_large_blocks()
big = bytearray(16 << 20)   # mapped (above any bound), then freed: glibc's default raises its bound to it
del big
before = libc.mallinfo2().hblkhd
block = bytearray(2 << 20)
print(libc.mallinfo2().hblkhd - before)
"""


@pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "mallinfo2"), reason="glibc's malloc only")
def test_a_large_block_is_mapped_on_its_own_after_a_larger_one_was_freed() -> None:
    """In a fresh process each (the bound is the process's): after map_large_blocks() the 2 MiB
    block is mapped (given back when freed); with final_state only imported, glibc's raised bound
    puts it in the heap (the import alone sets nothing: a team's process keeps the default)."""
    root = str(Path(__file__).resolve().parents[2])

    def mapped(mode: str) -> int:
        out = subprocess.run([sys.executable, "-c", _MAPPED, mode], capture_output=True, text=True,
                             check=True, cwd=root, env={"PYTHONPATH": root, "PATH": "/usr/bin:/bin"})
        return int(out.stdout)
    assert mapped("policy") >= 2 << 20
    assert mapped("default") == 0, "glibc's default no longer raises its bound: this test shows nothing"
