"""The relay under load: 1000 rows (100 keys x 10 events) already committed, then relayed.

Measures rows/s for 1 and 3 dispatchers of each discipline (printed; run with -s) and
asserts what must hold at any speed: every row relayed exactly once, per-key order kept
by per-key dispatchers whatever their number.
"""
from __future__ import annotations

import pytest

from test_dispatcher import event, out_of_order, stream_order

from chaos.workload.outbox import read_outbox, record_event

KEYS, VERSIONS = 100, 10


@pytest.mark.parametrize("mode, n", [("naive", 1), ("naive", 3), ("per-key", 1), ("per-key", 3)])
def test_relay_throughput(outbox_db, cluster, relay, mode, n):
    for version in range(1, VERSIONS + 1):
        for key in range(KEYS):
            record_event(outbox_db, event(key, version, f"s{version}"))
    relay.start(n, mode, poll_ms=5)
    relay.drain(outbox_db, 120)
    sends = [op["time"] for op in relay.history() if op["f"] == "publish"]
    elapsed = max(sends) - min(sends)  # first XADD attempt to last: process start-up excluded
    order = stream_order(cluster.direct_redis())
    entries = sum(map(len, order.values()))
    rate = KEYS * VERSIONS / elapsed
    print(f"{mode} x{n}: {KEYS * VERSIONS} rows in {elapsed:.2f} s = {rate:.0f} rows/s; "
          f"{out_of_order(order)} entries out of key order")
    assert entries == KEYS * VERSIONS, "every row relayed exactly once"
    assert all(r.published for r in read_outbox(outbox_db))
    if mode == "per-key" or n == 1:
        assert out_of_order(order) == 0, "per-key (or a single naive) relay keeps per-key order"
