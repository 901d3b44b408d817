"""The cell loop: run one preset x faults cell N times (run i with seed + i), each run
checked on its own, then the runs summed into the cell's CellResult with what the
orchestrator measured around them (phases, metrics, notes), and the run dirs tidied."""
from __future__ import annotations

import os
import random
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from chaos.cellspec import CellSpec, Spec
from chaos.checker import summarize
from chaos.cluster.rundirs import runs_dir
from chaos.errors import BadArguments
from chaos.orchestrator.cellcontext import CellContext
from chaos.orchestrator.phases import plan_workload
from chaos.orchestrator.run import Run
from chaos.orchestrator.sequence import execute
from chaos.results import CellResult, Phase, RunResult
from chaos.strategies.plan import ProcessPlan
from chaos.strategies.presets import Strategy, resolve, steady_producer
from chaos.workload import failpoints as fp


def _validate(time_scale: float, runs: int, failpoints: dict[str, dict], bounds: dict[str, float | None]) -> None:
    for name, value in bounds.items():
        if value is not None and not value > 0:
            raise BadArguments(f"{name} must be > 0 seconds (or None for the default), got {value!r}")
    if not isinstance(runs, int) or runs < 1:
        raise BadArguments(f"runs must be a whole number >= 1, got {runs!r}")
    if not time_scale or time_scale <= 0:
        raise BadArguments(f"time scale must be > 0 (1 = the reference's durations), got {time_scale!r}")
    for target, points in failpoints.items():
        try:
            fp.validate(points)
        except ValueError as exc:
            raise BadArguments(f"failpoints for {target}: {exc}") from None


def fault_label(faults: Sequence[Any]) -> str:
    names = [f if isinstance(f, str) else f.spec for f in faults]
    return "+".join(names) if names else "none"


def cell_spec(preset: str | Strategy | CellSpec, faults: Sequence[Any] = (), runs: int = 1, seed: int = 0,
              time_scale: float = 1.0, parts: Mapping[str, str] | None = None) -> CellSpec:
    """`run_cell`'s arguments as a CellSpec (the Python API's edge: spec strings parsed here, once)."""
    if isinstance(preset, CellSpec):
        return preset.but(runs=runs, seed=seed, time_scale=time_scale)
    fault_specs = tuple(Spec.parse(f, "fault spec") if isinstance(f, str) else Spec.of(f.name, f.given)
                        for f in faults if f)
    if isinstance(preset, Strategy):
        head, replaced = Spec.of(preset.preset, preset.overrides), preset.replaced
    else:
        head, replaced = Spec.parse(preset, "preset"), parts or {}
    part_specs = tuple((slot, Spec.parse(text, f"part {slot}")) for slot, text in replaced.items())
    return CellSpec(head, fault_specs, part_specs, time_scale=time_scale, seed=seed, runs=runs)


def run_cell(cluster: Any, preset: str | Strategy | CellSpec, faults: Sequence[Any] = (), runs: int = 1,
             seed: int = 0, time_scale: float = 1.0, *, parts: dict[str, str] | None = None, **how: Any) -> CellResult:
    """Run `preset` under `faults` `runs` times (run i uses seed + i) and summarize: `run_spec`
    on the CellSpec these arguments make. Fault instances given here are copied for each run
    (so a fault class registered nowhere runs too)."""
    spec = cell_spec(preset, faults, runs, seed, time_scale, parts)
    objects = [f for f in faults if not isinstance(f, str)]
    return run_spec(cluster, spec, strategy=preset if isinstance(preset, Strategy) else None,
                    fault_objects=objects if objects else None, **how)


def run_spec(cluster: Any, spec: CellSpec, *, strategy: Strategy | None = None,
             fault_objects: Sequence[Any] | None = None, failpoints: dict[str, dict] | None = None,
             run_root: Path | None = None, keep_runs: str = "failed", trace: Callable[[str], None] | None = None,
             progress: Callable[[int, int, RunResult], None] | None = None,
             raise_fault_errors: bool = True, workload_bound_s: float | None = None,
             stall_s: float | None = None) -> CellResult:
    """Run the cell `spec` says `spec.runs` times (run i uses spec.seed + i) and summarize.

    `failpoints` adds `{role-or-process: {failpoint: {...}}}` to what the faults arm. `keep_runs`:
    `always`, `never`, or `failed` (keep the dirs of runs that are not valid).
    `workload_bound_s` replaces the workload's first bound (by default from its size) and
    `stall_s` how long without a useful op past it counts as stalled (verdict unknown).
    `strategy`: the spec's preset already resolved by the edge; `fault_objects`: instances
    the faults are copied from (else made from `spec.faults` by faults.registry.make_fault).
    Besides the checker's fields, the result carries `run_root`, `run_dirs`, `metrics`
    (RunMetrics per run), `wall_s`, `fault_errors`, `label`, `phases` (Phase of every run)
    and `notes` (e.g. a fault that fired after the workload ended).
    """
    from faults.registry import make_fault
    runs, seed, time_scale = spec.runs, spec.seed, spec.time_scale
    failpoints = dict(failpoints or {})
    _validate(time_scale, runs, failpoints, {"workload_bound_s": workload_bound_s, "stall_s": stall_s})
    strategy = strategy or resolve(spec.preset, parts=spec.part_texts)
    sources = list(fault_objects) if fault_objects is not None else list(spec.faults)
    made = [make_fault(source) for source in sources]  # BadArguments now, before anything starts
    strategy = cell_strategy(strategy, made)
    root = Path(run_root) if run_root else runs_dir(cluster) / (
        f"{strategy.preset}-{time.strftime('%H%M%S')}-{os.getpid()}-{random.randrange(10**6)}")
    root.mkdir(parents=True, exist_ok=True)
    cell = CellContext(cluster, strategy, sources, time_scale, failpoints, root, trace, workload_bound_s, stall_s,
                       made=made)
    # the first run's workload: the faults' check needs its producer roles (then the run uses it)
    first = plan_workload(strategy, seed) if sources else None
    _check_faults(cell, made, first[1] if first else [])
    started = time.monotonic()
    results, metrics, fault_errors = [], [], []
    phases: list[Phase] = []
    notes: list[str] = []
    try:
        for index in range(runs):
            run = Run(cell, index, seed + index, first if index == 0 else None)
            first = None
            result, m = execute(run)
            results.append(result)
            metrics.append(m)
            phases += run.phases
            notes += run.notes
            fault_errors += [f"run {index}: {e}" for e in run.fault_errors]
            if progress is not None:
                progress(index + 1, runs, result)
            if fault_errors and raise_fault_errors:
                break
            if run.rig_failures:
                break      # the rig is broken: the next runs would stand on it
    finally:
        cell.close()
    summary = replace(summarize(results), run_root=root, run_dirs=[Path(m.run_dir) for m in metrics],
                      metrics=metrics, wall_s=time.monotonic() - started, fault_errors=fault_errors,
                      label=strategy.label(), phases=phases, notes=notes)
    _tidy(summary, keep_runs)
    if fault_errors and raise_fault_errors:
        from faults.interface import FaultError
        raise FaultError("; ".join(fault_errors))
    return summary


def cell_strategy(strategy: Strategy, faults: Sequence[Any]) -> Strategy:
    """The strategy a cell's runs use: with a steady producer (presets.steady_producer) when
    none of its faults acts on the publish path (Fault.touches_publish; no fault: none does)."""
    if any(getattr(fault, "touches_publish", True) for fault in faults):
        return strategy
    return steady_producer(strategy)


def _check_faults(cell: CellContext, faults: list[Any], producer_plans: list[ProcessPlan]) -> None:
    """Each fault's check (the instances made once for the cell: each run makes its own) against
    the roles and failpoints the cell's processes have."""
    if not faults:
        return
    from faults.interface import Plan
    roles = cell.plan_roles(producer_plans)
    points = {role: fp.role_failpoints(role) for role in roles}
    plan = Plan(roles=roles, failpoints=points, strategy=cell.strategy,
                backend=str(getattr(cell.cluster, "backend", "")))
    for fault in faults:
        fault.check(plan)


def _tidy(summary: CellResult, keep_runs: str) -> None:
    if keep_runs == "always":
        return
    for result, path in zip(summary.runs, summary.run_dirs, strict=True):
        if keep_runs == "never" or result.verdict == "valid":
            shutil.rmtree(path, ignore_errors=True)
    root = summary.run_root
    if root.is_dir() and not any(root.iterdir()):
        root.rmdir()

