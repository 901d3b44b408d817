"""The fault plugin interface: parameters, the context a fault acts through, and helpers.

A fault is armed before the workload starts, fires at a failpoint or at a time from
its own thread, and heals. Everything random in a fault comes from ``ctx.rng`` (the
run's seed), so a run replays exactly; every duration goes through ``ctx.scale``.
"""
from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterable, Protocol, runtime_checkable

from chaos.errors import BadArguments
from chaos.params import Param, format_value as _fmt, parse_params, parse_spec  # noqa: F401 - Param, parse_spec re-exported
from chaos.cluster.spawner import wait_until  # noqa: F401 - re-exported for the fault modules

# ---------------------------------------------------------------------------
# What a fault acts through (implemented by the orchestrator, chaos/run.py)
# ---------------------------------------------------------------------------


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
    ``failpoints`` maps a role to the failpoint names its workers carry.
    """

    roles: dict[str, list[str]] = field(default_factory=dict)
    failpoints: dict[str, set[str]] = field(default_factory=dict)
    links: set[str] = field(default_factory=lambda: {"redis", "replica", "postgres", "replication"})


class FaultError(RuntimeError):
    """A fault could not act or could not heal: the run's verdict is unknown and the
    test errors (the cluster is rebuilt for the next test)."""


# ---------------------------------------------------------------------------
# The base class
# ---------------------------------------------------------------------------


class Fault:
    """Base of every fault plugin: declared parameters, optional failpoints, run, heal.

    Subclasses set ``name``, ``description`` and ``params`` and override what they need.
    Parameter values are attributes of the instance (``self.hold_ms``).
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    params: ClassVar[tuple[Param, ...]] = ()

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
        from chaos.workload import failpoints as worker_failpoints

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
        parts = [f"{p.name}={_fmt(self.values[p.name])}" for p in self.params if self.values[p.name] != p.default]
        return self.name + (":" + ",".join(parts) if parts else "")

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


# ---------------------------------------------------------------------------
# Helpers shared by fault modules
# ---------------------------------------------------------------------------


def pick_worker(ctx: FaultContext, role: str, target: str = "") -> WorkerHandle:
    """The worker a fault acts on: by name if ``target`` is set, else one drawn from ctx.rng."""
    workers = [w for w in ctx.workers(role) if w.alive()]
    if target:
        named = [w for w in workers if w.name == target]
        if not named:
            raise FaultError(f"no live {role} worker named {target!r}; live: {[w.name for w in workers]}")
        return named[0]
    if not workers:
        raise FaultError(f"no live {role} worker to act on")
    return workers[ctx.rng.randrange(len(workers))]


def proxy_for(ctx: FaultContext, link: str, target: str = "") -> list[str]:
    """Proxy names for a link: a shared link (``redis``, ``replication``...) when target is
    empty or ``shared``; the link of one worker process (by name or role) otherwise."""
    cluster = ctx.cluster
    if not target or target == "shared":
        if link not in cluster.links:
            raise FaultError(f"the topology has no shared link {link!r}; it has {sorted(cluster.links)}")
        return [cluster.links[link]]
    names: list[str] = []
    try:
        handles = list(ctx.workers(target))
    except Exception:  # noqa: BLE001 - an unknown role: treat target as a process name
        handles = []
    procs = [w.name for w in handles] or [target]
    for proc in procs:
        links = cluster.worker_links(proc)
        if link not in links.proxies:
            raise FaultError(f"worker {proc!r} has no {link!r} link; it has {sorted(links.proxies)}")
        names.append(links.proxies[link])
    return names


def check_link_target(fault: str, link: str, target: str) -> None:
    """A worker has its own redis, replica and postgres links; replication is the replica's."""
    if link == "replication" and target and target != "shared":
        raise BadArguments(f"fault {fault!r}: workers have no replication link (it is the replica's "
                           f"link to the primary); drop target={target} or pick link=redis|replica|postgres")


def workload_streams(redis: Any, exclude: tuple[str, ...] = ("dlq",)) -> list[str]:
    """Every stream key on the server except DLQ streams."""
    return sorted(k for k in redis.scan_iter(_type="stream") if not any(part in k for part in exclude))


def wait_for_entries(ctx: FaultContext, count: int, timeout_s: float, fault: str) -> float:
    """Block until the workload's streams hold ``count`` entries; return the seconds waited.
    Anchors a fault to the workload's progress instead of the clock (a loaded machine
    starts its producers late)."""
    started = time.monotonic()
    redis = ctx.cluster.direct_redis("primary")
    while True:
        if sum(redis.xlen(s) for s in workload_streams(redis)) >= count:
            return time.monotonic() - started
        if time.monotonic() - started > timeout_s:
            raise FaultError(f"fault {fault!r}: the workload's streams never reached {count} entries "
                             f"in {timeout_s:.0f} s; lower after_entries")
        time.sleep(0.002)


def signal_number(name: str) -> int:
    """``KILL`` / ``SIGKILL`` / ``9`` -> 9."""
    text = str(name).upper()
    if text.isdigit():
        return int(text)
    return int(getattr(signal, text if text.startswith("SIG") else "SIG" + text))


LINKS = ("redis", "replica", "postgres", "replication")
SIGNALS = ("KILL", "TERM", "INT", "STOP", "CONT", "QUIT")


class ToxicSet:
    """Toxics a fault added, so heal removes exactly those (and re-enables what it disabled)."""

    def __init__(self, api: Any) -> None:
        self.api = api
        self.toxics: list[tuple[str, str]] = []
        self.disabled: list[str] = []
        self.lock = threading.Lock()

    def add(self, proxy: str, type: str, *, stream: str = "downstream", name: str | None = None,
            toxicity: float = 1.0, **attributes: Any) -> str:
        name = name or f"chaos-{type}-{stream}"
        self.api.add_toxic(proxy, type, stream=stream, name=name, toxicity=toxicity, **attributes)
        with self.lock:
            self.toxics.append((proxy, name))
        return name

    def disable(self, proxy: str) -> None:
        self.api.update_proxy(proxy, enabled=False)
        with self.lock:
            self.disabled.append(proxy)

    def remove_all(self) -> list[str]:
        """Remove every toxic and re-enable every proxy; return the errors (empty = healed)."""
        errors: list[str] = []
        with self.lock:
            toxics, self.toxics = self.toxics, []
            disabled, self.disabled = self.disabled, []
        for proxy, name in toxics:
            try:
                self.api.remove_toxic(proxy, name)
            except Exception as exc:  # noqa: BLE001 - report, keep healing the rest
                if getattr(exc, "status", None) != 404:
                    errors.append(f"remove toxic {name} on {proxy}: {exc}")
        for proxy in disabled:
            try:
                self.api.update_proxy(proxy, enabled=True)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"re-enable proxy {proxy}: {exc}")
        return errors


def raise_if(errors: Iterable[str], fault: str) -> None:
    """Make heal failures loud: the test errors and the cluster gets rebuilt."""
    errors = list(errors)
    if errors:
        raise FaultError(f"fault {fault!r} did not heal: " + "; ".join(errors))


def process_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


__all__ = [
    "Fault", "FaultContext", "FaultError", "Param", "Plan", "ToxicSet", "WorkerHandle",
    "parse_spec", "pick_worker", "proxy_for", "raise_if", "signal_number", "wait_until",
    "process_alive", "SIGNALS", "LINKS", "WindowFault", "workload_streams", "wait_for_entries",
]


# ---------------------------------------------------------------------------
# A fault that acts for a window of time (toxics, signals)
# ---------------------------------------------------------------------------

WINDOW_PARAMS = (
    Param("at_ms", 0, "when the fault starts, from the start of the workload"),
    Param("duration_ms", 1000, "how long it lasts before it heals by itself"),
)


class WindowFault(Fault):
    """A fault that starts at ``at_ms`` and heals after ``duration_ms``.

    Subclasses implement ``start`` (and ``stop`` if removing toxics is not enough);
    toxics added through ``self.toxics`` are removed at the end and in ``heal``.
    A fault with ``at_ms=0`` starts in ``arm``, so it is in place before the first op.
    """

    at_ms: int
    duration_ms: int

    def start(self, ctx: FaultContext) -> dict[str, Any]:
        """Inflict the fault; return what to record in the history."""
        raise NotImplementedError

    def stop(self, ctx: FaultContext) -> list[str]:
        """Undo ``start``; return errors (empty = healed)."""
        return self.toxics.remove_all()

    def arm(self, ctx: FaultContext) -> None:
        self.armed_for = id(ctx)
        self.toxics = ToxicSet(getattr(ctx.cluster, "api", None))
        self.started = self.stopped = False
        if self.starts_at_arm():
            self._start(ctx)

    def starts_at_arm(self) -> bool:
        """Whether the fault is in place before the workload's first op."""
        return self.at_ms == 0

    def _start(self, ctx: FaultContext) -> None:
        self.started_at = time.monotonic()
        info = self.start(ctx)
        self.started = True
        ctx.record("start", name=self.name, spec=self.spec, **(info or {}))

    def run(self, ctx: FaultContext) -> None:
        if getattr(self, "armed_for", None) != id(ctx):  # an orchestrator that does not arm
            self.arm(ctx)
        if not self.started:
            ctx.sleep(self.at_ms)
            self._start(ctx)
        left_s = ctx.scale(self.duration_ms) - (time.monotonic() - self.started_at)
        if left_s > 0:
            time.sleep(left_s)
        self._stop(ctx)

    def _stop(self, ctx: FaultContext) -> None:
        if self.started and not self.stopped:
            self.stopped = True
            errors = self.stop(ctx)
            ctx.record("stop", name=self.name, healed=not errors, errors=errors)
            raise_if(errors, self.name)

    def heal(self, ctx: FaultContext) -> None:
        if getattr(self, "armed_for", None) == id(ctx):
            self._stop(ctx)
            raise_if(self.toxics.remove_all(), self.name)
