"""`latency`: hold each chunk until its arrival + latency +- jitter (ms), in order."""
from __future__ import annotations

from chaos.proxy.toxics.base import INT64, SequentialStage, ToxicType


class LatencyStage(SequentialStage):
    """Each chunk is due at its arrival time plus a fresh delay, never before the previous one."""

    def push(self, data: bytes, ts: float) -> None:
        # Fast path: a zero latency with nothing queued passes the chunk straight on.
        attrs = self.settings.attributes
        if attrs["latency"] <= 0 and attrs["jitter"] <= 0 and not self.pieces and not self.waiting \
                and not self.closed:
            self.out.push(data, ts)
        else:
            super().push(data, ts)

    def plan(self, data: bytes, ts: float, now: float) -> list[tuple[float, bytes, float]]:
        attrs = self.settings.attributes
        delay = attrs["latency"]
        jitter = attrs["jitter"]
        if jitter > 0:
            # Go: latency + rand.Int63n(2*jitter) - jitter, i.e. [-jitter, +jitter)
            delay += self.rng.randrange(2 * jitter) - jitter
        due = ts + delay / 1000.0
        return [(due, data, max(due, now))]


LATENCY = ToxicType(
    name="latency", go_name="LatencyToxic", attributes={"latency": INT64, "jitter": INT64}, stage=LatencyStage
)
