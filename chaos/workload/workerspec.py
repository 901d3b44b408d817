"""`WorkerSpec`: the one contract across the fork-server boundary.

The orchestrator (chaos/orchestrator/workers.py) and the black-box runner build one per
worker process; the fork server carries its JSON form (`to_json`, one flat object: the
common fields beside the role's own keys) to the child, which reads it back with
`from_json` (chaos/workload/worker.py) and hands it to its WorkerEnv. The common fields
are typed here; `role_spec` holds the role's own keys (ProcessPlan.spec: streams, group,
guard, ack, events, ...), which only that role reads.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any


@dataclass(frozen=True)
class HelperLinks:
    """A helper process's own links (a fan-out reader's worker W1..: its proxy and failpoints)."""

    redis_url: str = ""
    pg_dsn: str = ""
    failpoints: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class WorkerSpec:
    """What one worker process is given (see the module doc)."""

    name: str                      # history process name ("C1", "P-order", "W1")
    role: str                      # key of chaos.workload.worker.ROLES
    run_dir: str
    redis_url: str = ""
    pg_dsn: str = ""
    sentinels: tuple[str, ...] = ()
    master_name: str = ""
    time_scale: float = 1.0
    seed: int = 0
    t0: float | None = None        # the run's common start (None: when the process starts)
    gate: bool = False             # wait for the orchestrator's SIGUSR2 before starting
    draining: bool = False         # start in the drain (as after SIGUSR1)
    failpoints: Mapping[str, Any] = field(default_factory=dict)
    worker_links: Mapping[str, HelperLinks] = field(default_factory=dict)
    role_spec: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        clash = sorted(set(self.role_spec) & _COMMON)
        if clash:
            raise ValueError(f"worker {self.name}: role keys {clash} clash with WorkerSpec's own fields; "
                             "rename them in the part's ProcessPlan.spec")

    def to_json(self) -> dict[str, Any]:
        """The wire form: one flat JSON object (what `from_json` reads back)."""
        out: dict[str, Any] = dict(self.role_spec)
        for f in fields(self):
            if f.name == "role_spec":
                continue
            value = getattr(self, f.name)
            if f.name == "worker_links":
                if not value:
                    continue
                value = {n: {"redis_url": hl.redis_url, "pg_dsn": hl.pg_dsn, "failpoints": dict(hl.failpoints)}
                         for n, hl in value.items()}
            elif f.name == "t0" and value is None:
                continue
            elif f.name == "sentinels":
                value = list(value)
            elif f.name == "failpoints":
                value = dict(value)
            out[f.name] = value
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WorkerSpec:
        """A WorkerSpec from its wire form; a missing name, role or run_dir is named."""
        missing = [k for k in ("name", "role", "run_dir") if not data.get(k)]
        if missing:
            raise ValueError(f"worker spec lacks {', '.join(missing)} (keys given: {', '.join(sorted(data))})")
        given = {k: data[k] for k in _COMMON if k in data}
        if "sentinels" in given:
            given["sentinels"] = tuple(given["sentinels"] or ())
        if "worker_links" in given:
            given["worker_links"] = {n: HelperLinks(**hl) for n, hl in (given["worker_links"] or {}).items()}
        for key, kind in (("time_scale", float), ("seed", int)):
            if key in given:
                given[key] = kind(given[key])
        return cls(**given, role_spec={k: v for k, v in data.items() if k not in _COMMON})

    @classmethod
    def of(cls, spec: WorkerSpec | Mapping[str, Any]) -> WorkerSpec:
        return spec if isinstance(spec, WorkerSpec) else cls.from_json(spec)

    def helper(self, name: str) -> WorkerSpec:
        """The spec of helper process `name` (its own name, links and failpoints; the role's keys kept)."""
        links = self.worker_links[name]
        return replace(self, name=name, redis_url=links.redis_url, pg_dsn=links.pg_dsn,
                       failpoints=links.failpoints, worker_links={})


_COMMON = frozenset(f.name for f in fields(WorkerSpec)) - {"role_spec"}
