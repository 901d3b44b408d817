"""group-loss: the consumer group disappears with its stream.

Under `maxmemory-policy allkeys-lru` Redis evicts whole keys: a stream goes with its
groups and PEL (redis/redis#6576, #8842). A Redis restarted without persistence comes
back empty. Either way every consumer then gets `NOGROUP` (a read blocked at that moment:
`UNBLOCKED the stream key no longer exists`), and producers' next XADD makes a new stream
without a group. `how=evict` deletes the workload's stream keys in one script, as an
eviction would (atomically, between two commands); `how=restart-empty` SIGKILLs the primary
and starts it with no data (its replica then resyncs to the empty data set too).

The fault records what vanished: per stream the entry ids and the event ids they carried,
and which of those were pending (read, not acked) or undelivered. The checker names the
lost events among them `stream-lost`. What happens next is the consumers' recovery policy
(`on_nogroup` of the delivery): recreate the group from `0` (reads what was published since
the loss), from `$` (skips it), or exit.
"""
from __future__ import annotations

import os
import time
from typing import Any

from chaos.errors import BadArguments
from chaos.params import Param
from faults.effects import DIED_MID_WORK
from faults.helpers import wait_for_entries, workload_streams
from faults.interface import Fault, FaultContext, Plan

# KEYS: streams; ARGV[1]: the group ('': the stream's only group, a black-box worker's); ARGV[2]: "1" to delete the keys (evict), "0" to read only.
# Returns, per stream: {stream, {entry id, event id or false}..., pending ids..., last-delivered id}
_VANISH = """local out = {}
for _, key in ipairs(KEYS) do
  local entries, pending, last = {}, {}, '0-0'
  if redis.call('EXISTS', key) == 1 then
    for _, entry in ipairs(redis.call('XRANGE', key, '-', '+')) do
      local event = false
      for i = 1, #entry[2], 2 do
        if entry[2][i] == 'event_id' then event = entry[2][i + 1] break end
      end
      entries[#entries + 1] = entry[1]
      entries[#entries + 1] = event
    end
    for _, g in ipairs(redis.call('XINFO', 'GROUPS', key)) do
      local info = {}
      for i = 1, #g, 2 do info[g[i]] = g[i + 1] end
      if info['name'] == ARGV[1] or ARGV[1] == '' then
        last = info['last-delivered-id']
        for _, p in ipairs(redis.call('XPENDING', key, info['name'], '-', '+', 100000)) do
          pending[#pending + 1] = p[1]
        end
      end
    end
    if ARGV[2] == '1' then redis.call('DEL', key) end
  end
  out[#out + 1] = {key, entries, pending, last}
end
return out"""


def _after(entry_id: str, last: str) -> bool:
    a, _, b = entry_id.partition("-")
    c, _, d = last.partition("-")
    return (int(a), int(b or 0)) > (int(c), int(d or 0))


def vanish(client: Any, streams: list[str], group: str, delete: bool) -> dict[str, Any]:
    """Read (and with ``delete`` remove, in one script) the streams: what vanishes with them."""
    reply = client.eval(_VANISH, len(streams), *streams, group, "1" if delete else "0")
    entries: dict[str, int] = {}
    events: list[str] = []
    pending: list[str] = []
    undelivered: list[str] = []
    for stream, flat, pel, last in reply:
        ids, evs = flat[::2], flat[1::2]
        entries[stream] = len(ids)
        in_pel = set(pel)
        for entry_id, event in zip(ids, evs):
            if not event:
                continue
            events.append(event)
            if entry_id in in_pel:
                pending.append(event)
            elif _after(entry_id, last):
                undelivered.append(event)
    return {"entries": entries, "vanished_events": events, "pending_events": pending,
            "undelivered_events": undelivered}


class GroupLoss(Fault):
    # the loss must meet work in flight (events to come, or published and not yet acked)
    effect = DIED_MID_WORK
    name = "group-loss"
    takes_down = frozenset({"redis"})   # how=restart-empty kills the primary and starts it again
    description = ("the consumer group vanishes with its stream: the stream keys deleted as an eviction "
                   "would (how=evict) or the primary restarted with no data (how=restart-empty); "
                   "consumers get NOGROUP")
    params = (
        Param("how", "evict", "evict: DEL the stream keys (groups and PEL with them) in one script, as "
              "allkeys-lru eviction does; restart-empty: SIGKILL the primary and start it with no data",
              choices=("evict", "restart-empty")),
        Param("after_entries", 1, "wait until the workload's streams hold this many entries",
              kind=int, minimum=0),
        Param("at_ms", 300, "then wait this long before the loss"),
        Param("stream", "", "the stream key (empty: every stream of the workload except DLQs)"),
        Param("wait_ms", 30000, "how long to wait for after_entries (unscaled)"),
    )

    def check(self, plan: Plan) -> None:
        super().check(plan)
        if plan.backend == "external":
            if os.environ.get("CHAOS_EXTERNAL_WIPE") != "yes":
                raise BadArguments("fault 'group-loss' deletes streams on the external Redis: set "
                                   "CHAOS_EXTERNAL_WIPE=yes to confirm the cluster is yours to wipe")
            if self.how == "restart-empty":
                raise BadArguments("fault 'group-loss': the external backend cannot restart its Redis; "
                                   "use how=evict there (or the native backend)")

    def run(self, ctx: FaultContext) -> None:
        if self.after_entries:
            wait_for_entries(ctx, self.after_entries, self.wait_ms / 1000, self.name)
        ctx.sleep(self.at_ms)
        client = ctx.cluster.direct_redis("primary")
        streams = [self.stream] if self.stream else workload_streams(client)
        if self.how == "evict":
            gone = vanish(client, streams, "", delete=True)
            ctx.record("start", name=self.name, spec=self.spec, how=self.how, streams=streams, **gone)
            ctx.record("stop", name=self.name, how=self.how)
            return
        gone = vanish(client, streams, "", delete=False)   # the last read before the crash
        ctx.record("start", name=self.name, spec=self.spec, how=self.how, streams=streams, **gone)
        started = time.monotonic()
        ctx.cluster.restart_primary(appendonly=False, kill=True)
        keys = int(ctx.cluster.direct_redis("primary").dbsize())
        ctx.record("stop", name=self.name, how=self.how, restart_s=round(time.monotonic() - started, 4),
                   keys_after=keys)
