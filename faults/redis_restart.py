"""redis-restart: the primary restarts (SIGKILL, then start again on its data dir) with
AOF ``everysec``: what the last second before the crash loses, and whether the group
cursor moves back."""
from __future__ import annotations

import time

from chaos.params import Param
from faults.effects import DIED_MID_WORK
from faults.interface import Fault, FaultContext, FaultError


class RedisRestart(Fault):
    name = "redis-restart"
    effect = DIED_MID_WORK
    takes_down = frozenset({"redis"})   # kills (or shuts down) the primary and starts it again
    description = "SIGKILL the Redis primary and start it again from its AOF (appendfsync everysec)"
    params = (
        Param("at_ms", 500, "when the primary is killed"),
        Param("appendfsync", "everysec", "the AOF fsync policy while the workload runs",
              choices=("everysec", "always", "no")),
        Param("kill", True, "SIGKILL (a crash) rather than SHUTDOWN (a clean stop)", kind=bool),
    )

    def arm(self, ctx: FaultContext) -> None:
        self.restarted = False
        primary = ctx.cluster.direct_redis("primary")
        primary.config_set("appendfsync", self.appendfsync)
        primary.config_set("appendonly", "yes")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # AOF on: a rewrite must finish before it is durable
            info = primary.info("persistence")
            if not info.get("aof_rewrite_in_progress") and not info.get("aof_rewrite_scheduled"):
                break
            time.sleep(0.01)

    def run(self, ctx: FaultContext) -> None:
        ctx.sleep(self.at_ms)
        before = ctx.cluster.direct_redis("primary").info("replication").get("master_repl_offset")
        ctx.record("start", name=self.name, spec=self.spec, offset=before)
        started = time.monotonic()
        ctx.cluster.restart_primary(appendonly=True, appendfsync=self.appendfsync, kill=self.kill)
        self.restarted = True
        ctx.record("stop", name=self.name, restart_s=round(time.monotonic() - started, 4))

    def heal(self, ctx: FaultContext) -> None:
        """Not restarted: turn AOF off again (a restarted node is reset clean by the cluster)."""
        if not getattr(self, "restarted", True):
            try:
                ctx.cluster.direct_redis("primary").config_set("appendonly", "no")
            except Exception as exc:  # noqa: BLE001
                raise FaultError(f"fault 'redis-restart' could not turn AOF off: {exc}") from exc
