"""delete-consumer: `XGROUP DELCONSUMER` of a consumer that still has entries pending.

A clean-up script that removes "idle" consumers during or after a deploy drops their PEL
entries with them (redis/redis#9745; ThreeDotsLabs/watermill-redisstream#24): the entries
stay in the stream, but no consumer owns them, so no XAUTOCLAIM and no re-read of one's own
PEL (`XREADGROUP .. 0`) finds them again. `when=dead`: the consumer is SIGKILLed first and
deleted right after (the clean-up script's case: before a restart under its name could read
its PEL); `when=alive`: deleted while it works (its next XREADGROUP makes it again, with an
empty PEL; its XACKs of the dropped entries then match nothing).

The fault deletes the consumer at a moment it holds an entry (it waits up to HOLD_WAIT_S for
one: for `when=alive` the check and the deletion are one script), and records which entries
and events were dropped; the checker names the lost events among them `pel-dropped`. A
deletion that dropped nothing tested nothing: the run is `unknown`.

`at=before_apply` (when=dead) forces the moment: the consumer stops itself at its
`before_apply` failpoint after `after` entries, holding one it read and has not applied, and
is SIGKILLed and deleted there. Killed from outside at a moment its PEL held an entry, a
consumer may have applied it already and not yet acked it (a loaded run: 2 of 2 runs dropped
an applied entry and lost nothing, where the row says the held entry is lost).
"""
from __future__ import annotations

import signal
import time
from typing import Any

from chaos.params import Param
from faults.effects import STRUCK_UNSETTLED
from faults.helpers import pick_worker, process_alive, wait_for_entries, wait_until, workload_streams
from chaos.errors import BadArguments
from faults.interface import Fault, FaultContext, FaultError

# KEYS: streams; ARGV[1]: the consumer; ARGV[2]: "1" to delete only if it holds an entry (else
# return false). Every group of each stream (a black-box worker names its own group).
# Per stream: {stream, {entry id, event id}...}
_DROP = """if ARGV[2] == '1' then
  local held = 0
  for _, key in ipairs(KEYS) do
    if redis.call('EXISTS', key) == 1 then
      for _, g in ipairs(redis.call('XINFO', 'GROUPS', key)) do
        for i = 1, #g, 2 do
          if g[i] == 'name' then held = held + #redis.call('XPENDING', key, g[i + 1], '-', '+', 1, ARGV[1]) end
        end
      end
    end
  end
  if held == 0 then return false end
end
local out = {}
for _, key in ipairs(KEYS) do
  local dropped = {}
  if redis.call('EXISTS', key) == 1 then
    for _, g in ipairs(redis.call('XINFO', 'GROUPS', key)) do
      local group = false
      for i = 1, #g, 2 do if g[i] == 'name' then group = g[i + 1] end end
      for _, p in ipairs(redis.call('XPENDING', key, group, '-', '+', 100000, ARGV[1])) do
        local event = false
        local entry = redis.call('XRANGE', key, p[1], p[1])[1]
        if entry then
          for i = 1, #entry[2], 2 do
            if entry[2][i] == 'event_id' then event = entry[2][i + 1] break end
          end
        end
        dropped[#dropped + 1] = p[1]
        dropped[#dropped + 1] = event
      end
      redis.call('XGROUP', 'DELCONSUMER', key, group, ARGV[1])
    end
  end
  out[#out + 1] = {key, dropped}
end
return out"""


def delete_consumer(client: Any, streams: list[str], consumer: str, only_holding: bool = False) -> dict[str, Any] | None:
    """XGROUP DELCONSUMER in every group of every stream, in one script with the read of what it drops.
    `only_holding`: None, and nothing deleted, when the consumer holds no entry."""
    reply = client.eval(_DROP, len(streams), *streams, consumer, "1" if only_holding else "0")
    if reply is None:
        return None
    entries: dict[str, list[str]] = {}
    events: list[str] = []
    for stream, flat in reply:
        entries[stream] = list(flat[::2])
        events += [e for e in flat[1::2] if e]
    return {"dropped_entries": entries, "dropped_events": events,
            "unsettled": sum(len(ids) for ids in entries.values())}


HOLD_WAIT_S = 2.0   # how long the fault waits for the consumer to hold an entry


class DeleteConsumer(Fault):
    # the deletion dropped at least one entry (its start op's `unsettled`): the consumer held work
    effect = STRUCK_UNSETTLED
    name = "delete-consumer"
    touches_publish = False   # the group's consumer list
    description = ("XGROUP DELCONSUMER of a consumer with entries pending (a clean-up script): its PEL "
                   "entries are dropped; when=dead kills it first, when=alive deletes it while it works")
    params = (
        Param("when", "dead", "dead: SIGKILL the consumer, then delete it at once; alive: delete it "
              "while it works", choices=("dead", "alive")),
        Param("target", "", "the consumer process (empty: one drawn from the run's seed)"),
        Param("role", "consumer", "its role (reader for the fan-out delivery)"),
        Param("at", "time", "time: after after_entries and at_ms, at a moment the consumer holds an entry (seen "
              "from outside); before_apply: when it stops at its before_apply failpoint after `after` entries "
              "(when=dead)", choices=("time", "before_apply")),
        Param("after", 10, "for at=before_apply: entries the consumer passes its failpoint with first",
              kind=int, minimum=0),
        Param("after_entries", 1, "for at=time: wait until the workload's streams hold this many entries",
              kind=int, minimum=0),
        Param("at_ms", 500, "for at=time: then wait this long"),
        Param("wait_ms", 30000, "how long to wait for after_entries (unscaled), or for the failpoint"),
    )

    def validate(self) -> None:
        if self.at == "before_apply" and ({"after_entries", "at_ms"} & set(self.given) or self.when != "dead"):
            raise BadArguments("fault 'delete-consumer': at=before_apply (when=dead) waits for the consumer's "
                               "failpoint, counted with after=; drop after_entries/at_ms")
        if self.at == "time" and "after" in self.given:
            raise BadArguments("fault 'delete-consumer': after= counts entries at the failpoint of at=before_apply")

    @property
    def victim(self) -> str:
        return self.target or "C1"

    def failpoints(self) -> dict[str, dict[str, dict]]:
        if self.at == "time":
            return {}
        return {self.victim: {"before_apply": {"action": "signal", "after": self.after, "count": 1}}}

    def run(self, ctx: FaultContext) -> None:
        if self.at == "before_apply":
            worker, _ = ctx.wait_failpoint("before_apply", self.wait_ms)   # stopped, an unapplied entry in hand
            self._kill_and_delete(ctx, worker)
            return
        if self.after_entries:
            wait_for_entries(ctx, self.after_entries, self.wait_ms / 1000, self.name)
        ctx.sleep(self.at_ms)
        worker = pick_worker(ctx, self.role, self.target)
        consumer = worker.name.partition("#")[0]   # a restarted process keeps its consumer name
        client = ctx.cluster.direct_redis("primary")
        streams = workload_streams(client)
        # at a moment it holds an entry (a consumer between two jobs holds none): at most HOLD_WAIT_S
        deadline = time.monotonic() + HOLD_WAIT_S
        while self.when == "dead" and not self._holds(client, streams, consumer) and time.monotonic() < deadline:
            time.sleep(0.001)
        if self.when == "dead":
            self._kill_and_delete(ctx, worker)
            return
        started = time.monotonic()
        dropped = None
        while self.when == "alive" and dropped is None and time.monotonic() < deadline:
            dropped = delete_consumer(client, streams, consumer, only_holding=True)
            if dropped is None:
                time.sleep(0.001)
        if dropped is None:
            dropped = delete_consumer(client, streams, consumer)
        self._record(ctx, worker, consumer, dropped, started)

    def _kill_and_delete(self, ctx: FaultContext, worker: Any) -> None:
        """SIGKILL the worker, then delete its consumer at once (the clean-up script's case)."""
        worker.kill(signal.SIGKILL)
        if not wait_until(lambda: not process_alive(worker.pid), 5.0, 0.0005):
            raise FaultError(f"fault {self.name!r}: {worker.name} (pid {worker.pid}) outlived its SIGKILL")
        started = time.monotonic()
        client = ctx.cluster.direct_redis("primary")
        consumer = worker.name.partition("#")[0]   # a restarted process keeps its consumer name
        self._record(ctx, worker, consumer, delete_consumer(client, workload_streams(client), consumer), started)

    def _record(self, ctx: FaultContext, worker: Any, consumer: str, dropped: dict[str, Any], started: float) -> None:
        ctx.record("start", name=self.name, spec=self.spec, worker=worker.name, consumer=consumer,
                   when=self.when, **dropped)
        ctx.record("stop", name=self.name, worker=worker.name,
                   dropped=sum(len(v) for v in dropped["dropped_entries"].values()),
                   delete_s=round(time.monotonic() - started, 4))

    @staticmethod
    def _holds(client: Any, streams: list[str], consumer: str) -> bool:
        for stream in streams:
            for group in client.xinfo_groups(stream):
                if client.xpending_range(stream, group["name"], "-", "+", 1, consumername=consumer):
                    return True
        return False
