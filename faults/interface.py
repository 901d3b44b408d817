"""The fault plugin interface: what a fault is (`Fault`), what it acts through (`FaultContext`),
what it is checked against before anything starts (`Plan`), how it fails (`FaultError`) and
what it must have done to the workload (`Fault.effect`, checked by faults.effects).

A fault is armed before the workload starts, fires at a failpoint or at a time from
its own thread, and heals. Everything random in a fault comes from ``ctx.rng`` (the
run's seed), so a run replays exactly; every duration goes through ``ctx.scale``.
A fault module imports this, faults.helpers and the cluster; never the orchestrator
(chaos.orchestrator) nor the expectations.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from chaos.errors import BadArguments
from chaos.params import Param, format_spec, parse_params
from chaos.workload import failpoints as worker_failpoints


@runtime_checkable
class WorkerHandle(Protocol):
    """A running worker process as the orchestrator sees it."""

    name: str
    pid: int
    links: Any  # chaos.cluster.WorkerLinks

    def kill(self, sig: int) -> None: ...

    def alive(self) -> bool: ...


@runtime_checkable
class FaultContext(Protocol):
    """What a fault may touch during a run (docs/INTERFACES.md section 7)."""

    cluster: Any  # chaos.cluster.Cluster
    rng: Any  # random.Random seeded from the run's seed
    stop_event: threading.Event

    def scale(self, ms: float) -> float: ...

    def sleep(self, ms: float) -> bool: ...

    def workers(self, role: str) -> list[WorkerHandle]: ...

    def wait_failpoint(self, name: str, timeout_ms: float) -> tuple[WorkerHandle, dict]: ...

    def resume(self, worker: WorkerHandle) -> None: ...

    def record(self, phase: str, **value: Any) -> None: ...


@dataclass
class Plan:
    """What a run will start, for checking a fault against it before anything starts.

    ``roles`` maps a role (``consumer``, ``producer``...) to its process names and
    ``failpoints`` maps a role to the failpoint names its workers carry. ``strategy`` (a
    chaos.strategies.presets.Strategy, None for a black-box consumer) and ``backend`` (native,
    compose, external; empty when not known yet) let a fault refuse a run it does not fit.
    """

    roles: dict[str, list[str]] = field(default_factory=dict)
    failpoints: dict[str, set[str]] = field(default_factory=dict)
    links: set[str] = field(default_factory=lambda: {"redis", "replica", "postgres", "replication"})
    strategy: Any = None
    backend: str = ""


class FaultError(RuntimeError):
    """A fault could not act or could not heal: the run's verdict is unknown and the
    test errors (the cluster is rebuilt for the next test)."""


class Fault:
    """Base of every fault plugin: declared parameters, optional failpoints, run, heal.

    Subclasses set ``name``, ``description`` and ``params`` and override what they need.
    Parameter values are attributes of the instance (``self.hold_ms``).
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    params: ClassVar[tuple[Param, ...]] = ()
    # Rig components (kinds or names of chaos/cluster/health.py: "redis", "sentinel", "postgres",
    # "proxy", "Sentinel 2"...) this fault may kill or stop: the orchestrator does not count their
    # death or stop as a rig failure in a run where this fault is configured. Workers never count.
    takes_down: ClassVar[frozenset[str]] = frozenset()
    # The effect the fault must have had on the workload, one of faults.effects.EFFECTS
    # ("died-mid-work", "publish-failed", "link-failed", "window-hit"); "" asks for none. After
    # the run the orchestrator reads the history (faults.effects.missing): a run where the
    # effect is missing tested nothing and is `unknown`, with a reason naming the fault.
    effect: ClassVar[str] = ""
    # Whether the fault may act on a producer's path to Redis (its link, the primary's
    # availability, Redis's memory or replication). In a cell where no fault does, a producer
    # whose spec did not name timeout_ms gets a steady one (chaos.strategies.presets.
    # steady_producer): its retries would be the harness's, not the cell's. True unless the
    # fault acts only on consumers, dispatchers, PostgreSQL or the group (a new fault: leave it).
    touches_publish: ClassVar[bool] = True

    def explains(self) -> frozenset[str]:
        """Counts this fault may cause that would otherwise make the run `unknown`
        (``"unattempted"``: a killed producer leaves intended events never attempted)."""
        return frozenset()

    def __init__(self, **params: Any) -> None:
        self.values: dict[str, Any] = parse_params(f"fault {self.name!r}", self.params, params,
                                                   see=f" (see: python -m chaos describe {self.name})")
        for name, value in self.values.items():
            setattr(self, name, value)
        self.given = dict(params)
        self.validate()

    # -- hooks a subclass overrides -------------------------------------------------
    def validate(self) -> None:
        """Check combinations of parameters; raise BadArguments naming the fix."""

    def check(self, plan: Plan) -> None:
        """Check the fault against what the run starts (roles, failpoints, links)."""
        link = self.values.get("link")
        if link and link not in plan.links:
            raise BadArguments(f"fault {self.name!r}: this topology has no {link!r} link; "
                               f"it has: {', '.join(sorted(plan.links))}")
        for key in ("target", "role"):
            named = self.values.get(key)
            if named and named != "shared" and plan.roles and _role_of(plan, named) is None:
                raise BadArguments(f"fault {self.name!r}: {key}={named} is not a role or worker of this run; "
                                   f"it has: {', '.join(_targets(plan)) or 'none'}")
        for role, points in self.failpoints().items():
            try:
                worker_failpoints.validate(points)
            except ValueError as exc:
                raise BadArguments(f"fault {self.name!r}: the workers cannot arm its failpoint: {exc}") from None
            known = _role_of(plan, role)
            if known is None:
                raise BadArguments(
                    f"fault {self.name!r} targets {role!r} but this run has no such role or worker; "
                    f"it has: {', '.join(_targets(plan)) or 'none'}"
                )
            have = plan.failpoints.get(known)
            if have is not None:
                missing = sorted(set(points) - set(have))
                if missing:
                    raise BadArguments(
                        f"fault {self.name!r}: no {known} worker has failpoint {', '.join(missing)}; "
                        f"its failpoints are: {', '.join(sorted(have)) or 'none'}"
                    )

    def failpoints(self) -> dict[str, dict[str, dict]]:
        """Role or process name -> {failpoint: {"action": ..., ...}} to put in worker specs."""
        return {}

    def arm(self, ctx: FaultContext) -> None:
        """Called before the workload starts (e.g. a toxic that must be there at t=0)."""

    def run(self, ctx: FaultContext) -> None:
        """Fire: runs in its own thread during the workload."""

    def heal(self, ctx: FaultContext) -> None:
        """Always called, also when run raised: must leave the cluster usable."""

    # -- description ------------------------------------------------------------------
    @property
    def spec(self) -> str:
        """The canonical ``name:k=v,...`` of the parameters that differ from the defaults."""
        return format_spec(self.name, {p.name: self.values[p.name] for p in self.params
                                       if self.values[p.name] != p.default})

    def __repr__(self) -> str:
        return f"<fault {self.spec}>"

    @classmethod
    def describe(cls) -> str:
        """The text ``python -m chaos describe <fault>`` prints."""
        lines = [f"{cls.name}: {cls.description}", "parameters:" if cls.params else "parameters: none"]
        lines += [f"  {p.describe()}" for p in cls.params]
        return "\n".join(lines)

    @classmethod
    def summary(cls) -> dict[str, Any]:
        """A JSON-able description (for ``list --json``)."""
        return {
            "name": cls.name,
            "description": cls.description,
            "params": {p.name: p.summary() for p in cls.params},
        }


def _targets(plan: Plan) -> list[str]:
    names = list(plan.roles)
    for procs in plan.roles.values():
        names += [p for p in procs if p not in names]
    return names


def _role_of(plan: Plan, target: str) -> str | None:
    """The role a target names: the role itself, or the role of the process it names."""
    if not plan.roles:
        return target  # nothing to check against
    if target in plan.roles:
        return target
    for role, procs in plan.roles.items():
        if target in procs:
            return role
    return None
