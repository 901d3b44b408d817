"""latency: a latency toxic (with jitter) on any link for a window."""
from __future__ import annotations

from typing import Any

from chaos.params import Param
from faults.effects import WINDOW_HIT
from faults.helpers import check_link_target, LINKS, proxy_for
from faults.interface import FaultContext
from faults.window import WindowFault


class Latency(WindowFault):
    name = "latency"
    effect = WINDOW_HIT
    description = "delay every chunk on a link (one worker's, or a shared one) for a window"
    params = (
        Param("link", "redis", "which link", choices=LINKS),
        Param("target", "", "a worker process or role whose own link is hit; empty: the shared link"),
        Param("latency_ms", 100, "added delay per chunk"),
        Param("jitter_ms", 0, "random +- jitter per chunk (drawn by the proxy)"),
        Param("stream", "both", "which direction", choices=("both", "upstream", "downstream")),
        Param("at_ms", 0, "when it starts"),
        Param("duration_ms", 1000, "how long it lasts"),
    )

    def validate(self) -> None:
        check_link_target(self.name, self.link, self.target)

    def start(self, ctx: FaultContext) -> dict[str, Any]:
        proxies = proxy_for(ctx, self.link, self.target)
        streams = ("upstream", "downstream") if self.stream == "both" else (self.stream,)
        for proxy in proxies:
            for stream in streams:
                self.toxics.add(proxy, "latency", stream=stream, name=f"chaos-latency-{stream}",
                                latency=int(ctx.scale(self.latency_ms) * 1000),
                                jitter=int(ctx.scale(self.jitter_ms) * 1000))
        return {"proxies": proxies}
