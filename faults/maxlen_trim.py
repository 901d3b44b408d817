"""maxlen-trim: the stream is trimmed (as XADD MAXLEN does) while entries are still pending.

XAUTOCLAIM then reports the trimmed ids in its third element (deleted ids) and drops
them from the PEL; the checker counts their events lost.
"""
from __future__ import annotations
from chaos.params import Param
from faults.helpers import wait_for_entries, workload_streams
from faults.interface import Fault, FaultContext


class MaxlenTrim(Fault):
    name = "maxlen-trim"
    description = "XTRIM a stream to MAXLEN while entries are still pending (as XADD MAXLEN would)"
    params = (
        Param("after_entries", 1, "wait until the workload's streams hold this many entries",
              kind=int, minimum=0),
        Param("at_ms", 500, "then wait this long before the trim"),
        Param("wait_ms", 30000, "how long to wait for after_entries (unscaled)"),
        Param("maxlen", 10, "entries kept (exact trim)", kind=int, minimum=0),
        Param("stream", "", "the stream key (empty: every stream of the workload except DLQs)"),
    )

    def run(self, ctx: FaultContext) -> None:
        if self.after_entries:
            wait_for_entries(ctx, self.after_entries, self.wait_ms / 1000, self.name)
        ctx.sleep(self.at_ms)
        redis = ctx.cluster.direct_redis("primary")
        streams = [self.stream] if self.stream else workload_streams(redis)
        trimmed = {s: int(redis.xtrim(s, maxlen=self.maxlen, approximate=False)) for s in streams}
        ctx.record("start", name=self.name, spec=self.spec, trimmed=trimmed)
        ctx.record("stop", name=self.name)
