"""`bandwidth`: limit a direction to `rate` KB/s (bytes per ms); rate <= 0 is unlimited."""
from __future__ import annotations

from chaos.proxy.toxics.base import INT64, SequentialStage, ToxicType

SLICE_MS = 100  # a chunk larger than rate*100 bytes goes out in 100 ms slices, as in Toxiproxy


class BandwidthStage(SequentialStage):
    """A chunk of n bytes takes n / rate ms; big chunks trickle out in 100 ms slices."""

    def start(self) -> None:
        super().start()
        self.free_at = 0.0  # when the previous chunk finished, so back-to-back chunks queue

    def plan(self, data: bytes, ts: float, now: float) -> list[tuple[float, bytes, float]]:
        rate = self.settings.attributes["rate"]
        if rate <= 0:
            return [(now, data, ts)]
        start = max(now, self.free_at)
        pieces = []
        step = rate * SLICE_MS
        offset, at = 0, start
        while len(data) - offset > step:
            at += SLICE_MS / 1000.0
            pieces.append((at, data[offset:offset + step], ts))
            offset += step
        rest = data[offset:]
        at += len(rest) / rate / 1000.0
        pieces.append((at, rest, ts))
        self.free_at = at
        return pieces


BANDWIDTH = ToxicType(name="bandwidth", go_name="BandwidthToxic", attributes={"rate": INT64}, stage=BandwidthStage)
