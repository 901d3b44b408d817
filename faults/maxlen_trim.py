"""maxlen-trim: the stream is trimmed (as XADD MAXLEN does) while entries are still pending.

XAUTOCLAIM then reports the trimmed ids in its third element (deleted ids) and drops
them from the PEL; the checker counts their events lost. The trim and the read of what it
removes run in one script: the start op records per stream how many entries went
(`trimmed`) and how many of them were not yet acked (`unsettled`: pending in a group, or
past a group's last-delivered id). A trim that removed only acked entries tested nothing.
"""
from __future__ import annotations
from typing import Any

from chaos.params import Param
from faults.effects import STRUCK_UNSETTLED
from faults.helpers import wait_for_entries, workload_streams
from faults.interface import Fault, FaultContext

# KEYS: streams; ARGV[1]: maxlen. Per stream: {trimmed, unsettled}.
_TRIM = """local function after(a, b)
  local a1, a2 = string.match(a, '(%d+)-(%d+)')
  local b1, b2 = string.match(b, '(%d+)-(%d+)')
  a1, a2, b1, b2 = tonumber(a1), tonumber(a2), tonumber(b1), tonumber(b2)
  return a1 > b1 or (a1 == b1 and a2 > b2)
end
local out = {}
for _, key in ipairs(KEYS) do
  local gone = redis.call('XLEN', key) - tonumber(ARGV[1])
  local unsettled = 0
  if gone > 0 then
    local ids = redis.call('XRANGE', key, '-', '+', 'COUNT', gone)
    local cut = ids[#ids][1]
    local open = {}
    for _, g in ipairs(redis.call('XINFO', 'GROUPS', key)) do
      local info = {}
      for i = 1, #g, 2 do info[g[i]] = g[i + 1] end
      for _, p in ipairs(redis.call('XPENDING', key, info['name'], '-', cut, gone)) do open[p[1]] = true end
      for _, e in ipairs(ids) do
        if after(e[1], info['last-delivered-id']) then open[e[1]] = true end
      end
    end
    for _ in pairs(open) do unsettled = unsettled + 1 end
  else
    gone = 0
  end
  redis.call('XTRIM', key, 'MAXLEN', ARGV[1])
  out[#out + 1] = {gone, unsettled}
end
return out"""


def trim(client: Any, streams: list[str], maxlen: int) -> dict[str, dict[str, int]]:
    """XTRIM MAXLEN (exact) each stream, in one script with the count of unacked entries it removes."""
    reply = client.eval(_TRIM, len(streams), *streams, maxlen) if streams else []
    trimmed = {s: int(gone) for s, (gone, _) in zip(streams, reply)}
    unsettled = {s: int(n) for s, (_, n) in zip(streams, reply)}
    return {"trimmed": trimmed, "unsettled": unsettled}


class MaxlenTrim(Fault):
    name = "maxlen-trim"
    touches_publish = False   # one XTRIM; the primary stays up
    effect = STRUCK_UNSETTLED   # the trim removed entries not yet acked
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
        ctx.record("start", name=self.name, spec=self.spec, **trim(redis, streams, self.maxlen))
        ctx.record("stop", name=self.name)
