"""The scorecard: a consumer run through every planned fault, each cell graded.

Each run of a cell goes through the black-box runner's public function
(``chaos.blackbox.session.run_blackbox``, one run at a time with seed ``seed + i``, as
``chaos run --runs N --seed S`` does) while a sampler watches Redis. A cell that cannot
run (the rig broke, an error in the framework) is graded ``unknown`` with the reason and
the scorecard goes on with the next fault.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from chaos.blackbox import expect as expectations
from chaos.blackbox.config import WorkerConfig
from chaos.blackbox.session import BlackBoxRuns, run_blackbox
from chaos.errors import BadArguments
from chaos.replay import blackbox_command
from chaos.scorecard.grade import (PASS, FAIL, UNKNOWN, Grade, behaves_like, crash_reason, died, end_lag, grade,
                                   promised, stalled_s)
from chaos.scorecard.plan import PlannedCell
from chaos.scorecard.sample import Sample, Sampler

SCHEMA_VERSION = 1
COUNTS = ("published", "lost", "duplicated", "reordered", "wrong_final_state_runs", "wrong_keys", "pending_left",
          "undelivered", "dlq", "dropped", "indeterminate")


@dataclass
class ScoreCell:
    """One fault's cell: the runs, what Redis looked like during them, the grades."""

    planned: PlannedCell
    cell: BlackBoxRuns | None
    samples: list[list[Sample]]           # per run
    grades: dict[str, Grade]
    reproduce: str
    wall_s: float
    like: str = ""
    mismatches: list[str] = field(default_factory=list)   # the config's [expect] bounds this cell breaks
    error: str = ""                                       # the cell could not run: why

    @property
    def fault(self) -> str:
        return self.planned.spec

    def counts(self) -> dict[str, Any]:
        if self.cell is None:
            return {}
        out = {name: self.cell.count(name) for name in COUNTS}
        out.update(self.cell.extra.as_dict())
        out["stalled_after_heal_s"] = stalled_s(self.cell)
        out["runs"] = len(self.cell.runs)
        out["verdict"] = self.cell.cell.verdict
        return out

    def to_json(self) -> dict[str, Any]:
        return {"fault": self.fault, "properties": {k: g.status for k, g in self.grades.items()},
                "evidence": {k: g.as_dict() for k, g in self.grades.items()}, "counts": self.counts(),
                "behaves_like": self.like, "mismatches": list(self.mismatches), "error": self.error or None,
                "wall_s": round(self.wall_s, 3), "reproduce": self.reproduce}


@dataclass
class Scorecard:
    """Every cell of one consumer's scorecard."""

    command: str
    config_path: str
    config: WorkerConfig
    topology: str
    runs: int
    seed: int
    cells: list[ScoreCell] = field(default_factory=list)
    skipped: list[PlannedCell] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def promised(self) -> list[str]:
        return promised(self.config.expect)

    def exit_code(self) -> int:
        """0: every [expect] bound holds in every cell; 1: one breaks; 2: one cannot be judged."""
        if any(c.mismatches for c in self.cells):
            return 1
        if self.promised and any(c.grades[p].status == UNKNOWN for c in self.cells for p in self.promised):
            return 2
        return 0

    def to_json(self) -> dict[str, Any]:
        tally = {p: {s: sum(1 for c in self.cells if c.grades[p].status == s) for s in (PASS, FAIL, UNKNOWN)}
                 for p in (self.cells[0].grades if self.cells else {})}
        return {
            "schema_version": SCHEMA_VERSION,
            "consumer": {"worker_cmd": self.command, "worker_config": self.config_path,
                         "processes": self.config.worker.processes, "encoder": self.config.encoder.format,
                         "expect": {k: f"{op} {n:g}" for k, (op, n) in self.config.expect.items()},
                         "promised": self.promised},
            "topology": self.topology, "runs": self.runs, "seed": self.seed,
            "cells": [c.to_json() for c in self.cells],
            "skipped": [{"fault": p.fault, "why": p.skipped} for p in self.skipped],
            "summary": {"cells": len(self.cells), "properties": tally,
                        "broken_promises": [f"{c.fault}: {m}" for c in self.cells for m in c.mismatches],
                        "exit_code": self.exit_code(), "wall_s": round(self.wall_s, 3)},
        }


def reproduce(command: str, config_path: str, planned: PlannedCell, runs: int, seed: int, time_scale: float,
              cluster: Any = None) -> str:
    """The `chaos run` line that replays one cell (backend, topology and server: the cluster's it ran on)."""
    return blackbox_command(command, config_path, [f.text for f in planned.faults], runs, seed, time_scale,
                            getattr(cluster, "backend", None), topology=getattr(cluster, "topology_text", None),
                            server=getattr(cluster, "server", None))


def run_cell(cluster: Any, command: str, config: WorkerConfig, config_path: str, planned: PlannedCell, *,
             runs: int, seed: int, time_scale: float, run_root: Path, fresh: bool = False,
             log: Callable[[str], None] | None = None, cwd: Path | None = None,
             interval_s: float = 0.1) -> ScoreCell:
    """``runs`` runs of one fault, sampled and graded."""
    say = log or (lambda _line: None)
    faults = tuple(planned.faults)     # parsed by the plan (the edge)
    started = time.monotonic()
    cell: BlackBoxRuns | None = None
    samples: list[list[Sample]] = []
    error = ""
    for n in range(runs):
        sampler = Sampler(cluster, config.worker.stream, config.worker.group, interval_s).start()
        try:
            one = run_blackbox(cluster, command, config, faults=faults, runs=1, seed=seed + n,
                               time_scale=time_scale, run_root=run_root, log=say, reset=not (fresh and n == 0),
                               cwd=cwd)
        except BadArguments:
            raise
        except Exception as exc:  # noqa: BLE001 - the framework could not run this cell: unknown, go on
            error = f"{type(exc).__name__}: {exc}"
            say(f"{planned.spec}: the cell could not run: {error}")
            break
        finally:
            samples.append(sampler.stop())
        for r in one.runs:
            r.result.run = n
        if cell is None:
            cell = one
        else:
            cell.runs.extend(one.runs)
        if one.cell.rig_failures or crash_reason(one):
            break           # a broken rig or a consumer that cannot start: further runs say nothing new
    return finish(cell, planned, samples, reproduce(command, config_path, planned, runs, seed, time_scale, cluster),
                  time.monotonic() - started, error)


def finish(cell: BlackBoxRuns | None, planned: PlannedCell, samples: list[list[Sample]], replay: str,
           wall_s: float, error: str = "") -> ScoreCell:
    """Grade a cell's runs (``cell`` None: it could not run, every property unknown)."""
    if cell is None or not cell.runs:
        why = error or "no run finished"
        grades = {p: Grade(UNKNOWN, f"the cell could not run: {why}") for p in
                  ("no_loss", "no_duplicate_side_effects", "final_state", "keeps_consuming", "pel_drains",
                   "poison_handled")}
        return ScoreCell(planned, cell, samples, grades, replay, wall_s, "not judged: the cell could not run",
                         error=why)
    worst = max(samples, key=lambda run: end_lag(run) or 0) if samples else None   # the run left furthest behind
    grades = grade(cell, worst)
    bounds = cell.config.expect
    if crash_reason(cell):
        broken = [f"{p}: the consumer crashed on start" for p in promised(bounds)]
    elif cell.cell.verdict == "unknown" and not died(cell):
        broken = []
    else:
        broken = expectations.check(bounds, cell.cell, cell.extra)
    if died(cell) and "keeps_consuming" in promised(bounds) and grades["keeps_consuming"].status == FAIL:
        broken.append("keeps_consuming: the consumer died during the run and left events unconsumed")
    return ScoreCell(planned, cell, samples, grades, replay, wall_s, behaves_like(grades, cell, planned.fault),
                     broken, error)


def run_scorecard(cluster: Any, command: str, config: WorkerConfig, config_path: str, cells: list[PlannedCell], *,
                  runs: int = 1, seed: int = 0, time_scale: float = 1.0, topology: str = "replica",
                  run_root: Path, log: Callable[[str], None] | None = None, cwd: Path | None = None,
                  fresh: bool = True, on_cell: Callable[[ScoreCell], None] | None = None,
                  restart: Callable[[Any], Any] | None = None) -> Scorecard:
    """Run every planned cell (the skipped ones are listed, not run) on ``cluster``.

    ``restart(cluster) -> cluster``: after a cell whose rig broke, a fresh topology for the
    next cells (without it they run on the broken one and are likely unknown too)."""
    say = log or (lambda _line: None)
    card = Scorecard(command, config_path, config, topology, runs, seed,
                     skipped=[c for c in cells if c.skipped])
    started = time.monotonic()
    todo = [c for c in cells if not c.skipped]
    first = 0           # the cell that gets the topology as it was handed over (no reset needed)
    for i, planned in enumerate(todo):
        say(f"[{i + 1}/{len(todo)}] {planned.spec}")
        cell_root = run_root / f"{i:02d}-{planned.fault}"
        cell_root.mkdir(parents=True, exist_ok=True)
        scored = run_cell(cluster, command, config, config_path, planned, runs=runs, seed=seed,
                          time_scale=time_scale, run_root=cell_root, fresh=fresh and i == first, log=say, cwd=cwd)
        card.cells.append(scored)
        say(f"[{i + 1}/{len(todo)}] {planned.spec}: " + ", ".join(f"{k} {g.status}" for k, g in scored.grades.items())
            + f" ({scored.wall_s:.1f} s)")
        broke = scored.error or (scored.cell is not None and scored.cell.cell.rig_failures)
        if broke and restart is not None and i + 1 < len(todo):
            say(f"{planned.spec}: the rig broke; a fresh topology for the next cells")
            cluster = restart(cluster)
            fresh, first = True, i + 1
        if on_cell is not None:
            on_cell(scored)
    card.wall_s = time.monotonic() - started
    return card
