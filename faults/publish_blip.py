"""publish-blip: a real network fault on one producer's Redis link while it publishes.

The reference: ``created`` and ``paid`` come from two producer processes (order service,
payment service) on two links; the blip hits the order service's link so that
``created`` fails at 0 and 500 ms and succeeds at 1000 ms, while ``paid`` goes through at
300 ms. ``stream=upstream`` drops the request (Redis never sees the XADD);
``stream=downstream`` drops only the reply: Redis applied the XADD, the producer saw an
error (outcome unknown, ``info``) and retries, so the stream holds the entry twice.

A toxic that is already there when the producer connects also eats the connection
handshake's reply, so a reply-only blip starts at the producer's ``before_publish``
failpoint (``at=before_publish``): the producer stops there, the toxic goes on, it resumes.
The toxic then stays on for ``duration_ms`` and until the producer comes back to
``before_publish`` (its retry, or its next row): it stops there, the toxic goes off, it
resumes. The publish the blip was put on for has then met it, however late a loaded machine
let it run; a toxic on for a fixed time was gone before a starved producer sent its XADD.

``until_entries`` (with ``at=before_publish``) also keeps the toxic on until the workload's
streams hold that many entries: another producer's publishes (P-payment's `paid` in the
reference, ``until_entries=1``: the blip's producer publishes nothing meanwhile). Its retry
then lands after them every run, forced: by the clock (paid at 300 ms, created's attempts at
0/500/1000 ms in an 800 ms window) a loaded machine that started P-payment late had `paid`
land after `created`. When the entries never come within ``wait_ms`` the fault fails and the
run is unknown.
"""
from __future__ import annotations

import time
from typing import Any

from chaos.errors import BadArguments
from chaos.params import Param
from faults.effects import PUBLISH_FAILED
from faults.helpers import proxy_for, wait_for_entries
from faults.interface import FaultContext, FaultError
from faults.window import WindowFault

TOXICS = ("reset_peer", "timeout", "down")


class PublishBlip(WindowFault):
    name = "publish-blip"
    effect = PUBLISH_FAILED
    description = "a reset_peer/timeout toxic or a disabled proxy on one producer's Redis link for a window"
    params = (
        Param("target", "P-order", "the producer process whose link is hit (P-order publishes `created`)"),
        Param("toxic", "reset_peer", "what the link does: reset_peer (RST/FIN on the first chunk), "
              "timeout (drop data, close when removed), down (proxy disabled)", choices=TOXICS),
        Param("stream", "upstream", "upstream drops the request; downstream drops only the reply",
              choices=("upstream", "downstream")),
        Param("at", "time", "time (at at_ms) or before_publish (when the producer is about to publish)",
              choices=("time", "before_publish")),
        Param("at_ms", 0, "for at=time: when the blip starts, from the start of the workload"),
        Param("duration_ms", 800, "how long it lasts (800: attempts at 0 and 500 ms fail, 1000 ms succeeds)"),
        Param("timeout_ms", 0, "the toxic's own timeout attribute (reset_peer: delay before closing)"),
        Param("until_entries", 0, "for at=before_publish: the toxic also stays on until the workload's streams "
              "hold this many entries (another producer's publishes), so the blip's publish lands after them",
              kind=int, minimum=0),
        Param("wait_ms", 30000, "for at=before_publish: how long to wait for the failpoint (unscaled)"),
    )

    def validate(self) -> None:
        if self.until_entries and self.at != "before_publish":
            raise BadArguments("fault 'publish-blip': until_entries needs at=before_publish (the toxic goes off at "
                               "the producer's next publish); add at=before_publish")
        if self.toxic == "down" and self.stream == "downstream":
            raise BadArguments("fault 'publish-blip': toxic=down cuts both directions; "
                               "for a lost reply use toxic=reset_peer,stream=downstream")

    def failpoints(self) -> dict[str, dict[str, dict]]:
        if self.at == "time":
            return {}
        # the first hit: the toxic goes on; the second (the next publish): it goes off
        return {self.target: {"before_publish": {"action": "signal", "count": 2}}}

    def starts_at_arm(self) -> bool:
        return self.at == "time" and self.at_ms == 0

    def run(self, ctx: FaultContext) -> None:
        if self.at == "time":
            super().run(ctx)
            return
        if getattr(self, "armed_for", None) != id(ctx):
            self.arm(ctx)
        worker, _ = ctx.wait_failpoint("before_publish", self.wait_ms)
        self.second_seen = False
        try:
            self._start(ctx)
        finally:
            ctx.resume(worker)
        left_s = ctx.scale(self.duration_ms) - (time.monotonic() - self.started_at)
        if left_s > 0:
            time.sleep(left_s)
        missed = None
        if self.until_entries:
            try:
                wait_for_entries(ctx, self.until_entries, self.wait_ms / 1000, self.name)
            except FaultError as exc:
                missed = exc
        try:
            later, _ = ctx.wait_failpoint("before_publish", self.wait_ms)
        except FaultError:
            later = None   # it did not come back within wait_ms (heal resumes it if it does later)
        self.second_seen = later is not None
        try:
            self._stop(ctx)
        finally:
            if later is not None:
                ctx.resume(later)
        if missed is not None:
            raise missed

    def start(self, ctx: FaultContext) -> dict[str, Any]:
        proxies = proxy_for(ctx, "redis", self.target)
        for proxy in proxies:
            if self.toxic == "down":
                self.toxics.disable(proxy)
            else:
                self.toxics.add(proxy, self.toxic, stream=self.stream, name="chaos-blip",
                                timeout=int(ctx.scale(self.timeout_ms) * 1000))
        return {"proxies": proxies, "toxic": self.toxic, "stream": self.stream}

    def heal(self, ctx: FaultContext) -> None:
        try:
            super().heal(ctx)
        finally:
            if self.at != "time" and getattr(self, "started", False) and not getattr(self, "second_seen", True):
                try:   # it came back to the failpoint after the wait gave up: it is stopped there
                    later, _ = ctx.wait_failpoint("before_publish", 0)
                    ctx.resume(later)
                except FaultError:
                    pass
