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

With `window=N` the schedule is forced instead of timed: the producer stops before its publish
after `after_entries` (a failpoint), the consumers catch up (unless `catch_up=false`) and are stopped (SIGSTOP), the
streams go (deleted, or with the restarted primary: its restart, however long a loaded machine
makes it, falls while nobody publishes, so a retrying producer never gives up events to it);
the producer publishes N events into the group-less stream and stops again; the
consumers go on (NOGROUP, back-off, the policy) and the producer only once the group is back
(or no consumer is left). So those N publishes fall between the loss and the group's return,
however a loaded machine delays either side (a publish attempt that failed and was retried
counts as one of them, so the window can hold fewer events; the stop record lists them): a consumer starved after the loss let a
steady producer publish 37 of its 40 remaining events before the recreate (loaded run: 93 of
100 lost over 2 runs, where the timed schedule measured about 10 a run).

With ``catch_up=false`` the backlog is forced too: each consumer stops itself before applying its
first entry (failpoint ``before_apply``), and the loss waits until every live consumer has (and
the producer has stopped): what they read is in hand (applied once they go on), everything else
published is unread and vanishes. Stopped from outside once the producer had stopped, a consumer
that kept up with a slow relay (an outbox dispatcher beside two CPU hogs) had read and applied
everything first, and a run lost nothing (stream-lost 0: the row's race missed).
"""
from __future__ import annotations

import os
import signal
import time
from typing import Any

from chaos.errors import BadArguments
from chaos.params import Param
from faults.effects import DIED_MID_WORK
from faults.helpers import process_alive, wait_for_entries, workload_settled, workload_streams
from faults.interface import Fault, FaultContext, FaultError, Plan

FIRES = 2   # with window: the producer stops before the window's first publish and after its last
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
        Param("window", 0, "force the schedule (0: timed): the producer stops after after_entries, the "
              "consumers are stopped and the streams deleted (or the primary restarted empty), the producer "
              "publishes this many events "
              "into the group-less stream and stops until the group is back or no consumer is left",
              kind=int, minimum=0),
        Param("publisher", "producer", "with window: the role whose before_publish failpoint gates the XADDs "
              "(an outbox preset's relay: dispatcher)"),
        Param("catch_up", True, "with window: wait until the consumers have read and acked what was published "
              "before stopping them (false: each consumer stops before applying its first entry, and the loss "
              "meets their backlog)", kind=bool),
    )

    def validate(self) -> None:
        if self.window and (self.window > self.after_entries + 1 or self.at_ms):
            raise BadArguments("fault 'group-loss': window=N needs at_ms=0 and after_entries >= N - 1 "
                               "(the producer's failpoint stops it after after_entries and after N more)")

    def failpoints(self) -> dict[str, dict[str, dict]]:
        if not self.window:
            return {}
        # before_publish fires on the (after_entries + 1)-th publish and on the window's end
        points = {self.publisher: {"before_publish": {"action": "signal", "count": FIRES, "every": self.window,
                                                      "after": self.after_entries + 1 - self.window}}}
        if not self.catch_up:      # each consumer stops with its first entry in hand: the rest is a backlog
            points["consumer"] = {"before_apply": {"action": "signal", "count": 1}}
        return points

    def check(self, plan: Plan) -> None:
        super().check(plan)
        if plan.backend == "external":
            if os.environ.get("CHAOS_EXTERNAL_WIPE") != "yes":
                raise BadArguments("fault 'group-loss' deletes streams on the external Redis: set "
                                   "CHAOS_EXTERNAL_WIPE=yes to confirm the cluster is yours to wipe")
            if self.how == "restart-empty":
                raise BadArguments("fault 'group-loss': the external backend cannot restart its Redis; "
                                   "use how=evict there (or the native backend)")

    def arm(self, ctx: FaultContext) -> None:
        self.stopped: list = []
        self.stops_taken = 0     # with window: the producer's two failpoint stops this fault took
        self.all_held = False    # catch_up=false: every live consumer stopped at before_apply was taken

    def run(self, ctx: FaultContext) -> None:
        if self.window:
            return self._forced(ctx)
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

    def _forced(self, ctx: FaultContext) -> None:
        """The loss with `window` events between it and the group's return (see the module doc)."""
        producer, _ = ctx.wait_failpoint("before_publish", self.wait_ms)
        self.stops_taken += 1
        self.stopped = [producer]
        client = ctx.cluster.direct_redis("primary")
        deadline = time.monotonic() + self.wait_ms / 1000
        if self.catch_up:
            while not workload_settled(client, 1) and time.monotonic() < deadline:
                time.sleep(0.005)
            consumers = [w for w in ctx.workers("consumer") if w.alive()]
            for worker in consumers:
                worker.kill(signal.SIGSTOP)
                self.stopped.append(worker)
        else:
            consumers = self._held_consumers(ctx, deadline)
        caught_up = workload_settled(client, 1)
        streams = [self.stream] if self.stream else workload_streams(client)
        gone = vanish(client, streams, "", delete=self.how == "evict")
        ctx.record("start", name=self.name, spec=self.spec, how=self.how, streams=streams, caught_up=caught_up,
                   stopped=[w.name for w in consumers], **gone)
        if self.how == "restart-empty":
            started = time.monotonic()
            ctx.cluster.restart_primary(appendonly=False, kill=True)
            client = ctx.cluster.direct_redis("primary")
            ctx.record("info", name=self.name, how=self.how, restart_s=round(time.monotonic() - started, 4),
                       keys_after=int(client.dbsize()))
        self._go_on(ctx, producer)
        producer, _ = ctx.wait_failpoint("before_publish", self.wait_ms)
        self.stops_taken += 1
        self.stopped.append(producer)
        window = vanish(client, streams, "", delete=False)   # read only: what the group-less streams hold
        for worker in consumers:
            self._go_on(ctx, worker)
        deadline, back = time.monotonic() + self.wait_ms / 1000, False
        while time.monotonic() < deadline:
            back = all(_groups(client, s) for s in streams)   # deleted with the streams: any group is new
            if back or not any(w.alive() for w in consumers):
                break
            time.sleep(0.005)
        self._go_on(ctx, producer)
        ctx.record("stop", name=self.name, how=self.how, window=window["entries"],
                   window_events=sorted(set(window["vanished_events"])), group_back=back)
        if not back and any(w.alive() for w in consumers):
            raise FaultError(f"fault 'group-loss': the group was not back within {self.wait_ms} ms of the window "
                             "and a consumer lives: the schedule it forces did not happen")

    def _held_consumers(self, ctx: FaultContext, deadline: float) -> list:
        """catch_up=false: every live consumer, once each has stopped at its before_apply (in
        self.stopped); FaultError if one has not by the deadline."""
        held: list = []
        while True:
            waiting = [w for w in ctx.workers("consumer") if w.alive() and w not in held]
            if not waiting:
                self.all_held = True
                return held
            if time.monotonic() > deadline or ctx.stop_event.is_set():
                raise FaultError(f"fault 'group-loss': {', '.join(w.name for w in waiting)} did not stop before "
                                 f"applying its first entry within {self.wait_ms} ms: the backlog it forces did "
                                 "not happen")
            try:
                worker, _ = ctx.wait_failpoint("before_apply", 100)
            except FaultError:
                continue
            self.stopped.append(worker)
            held.append(worker)

    def _go_on(self, ctx: FaultContext, worker) -> None:
        if worker in self.stopped:
            self.stopped.remove(worker)
        if process_alive(worker.pid):
            ctx.resume(worker)

    def heal(self, ctx: FaultContext) -> None:
        """Resume whatever the forced schedule still holds, and a producer that stopped at its
        failpoint after this fault gave up waiting for it. The failpoint fires twice (FIRES), so
        once the fault took both stops nobody can be left there: no look (it sat out its second
        in every run)."""
        for worker in list(getattr(self, "stopped", [])):
            self._go_on(ctx, worker)
        if self.window and getattr(self, "stops_taken", 0) < FIRES:
            try:
                worker, _ = ctx.wait_failpoint("before_publish", 1)
                self._go_on(ctx, worker)
            except FaultError:
                pass
        if self.window and not self.catch_up and not getattr(self, "all_held", True):   # stopped after the fault gave up
            for _ in ctx.workers("consumer"):
                try:
                    worker, _ = ctx.wait_failpoint("before_apply", 1)
                except FaultError:
                    break
                self._go_on(ctx, worker)


def _groups(client, stream: str) -> list[dict]:
    try:
        return client.xinfo_groups(stream)
    except Exception:  # noqa: BLE001 - the stream does not exist (yet)
        return []
