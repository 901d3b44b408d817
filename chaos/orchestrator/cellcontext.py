"""What stays the same across the runs of one cell: the cluster, the resolved strategy and
its consumer plans, the fault specs, the bounds, and the orchestrator's own connections."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from chaos.orchestrator.primary import CALL_TIMEOUT_S, PrimaryRedis
from chaos.orchestrator.rigwatch import spared_by
from chaos.strategies.plan import ProcessPlan
from chaos.strategies.presets import Strategy


class CellContext:
    """What stays the same across the runs of one cell."""

    def __init__(self, cluster: Any, strategy: Strategy, fault_specs: list[Any], time_scale: float,
                 failpoints: dict[str, dict], root: Path, trace: Callable[[str], None] | None,
                 workload_bound_s: float | None = None, stall_s: float | None = None,
                 made: list[Any] | None = None) -> None:
        self.cluster, self.strategy, self.fault_specs = cluster, strategy, fault_specs
        self.workload_bound_s, self.stall_s = workload_bound_s, stall_s
        self.time_scale, self.extra_failpoints, self.root, self.trace = time_scale, failpoints, root, trace
        self.streams = strategy.delivery.streams()
        self.job = {"guard": strategy.guard.to_spec(), "ack": strategy.ack.to_spec()}
        self.consumer_plans = strategy.delivery.plans(self.job)
        for plan in self.consumer_plans:
            plan.respawn = plan.respawn or strategy.delivery.respawn
            plan.respawn_ms = strategy.delivery.respawn_ms
        self._conn = None
        self.redis = PrimaryRedis(cluster)
        # rig components the configured faults may kill or stop (not a rig failure when they do);
        # `made`: the cell's faults already made once from the specs (run_spec's check)
        self.spared: set[str] = spared_by(self.new_faults() if made is None else made)
        self.pg_gone = False      # PostgreSQL failed under a run: not asked again

    def conn(self):
        if self.pg_gone:
            raise psycopg.OperationalError("PostgreSQL failed under the run (a rig failure): not asked again")
        if self._conn is None or self._conn.closed:
            self._conn = self.cluster.pg_connect(connect_timeout=int(CALL_TIMEOUT_S))
        return self._conn

    def pg(self, call: Callable[[Any], Any]) -> Any:
        """``call(conn)`` on the orchestrator's connection; a connection the server closed (a
        terminated backend) is opened again once: the orchestrator's own reads are idempotent.
        A server that is gone fails the new connect too, and that error propagates."""
        try:
            return call(self.conn())
        except (psycopg.OperationalError, psycopg.InterfaceError):
            if self._conn is not None and not (self._conn.closed or self._conn.broken):
                raise
            self._conn = None
            return call(self.conn())

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self.redis.close()

    def plan_roles(self, producer_plans: list[ProcessPlan]) -> dict[str, list[str]]:
        roles: dict[str, list[str]] = {}
        for plan in self.consumer_plans + producer_plans:
            for role in {plan.kind, plan.role}:
                roles.setdefault(role, []).append(plan.name)
            if plan.helpers:
                roles.setdefault("worker", []).extend(plan.helpers)
        return roles

    def new_faults(self) -> list[Any]:
        """This run's fault instances, made by the one factory from the parsed specs."""
        from faults.registry import make_fault
        return [make_fault(s) for s in self.fault_specs]
