"""The toxic registry: one line per toxic type, keyed by its Toxiproxy name."""
from __future__ import annotations

from chaos.proxy.toxics.bandwidth import BANDWIDTH
from chaos.proxy.toxics.base import AttributeError_, Stage, ToxicSettings, ToxicType
from chaos.proxy.toxics.latency import LATENCY
from chaos.proxy.toxics.limit_data import LIMIT_DATA
from chaos.proxy.toxics.noop import NOOP
from chaos.proxy.toxics.reset_peer import RESET_PEER
from chaos.proxy.toxics.slicer import SLICER
from chaos.proxy.toxics.slow_close import SLOW_CLOSE
from chaos.proxy.toxics.timeout import TIMEOUT

TOXIC_TYPES: dict[str, ToxicType] = {
    t.name: t
    for t in (LATENCY, BANDWIDTH, SLOW_CLOSE, TIMEOUT, RESET_PEER, SLICER, LIMIT_DATA, NOOP)
}

__all__ = ["TOXIC_TYPES", "AttributeError_", "Stage", "ToxicSettings", "ToxicType"]
