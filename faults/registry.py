"""The fault registry: one line per fault, name -> "module:Class" (imported on use); a team's
own faults come in through entry points (`redis_streams_chaos.faults`) or
`chaos.extensions.register("faults", name, cls)`."""
from __future__ import annotations

import importlib

from chaos import extensions
from chaos.errors import BadArguments
from chaos.cellspec import Spec
from chaos.params import parse_spec
from faults.interface import Fault

FAULTS: dict[str, str] = {
    "none": "faults.none:NoFault",
    "kill-consumer": "faults.kill_consumer:KillConsumer",
    "publish-blip": "faults.publish_blip:PublishBlip",
    "promote-replica": "faults.promote_replica:PromoteReplica",
    "xautoclaim": "faults.xautoclaim:XAutoClaim",
    "latency": "faults.latency:Latency",
    "partition": "faults.partition:Partition",
    "pause": "faults.pause:Pause",
    "pg-reset": "faults.pg_reset:PgReset",
    "sigterm": "faults.sigterm:SigTerm",
    "redis-restart": "faults.redis_restart:RedisRestart",
    "maxlen-trim": "faults.maxlen_trim:MaxlenTrim",
    "poison": "faults.poison:Poison",
    "kill-dispatcher": "faults.kill_dispatcher:KillDispatcher",
    "nemesis": "faults.nemesis:Nemesis",
    "maxmemory": "faults.maxmemory:MaxMemory",
    "replica-overflow": "faults.replica_overflow:ReplicaOverflow",
    "sentinel-failover": "faults.sentinel_failover:SentinelFailover",
    "group-loss": "faults.group_loss:GroupLoss",
    "delete-consumer": "faults.delete_consumer:DeleteConsumer",
    "long-job": "faults.long_job:LongJob",
    "hold": "faults.hold:Hold",
}
extensions.attach("faults", FAULTS)


def fault_class(name: str) -> type[Fault]:
    """The class registered under ``name``; an unknown name lists the valid ones."""
    if name not in FAULTS:
        raise BadArguments(f"unknown fault {name!r}; valid faults: {', '.join(FAULTS)}")
    module, _, cls = FAULTS[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def get_fault(spec: str) -> Fault:
    """``"promote-replica:hold_ms=300"`` -> a validated fault instance (BadArguments if not)."""
    name, params = parse_spec(spec, "fault spec")
    return fault_class(name)(**params)


def make_fault(spec: Spec | Fault) -> Fault:
    """The one factory: a new fault instance from a parsed spec (chaos.cellspec.Spec), or a fresh
    copy of a given instance (a class registered nowhere, built by a test)."""
    if isinstance(spec, Fault):
        return type(spec)(**spec.given)
    return fault_class(spec.name)(**spec.values)


def fault_names() -> list[str]:
    return list(FAULTS)


def describe_fault(name: str) -> str:
    return fault_class(name).describe()
