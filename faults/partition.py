"""partition: cut a link for a window: the proxy disabled (connections closed, new ones
refused), a timeout toxic (bytes dropped, connections kept open) or reset_peer."""
from __future__ import annotations

from typing import Any

from chaos.params import Param
from faults.helpers import check_link_target, LINKS, proxy_for
from faults.effects import LINK_FAILED
from faults.interface import FaultContext
from faults.window import WindowFault


class Partition(WindowFault):
    name = "partition"
    effect = LINK_FAILED
    description = "cut a link (one worker's, or a shared one) for a window"
    params = (
        Param("link", "redis", "which link", choices=LINKS),
        Param("target", "", "a worker process or role whose own link is cut; empty: the shared link"),
        Param("mode", "down", "down (proxy disabled), timeout (blackhole), reset_peer (RST on new connections)",
              choices=("down", "timeout", "reset_peer")),
        Param("at_ms", 0, "when it starts"),
        Param("duration_ms", 1000, "how long it lasts"),
    )

    def validate(self) -> None:
        check_link_target(self.name, self.link, self.target)

    def start(self, ctx: FaultContext) -> dict[str, Any]:
        proxies = proxy_for(ctx, self.link, self.target)
        for proxy in proxies:
            if self.mode == "down":
                self.toxics.disable(proxy)
            else:
                for stream in ("upstream", "downstream"):
                    self.toxics.add(proxy, self.mode, stream=stream, name=f"chaos-partition-{stream}", timeout=0)
        return {"proxies": proxies, "mode": self.mode, "workers": _workers(ctx, self.target)}


def _workers(ctx: FaultContext, target: str) -> list[str]:
    """The processes whose own link is cut (none for a shared link: every process's is)."""
    if not target or target == "shared":
        return []
    try:
        return [w.name for w in ctx.workers(target)] or [target]
    except Exception:  # noqa: BLE001 - not a role: a process name
        return [target]
