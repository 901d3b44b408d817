"""maxmemory: the primary reaches `maxmemory` under `noeviction` while the backlog grows.

A stream nobody trims keeps every entry, so a Redis whose memory is capped (the usual
production setting, and every managed service) ends up refusing writes: XADD answers
`OOM command not allowed when used memory > 'maxmemory'`, while XREADGROUP, XACK and
XAUTOCLAIM still work (they are not `denyoom`), so consumers drain the backlog that
cannot shrink. The fault sets `maxmemory-policy noeviction` and `maxmemory` to the
memory used at that moment plus `headroom_kb` (by default a little below it, since
client buffers come and go and the cap must hold for the whole window), keeps it for `duration_ms` (until the
operator raises the limit), then restores both settings. With `refused` set, `duration_ms` counts from
the moment the server has refused that many of the workload's writes, not from the cap: a producer
starved on a loaded machine may publish nothing for a while, and a window it never met tests nothing.
With `at=before_publish` the cap meets the producer by construction: the first worker of `publisher`
stops at its before_publish failpoint after `after_entries` publishes, the cap goes on, and it
resumes with that publish (a fault thread starved on a loaded machine once capped after the producer
had published everything: nothing was refused). What happens to the events
published in that window is the producer's business: a retrying producer whose retries
end inside the window drops them (the checker's `dropped`), an outbox keeps the rows and
relays them once XADD works again.
"""
from __future__ import annotations

import threading
import time
from typing import Any

import redis

from chaos.params import Param
from chaos.strategies.plan import PRODUCER
from chaos.errors import BadArguments
from faults.effects import PUBLISH_FAILED
from faults.failover_steps import hold_at_publish
from faults.helpers import arrivals, wait_for_entries
from faults.interface import FaultContext, FaultError
from faults.window import WindowFault

PROBE_KEY = "chaos:maxmemory-probe"


def oom_refusals(client: redis.Redis) -> int:
    """Commands the server refused with OOM since its start (INFO errorstats)."""
    stats = client.info("errorstats")
    entry = stats.get("errorstat_OOM") or {}
    return int(entry.get("count", 0)) if isinstance(entry, dict) else 0


class MaxMemory(WindowFault):
    name = "maxmemory"
    effect = PUBLISH_FAILED
    description = ("cap the primary's maxmemory (noeviction) at the memory it uses, for a window: "
                   "XADD is refused with OOM while consumers still read and ack")
    params = (
        Param("after_entries", 1, "wait until the workload's streams hold this many entries (a backlog "
              "to grow; its progress, not the clock)", kind=int, minimum=0),
        Param("at", "entries", "entries: cap once the streams hold after_entries (then at_ms); before_publish: "
              "the first worker of `publisher` stops at its before_publish failpoint after after_entries "
              "publishes, the cap goes on, it resumes (the cap meets its next publish however late it runs)",
              choices=("entries", "before_publish")),
        Param("publisher", PRODUCER, "for at=before_publish: the role whose before_publish failpoint waits for "
              "the cap (an outbox preset's relay: dispatcher)"),
        Param("at_ms", 0, "then wait this long before the cap"),
        Param("duration_ms", 2000, "how long the cap stays before the operator raises it", minimum=1),
        Param("headroom_kb", -256, "maxmemory = used memory + this; below 0 (the default) the cap stays "
              "under the usage when client buffers shrink, so every XADD of the window is refused; above 0 "
              "the backlog still grows by that much first", kind=int),
        Param("refused", 0, "duration_ms counts from the moment the server has refused this many of the "
              "workload's writes with OOM since the cap (INFO errorstats; the producer's progress, not the "
              "clock); 0: from the cap", kind=int, minimum=0),
        Param("wait_ms", 30000, "how long to wait for after_entries, and for refused (unscaled)"),
    )

    def validate(self) -> None:
        if self.at == "before_publish" and (self.at_ms or not self.after_entries):
            raise BadArguments("fault 'maxmemory': at=before_publish needs at_ms=0 and after_entries >= 1 (the "
                               "publisher stops at its failpoint after that many publishes and the cap goes on "
                               "there); with after_entries=0 the cap is on before the workload starts anyway")

    def failpoints(self) -> dict[str, dict[str, dict]]:
        if self.at != "before_publish":
            return {}
        return {self.publisher: {"before_publish": {"action": "signal", "after": self.after_entries, "count": 1}}}

    def starts_at_arm(self) -> bool:
        return self.at_ms == 0 and self.after_entries == 0

    def run(self, ctx: FaultContext) -> None:
        if getattr(self, "armed_for", None) != id(ctx):
            self.arm(ctx)
        if not self.started and self.at == "before_publish":
            began = time.monotonic()

            def cap() -> None:          # the publisher waits at its failpoint meanwhile
                self.entries_wait_s = time.monotonic() - began
                self._start(ctx)
            hold_at_publish(ctx, self.wait_ms, cap)
            if len(ctx.workers(self.publisher)) > 1:    # the others stop there too: resumed as they come
                threading.Thread(target=self._resume_arrivals, args=(ctx,), daemon=True,
                                 name="maxmemory-publishers").start()
        elif not self.started and self.after_entries:
            self.entries_wait_s = wait_for_entries(ctx, self.after_entries, self.wait_ms / 1000, self.name)
        super().run(ctx)

    @staticmethod
    def _resume_arrivals(ctx: FaultContext) -> None:
        """Resume each other publisher that stops at its before_publish failpoint (the cap is on),
        until the run stops."""
        for worker in arrivals(ctx, "before_publish"):
            ctx.resume(worker)

    def window_opens(self, ctx: FaultContext) -> None:
        if self.refused:
            self.wait_refused(ctx)

    def wait_refused(self, ctx: FaultContext) -> None:
        """Hold the cap until the server has refused `refused` writes since it was set (up to
        wait_ms), then start the window's clock there; record how many and how long it took."""
        began = time.monotonic()
        deadline = began + self.wait_ms / 1000
        refused = 0
        while time.monotonic() < deadline:
            client = self.client
            try:
                refused = oom_refusals(client) - self.refusals_at_cap if client is not None else refused
            except (redis.RedisError, AttributeError):     # healed meanwhile (another thread closed it)
                break
            if client is None:
                break
            if refused >= self.refused or not self.producing(ctx):
                break
            time.sleep(0.005)
        self.started_at = time.monotonic()
        ctx.record("info", name=self.name, step="refused", refused=refused, reached=refused >= self.refused,
                   wait_s=round(self.started_at - began, 4))

    def producing(self, ctx: FaultContext) -> bool:
        """Whether a publish may still come: a worker of `publisher` alive (the stream producer; an
        outbox's relay), the run not stopped. A cap placed after the producers finished (the
        fault's thread starved past them, at=entries) meets nothing: the run is `unknown` by its
        effect (no publish failed), not held for wait_ms."""
        stop = getattr(ctx, "stop_event", None)
        if stop is not None and stop.is_set():
            return False
        producers = ctx.workers(self.publisher)
        return not producers or any(w.alive() for w in producers)

    def start(self, ctx: FaultContext) -> dict[str, Any]:
        self.client = client = ctx.cluster.direct_redis("primary")
        saved = client.config_get("maxmemory", "maxmemory-policy")
        self.saved = {"maxmemory": saved["maxmemory"], "maxmemory-policy": saved["maxmemory-policy"]}
        self.refusals_before = oom_refusals(client)
        client.config_set("maxmemory-policy", "noeviction")
        used = cap = 0
        for _ in range(20):       # used memory moves (client buffers): cap until a write is refused
            used = int(client.info("memory")["used_memory"])
            cap = max(1, used + self.headroom_kb * 1024)
            client.config_set("maxmemory", cap)
            if self.headroom_kb > 0:
                break
            try:
                client.set(PROBE_KEY, "x" * 1024)
                client.delete(PROBE_KEY)
            except redis.exceptions.OutOfMemoryError:
                break
            time.sleep(0.001)
        else:
            raise FaultError(f"fault {self.name!r}: writes still succeed with maxmemory={cap}; "
                             f"used memory moves too much to cap it")
        self.refusals_at_cap = oom_refusals(client)      # the probe's own refusal is not the workload's
        return {"used_memory": used, "maxmemory": cap, "saved": self.saved,
                "entries_wait_s": round(getattr(self, "entries_wait_s", 0.0), 4)}

    def stop(self, ctx: FaultContext) -> list[str]:
        client = getattr(self, "client", None)
        if client is None:
            return []
        try:
            refused = oom_refusals(client) - self.refusals_before
            client.config_set("maxmemory", self.saved["maxmemory"])
            client.config_set("maxmemory-policy", self.saved["maxmemory-policy"])
        except redis.RedisError as exc:
            return [f"restore maxmemory {self.saved}: {exc}"]
        finally:
            client.close()
            self.client = None
        ctx.record("info", name=self.name, step="lifted", oom_refusals=refused)
        self.oom_refused = refused
        return []
