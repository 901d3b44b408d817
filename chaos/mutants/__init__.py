"""Mutants: deliberately broken variants of the guards, ack policy, relay, producer and
delivery, to prove that the expectation rows catch a broken strategy (docs/mutants.md).

Each `Mutant` replaces one built-in part by a broken copy (chaos/mutants/guards.py,
chaos/mutants/parts.py), registered through the open registries (chaos/extensions.py) the
way a team's own guard is, so the worker processes run it. It is run against the rows of
the part it breaks (chaos/mutants/runner.py) and *killed* when a cell leaves its row.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chaos import extensions
from chaos.mutants import guards, parts

KIND_OF_SLOT = {"guard": "guards", "producer": "producers", "delivery": "deliveries"}


@dataclass(frozen=True)
class Mutant:
    """One defect: in `slot`, each built-in part named in `replaces` gives way to its broken copy."""

    name: str
    mutates: str                        # what it breaks, as a reader names it
    slot: str                           # guard | producer | delivery
    replaces: dict[str, type]           # built-in part name -> the broken class
    what: str                           # the defect in one line
    only_after_ack: bool = False        # rows whose ack policy is `after` only
    first: tuple[str, ...] = ()         # fault names (or preset specs) whose rows go first: the likeliest killers
    roles: dict[str, Any] = field(default_factory=dict)   # worker roles the broken part's plans name

    def register(self) -> None:
        for cls in self.replaces.values():
            extensions.register(KIND_OF_SLOT[self.slot], cls.name, cls)
        for role, main in self.roles.items():
            extensions.register("roles", role, main)

    def unregister(self) -> None:
        for cls in self.replaces.values():
            extensions.unregister(KIND_OF_SLOT[self.slot], cls.name)
        for role in self.roles:
            extensions.unregister("roles", role)


MUTANTS: list[Mutant] = [
    Mutant("cas-without-version", "guard cas (S5, P2)", "guard", {"cas": guards.CasWithoutVersion},
           "the compare-and-set UPDATE without its `version < $v` predicate"),
    Mutant("inbox-without-check", "guard inbox", "guard", {"inbox": guards.InboxWithoutCheck},
           "the inbox row is recorded, but the effect is written whether it was new or not"),
    Mutant("ack-before-write", "ack policy after", "guard", {"plain": guards.AckBeforeWrite},
           "ack after, written wrongly: XACK before the job and its effect write",
           only_after_ack=True, first=("kill-consumer",)),
    Mutant("dedupe-marker-after-effect", "guard setnx-dedupe", "guard",
           {"setnx-dedupe": guards.DedupeMarkerAfterEffect},
           "the SET NX dedupe marker is set after the effect instead of before it"),
    Mutant("outbox-marks-before-xadd", "outbox relay (per-key)", "producer",
           {"outbox-per-key": parts.OutboxMarksBeforeXadd},
           "the relay marks a row published before its XADD: a failed XADD is never retried",
           roles={parts.RELAY_ROLE: parts.relay_main}),
    Mutant("reorder-releases-early", "guard reorder-buffer (P3)", "guard",
           {"reorder-buffer": guards.ReorderReleasesEarly},
           "an event ahead of the next version is applied instead of parked"),
    Mutant("lock-without-owner-check", "guard lock (S4)", "guard", {"lock": guards.LockWithoutOwnerCheck},
           "the lock is released with a plain DEL, deleting whoever holds it now",
           first=("s4c:paid_ms=600",)),
    Mutant("retrying-never-retries", "producer retrying", "producer", {"retrying": parts.RetryingNeverRetries},
           "the retrying producer's schedule is empty: a failed publish is never retried",
           first=("publish-blip",)),
    Mutant("consumer-never-claims", "delivery group/single (claiming)", "delivery",
           {"group": parts.GroupNeverClaims, "single": parts.SingleNeverClaims},
           "consumers never run XAUTOCLAIM: a stalled or dead consumer's entries stay pending",
           first=("xautoclaim", "poison", "kill-consumer")),
    Mutant("sharded-random-shard", "delivery sharded (S2)", "delivery", {"sharded": parts.ShardedByRandomShard},
           "S2 routes each event to a random shard instead of crc32(key) % n"),
]


def mutant(name: str) -> Mutant:
    for m in MUTANTS:
        if m.name == name:
            return m
    from chaos.errors import BadArguments
    raise BadArguments(f"unknown mutant {name!r}; mutants are: {', '.join(m.name for m in MUTANTS)}")
