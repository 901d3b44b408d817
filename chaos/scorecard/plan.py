"""Which faults a scorecard runs, and with what parameters.

The catalogue is the fault registry (faults/registry.py), not a list of its own: every
registered fault that fits the topology and can act on a black-box worker (from outside:
no failpoints, no dispatcher) is in it. ``CELLS`` is the one table of scorecard defaults:
the parameters each fault runs with (one fault may give several cells, e.g. latency on
the Redis link and on the PostgreSQL link) and the topology it needs. A fault the table
does not name runs with its own defaults (or ``at=time``, for a fault that otherwise waits
at a failpoint) on every topology.
"""
from __future__ import annotations

from dataclasses import dataclass

from chaos.blackbox.config import WorkerConfig
from chaos.blackbox.session import load_faults
from chaos.cellspec import NO_FAULT, Spec, split_specs
from chaos.errors import BadArguments

TOPOLOGIES = ("replica", "sentinel")


@dataclass(frozen=True)
class CellDefault:
    """A fault's scorecard cells and the topology they need ("any", "replica" or "sentinel")."""

    specs: tuple[str, ...]
    topology: str = "any"
    skip: str = ""      # non-empty: never run on a black-box worker, and why
    needs_poison: bool = False   # runs only where the config declares a [poison] payload


# The failover's hold goes on halfway through the burst on the producer's progress, not at a time:
# the framework producer stops at its before_publish failpoint after 100 publishes, the hold goes
# on, it resumes and publishes the rest into it. The kill then waits, the link still held, until
# the failover would take back both an entry a consumer read in the hold (handed out again: what
# the consumer does with a copy) and an acked entry nobody read (lost, the server's): `until`,
# read on both servers, at most 3 s; a run whose hold never saw both is unknown, not a pass. (The
# timed `at_ms=200,hold_ms=300` missed the burst on a loaded machine: the black-box failover test
# failed 2 of 3 loaded runs that way, "the failover left no trace".)
FAILOVER = "promote-replica:at=before_publish,after_entries=100,hold_ms=300,until=reread/unread,until_ms=3000"
# Sentinel's failover the same way: the primary is cut (or killed) while the producer waits at its
# failpoint after 100 publishes; the rest is published through the failover (was at_ms=200).
SENTINEL_FAILOVER = "sentinel-failover:at=before_publish,after_entries=100"
# Times count from the first publish; the examples' 200-event burst is worked off in about
# 1 s, so a fault at 200-500 ms meets a backlog. One row per fault, parameters only where
# the fault's own default would miss a black-box worker. The kill waits for a consumer that
# holds entries it read (at=holding), not for a time: a timed kill can land between a batch's
# last write and the next read, and an ack-first consumer then passes no_loss by luck.
CELLS: dict[str, CellDefault] = {
    "none": CellDefault(("none",)),
    "kill-consumer": CellDefault(("kill-consumer:at=holding",)),
    "sigterm": CellDefault(("sigterm:at_ms=500",)),
    "pause": CellDefault(("pause:at_ms=200,duration_ms=1500",)),
    "xautoclaim": CellDefault(("xautoclaim:at=time,at_ms=200",)),
    "publish-blip": CellDefault(("publish-blip",)),
    "pg-reset": CellDefault(("pg-reset:at=time,at_ms=300",)),
    "latency": CellDefault(("latency:link=redis,target=consumer,at_ms=200,duration_ms=1000",
                            "latency:link=postgres,target=consumer,at_ms=200,duration_ms=1000")),
    "partition": CellDefault(("partition:link=redis,target=consumer,at_ms=200,duration_ms=1000",
                              "partition:link=postgres,target=consumer,at_ms=200,duration_ms=1000")),
    "promote-replica": CellDefault((FAILOVER,), "replica"),
    "replica-overflow": CellDefault(("replica-overflow",), "replica"),
    "sentinel-failover": CellDefault((SENTINEL_FAILOVER, f"{SENTINEL_FAILOVER},mode=kill"), "sentinel"),
    "redis-restart": CellDefault(("redis-restart",)),
    "maxlen-trim": CellDefault(("maxlen-trim",)),
    # capped once 100 entries are in, for 300 ms: the producer's retries at 500 and 1000 ms land
    # (its default 2 s cap outlasts every retry: 178-191 of 200 dropped, a run too unknown to judge)
    "maxmemory": CellDefault(("maxmemory:after_entries=100,duration_ms=300",)),
    "nemesis": CellDefault(("nemesis:duration_ms=3000",)),
    "poison": CellDefault(("poison:source=config",), needs_poison=True),
    "kill-dispatcher": CellDefault((), skip="needs an outbox dispatcher; a black-box run has none"),
}


@dataclass(frozen=True)
class PlannedCell:
    """One column of the scorecard: the fault it runs, parsed once here (``none``: no fault),
    or why the fault is left out."""

    run: Spec           # what runs; for a skipped fault, its bare name
    skipped: str = ""   # non-empty: why this fault is not run

    @classmethod
    def left_out(cls, name: str, why: str) -> PlannedCell:
        return cls(Spec(name), why)

    @property
    def fault(self) -> str:
        """The registry name."""
        return self.run.name

    @property
    def spec(self) -> str:
        """What runs, in ``--fault`` syntax."""
        return self.run.text

    @property
    def faults(self) -> list[Spec]:
        """The faults the cell's runs arm: none for ``none``."""
        return [] if self.run.name == NO_FAULT else [self.run]


def topology_name(text: str) -> str:
    """``sentinel:quorum=2`` -> ``sentinel`` (the topology's parameters are the cluster's business)."""
    return Spec.parse(text, "--topology").name


def _workers(config: WorkerConfig | None) -> list[str]:
    processes = config.worker.processes if config is not None else 2
    return [f"C{i}" for i in range(1, processes + 1)]


def _fits(spec: Spec, config: WorkerConfig | None) -> str:
    """'' when the spec can act on this black-box run, else the reason it cannot."""
    try:
        load_faults([spec], _workers(config))
    except BadArguments as exc:
        return str(exc)
    return ""


def _defaults(name: str, config: WorkerConfig | None) -> tuple[tuple[Spec, ...], str]:
    """The specs a fault runs with when CELLS does not name it, and why none fits."""
    bare, at_time = Spec(name), Spec.of(name, {"at": "time"})
    first = _fits(bare, config)
    if not first:
        return (bare,), ""
    if not _fits(at_time, config):
        return (at_time,), ""
    return (), first


def catalogue(topology: str = "replica", config: WorkerConfig | None = None) -> list[PlannedCell]:
    """Every registered fault, with its cells on ``topology`` or the reason it is left out
    (checked against ``config``'s worker count; without one, two workers)."""
    from faults.registry import fault_names

    out: list[PlannedCell] = []
    for name in fault_names():
        row = CELLS.get(name)
        if row is not None and row.skip:
            out.append(PlannedCell.left_out(name, row.skip))
            continue
        if row is not None and row.needs_poison and (config is None or config.poison is None):
            out.append(PlannedCell.left_out(name, "the config declares no [poison] payload (e.g. [poison] "
                                                    "fields = { version = \"not-a-number\" })"))
            continue
        if row is not None and row.topology not in ("any", topology):
            out.append(PlannedCell.left_out(name, f"needs --topology {row.topology}"))
            continue
        if row is None:
            specs, why = _defaults(name, config)
        else:
            specs, why = tuple(Spec.parse(s, "scorecard cell") for s in row.specs), ""
        if not why:
            why = next((w for w in (_fits(s, config) for s in specs) if w), "")
        if why:
            out.append(PlannedCell.left_out(name, why.split(". A black-box worker")[0]))
            continue
        out.extend(PlannedCell(spec) for spec in specs)
    return out


def plan(faults: str, topology: str, config: WorkerConfig) -> list[PlannedCell]:
    """The cells to run for ``--faults`` ("all" or a comma list of names or specs); bad input
    (an unknown fault, one that does not fit the topology or a black-box worker) is refused."""
    if topology not in TOPOLOGIES:
        raise BadArguments(f"--topology {topology!r}: give one of {', '.join(TOPOLOGIES)}")
    whole = catalogue(topology, config)
    if faults.strip() in ("", "all"):
        return whole
    chosen: list[PlannedCell] = []
    for item in split_specs(faults):
        given = Spec.parse(item, "--faults")
        name = given.name
        mine = [c for c in whole if c.fault == name]
        if not mine:
            from faults.registry import fault_class
            fault_class(name)        # an unknown name lists the valid ones
        skipped = next((c.skipped for c in mine if c.skipped), "")
        if skipped:
            raise BadArguments(f"--faults {item}: {name} does not fit this scorecard: {skipped}; "
                               f"leave it out" + (" or add --topology sentinel" if "sentinel" in skipped else
                                                  " or use --topology replica" if "replica" in skipped else ""))
        if given.params:
            why = _fits(given, config)
            if why:
                raise BadArguments(f"--faults {item}: {why}")
            chosen.append(PlannedCell(given))
        else:
            chosen.extend(mine)
    if not chosen:
        raise BadArguments("--faults names no fault: give all or a comma list, e.g. --faults kill-consumer,pause")
    return chosen
