"""Open registries: faults, guards, presets (and producers, deliveries) from outside the checkout.

Two ways in, one record each (`Extension`: a kind, a name and a `module:attribute` target):

* an installed package declares entry points in the group `redis_streams_chaos.<kind>`
  (`redis_streams_chaos.guards`, `.faults`, `.presets`, `.producers`, `.deliveries`), e.g. in
  its pyproject.toml: `[project.entry-points."redis_streams_chaos.guards"]` then
  `my-guard = "my_team.guards:MyGuard"`;
* code calls `register(kind, name, target)` (a class or a `module:attribute` string): a
  conftest, a test, `python -m chaos mutants`, or a module named in `$CHAOS_PLUGINS`
  (comma-separated modules the command line and the pytest plugin import at start).

`roles` are worker roles (chaos/workload/worker.py ROLES: name -> `main(env)`), for a part
whose processes run code of their own. Each registry (GUARDS, FAULTS, PRESETS, PRODUCERS,
DELIVERIES, ROLES) calls `attach(kind, registry)`
when it is built: its kind's entry points and the records registered so far go into it, and
later registrations go straight in. Worker processes get the records of the process that
starts them (the fork server's request carries `records()`; `replay` there), so a guard
registered only in a test runs in the consumers; entry points they load themselves.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib.metadata import EntryPoints, entry_points
from typing import Any, MutableMapping

from chaos.errors import BadArguments

GROUP_PREFIX = "redis_streams_chaos"   # the distribution's name: redis-streams-chaos
KINDS = ("faults", "guards", "presets", "producers", "deliveries", "roles")
PLUGINS_ENV = "CHAOS_PLUGINS"
# kinds whose registry holds `module:attribute` strings (imported on use), not objects
_BY_TARGET = frozenset({"faults"})


@dataclass(frozen=True)
class Extension:
    """One registration: `name` in the `kind` registry is `target` (`module:attribute`);
    `file` is the module's source, for a module not importable by name elsewhere (a test)."""

    kind: str
    name: str
    target: str
    file: str | None = None

    def load(self) -> Any:
        module_name, _, attr = self.target.partition(":")
        return _attribute(_module(module_name, self.file), attr)


_registries: dict[str, MutableMapping[str, Any]] = {}
_records: dict[tuple[str, str], Extension] = {}


@lru_cache(maxsize=1)
def _entry_points() -> EntryPoints:
    """Every installed entry point, read once per process (one scan costs ~100 ms on a loaded
    machine; a scan per kind cost six times that at every start)."""
    return entry_points()


def _module(name: str, file: str | None) -> Any:
    if name in sys.modules:
        return sys.modules[name]
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError:
        if not file:
            raise
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"extension module {name} cannot be loaded from {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _attribute(module: Any, path: str) -> Any:
    obj = module
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise BadArguments(f"unknown extension kind {kind!r}; kinds are: {', '.join(KINDS)}")


def _as_record(kind: str, name: str, target: Any) -> Extension:
    if isinstance(target, str):
        module = target.partition(":")[0]
        loaded = sys.modules.get(module)
        return Extension(kind, name, target, getattr(loaded, "__file__", None))
    module = sys.modules.get(target.__module__)
    return Extension(kind, name, f"{target.__module__}:{target.__qualname__}", getattr(module, "__file__", None))


def _put(record: Extension, value: Any = None) -> None:
    registry = _registries.get(record.kind)
    if registry is None:
        return
    if record.kind in _BY_TARGET:
        registry[record.name] = record.target
    else:
        registry[record.name] = record.load() if value is None else value


def register(kind: str, name: str, target: Any) -> Extension:
    """Add `name` to the `kind` registry (here and in the worker processes started from now on)."""
    _check_kind(kind)
    record = _as_record(kind, name, target)
    _records[kind, name] = record
    _put(record, None if isinstance(target, str) else target)
    return record


def unregister(kind: str, name: str) -> None:
    """Take a registration back (a test's cleanup)."""
    if _records.pop((kind, name), None) is not None:
        registry = _registries.get(kind)
        if registry is not None:
            registry.pop(name, None)


def records() -> list[dict[str, Any]]:
    """The registrations made in this process, as the fork server's request carries them."""
    return [asdict(r) for r in _records.values()]


def replay(items: list[dict[str, Any]]) -> None:
    """In a worker process: make the registrations of the process that started it."""
    for item in items or ():
        record = Extension(**item)
        _records[record.kind, record.name] = record
        _put(record)


def attach(kind: str, registry: MutableMapping[str, Any]) -> None:
    """Called by a registry as it is built: fill it from entry points and registrations; a
    name that is already built in is refused (one thing per name)."""
    _check_kind(kind)
    _registries[kind] = registry
    for ep in _entry_points().select(group=f"{GROUP_PREFIX}.{kind}"):
        if ep.name in registry:
            raise BadArguments(f"entry point {ep.name} = {ep.value} (group {ep.group}) reuses a built-in "
                               f"{kind[:-1]} name; rename it in its package")
        registry[ep.name] = ep.value if kind in _BY_TARGET else ep.load()
    for record in [r for r in _records.values() if r.kind == kind]:
        _put(record)


def load_plugins(value: str | None = None) -> list[str]:
    """Import the modules named in `$CHAOS_PLUGINS` (comma-separated; they call `register`)."""
    text = os.environ.get(PLUGINS_ENV, "") if value is None else value
    names = [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            raise BadArguments(f"${PLUGINS_ENV} names {name!r}, which cannot be imported ({exc}); "
                               "fix the name or put its directory on PYTHONPATH") from None
    return names
