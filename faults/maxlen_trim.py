"""maxlen-trim: the stream is trimmed (as XADD MAXLEN does) while entries are still pending.

XAUTOCLAIM then reports the trimmed ids in its third element (deleted ids) and drops
them from the PEL; the checker counts their events lost.
"""
from __future__ import annotations

from faults.base import Fault, FaultContext, Param


def workload_streams(redis, exclude: tuple[str, ...] = ("dlq",)) -> list[str]:
    """Every stream key on the server except DLQ streams."""
    return sorted(k for k in redis.scan_iter(_type="stream")
                  if not any(part in k for part in exclude))


class MaxlenTrim(Fault):
    name = "maxlen-trim"
    description = "XTRIM a stream to MAXLEN while entries are still pending (as XADD MAXLEN would)"
    params = (
        Param("at_ms", 500, "when the stream is trimmed"),
        Param("maxlen", 10, "entries kept (exact trim)", kind=int, minimum=0),
        Param("stream", "", "the stream key (empty: every stream of the workload except DLQs)"),
    )

    def run(self, ctx: FaultContext) -> None:
        ctx.sleep(self.at_ms)
        redis = ctx.cluster.direct_redis("primary")
        streams = [self.stream] if self.stream else workload_streams(redis)
        trimmed = {s: int(redis.xtrim(s, maxlen=self.maxlen, approximate=False)) for s in streams}
        ctx.record("start", name=self.name, spec=self.spec, trimmed=trimmed)
        ctx.record("stop", name=self.name)
