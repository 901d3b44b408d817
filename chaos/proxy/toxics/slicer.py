"""`slicer`: split each chunk into pieces of about average_size +- size_variation bytes,
`delay` microseconds apart (exercises clients' partial reads)."""
from __future__ import annotations

import random

from chaos.proxy.toxics.base import INT, SequentialStage, ToxicType


def slice_bounds(length: int, average: int, variation: int, rng: random.Random) -> list[int]:
    """Cut points 0 = b0 < b1 < ... = length, halving recursively like Toxiproxy's slicer.

    Unlike Toxiproxy (which panics in rand.Intn for size_variation <= 0), a zero or
    negative variation just halves exactly, and an average <= 0 never splits.
    """
    if average <= 0:
        return [0, length]
    variation = max(variation, 0)
    bounds = [0]

    def split(start: int, end: int) -> None:
        if (end - start) - average <= variation:
            bounds.append(end)
            return
        shift = rng.randrange(2 * variation) - variation if variation > 0 else 0
        mid = start + (end - start) // 2 + shift
        mid = min(max(mid, start + 1), end - 1)
        split(start, mid)
        split(mid, end)

    split(0, length)
    return bounds


class SlicerStage(SequentialStage):
    """Each piece goes out, then `delay` us pass before the next (also after the last)."""

    def plan(self, data: bytes, ts: float, now: float) -> list[tuple[float, bytes, float]]:
        attrs = self.settings.attributes
        bounds = slice_bounds(len(data), attrs["average_size"], attrs["size_variation"], self.rng)
        step = max(attrs["delay"], 0) / 1e6
        pieces = [(now + step * i, data[bounds[i]:bounds[i + 1]], ts) for i in range(len(bounds) - 1)]
        if step > 0:
            pieces.append((now + step * (len(bounds) - 1), b"", ts))  # the pause after the last piece
        return pieces


SLICER = ToxicType(
    name="slicer",
    go_name="SlicerToxic",
    attributes={"average_size": INT, "size_variation": INT, "delay": INT},
    stage=SlicerStage,
)
