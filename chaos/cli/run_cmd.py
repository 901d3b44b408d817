"""`python -m chaos run` (one cell) and `python -m chaos matrix` (presets x faults).

`run --json` prints exactly one JSON object on stdout (the keys of DESIGN.md "Command
line"); progress, the trace and the reproduce hint go to stderr. Exit codes: 0 matches
the expectation (or none is set), 1 mismatch, 2 unknown, 254 bad arguments, 255 internal.
Every input is checked (preset, parts, faults, numbers) before a server starts.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos.cellspec import CellSpec, split_specs
from chaos.cli import blackbox_cmd, failures, options
from chaos.errors import EXIT_MISMATCH, EXIT_OK, EXIT_UNKNOWN, BadArguments


def _parts(items: list[str]) -> dict[str, str]:
    parts: dict[str, str] = {}
    for item in items or []:
        slot, eq, spec = item.partition("=")
        if not eq or not spec:
            raise BadArguments(f"--part {item!r}: write SLOT=SPEC, e.g. --part workload=many-orders:keys=40")
        parts[slot.strip()] = spec.strip()
    return parts


def _positive(text: str, what: str, kind: type = float) -> Any:
    try:
        value = kind(text)
    except ValueError:
        raise BadArguments(f"{what} {text!r} is not a {kind.__name__}") from None
    if value <= 0:
        raise BadArguments(f"{what} must be > 0, got {text}")
    return value


class Progress:
    """One line on stderr per finished run (rewritten in place on a terminal)."""

    def __init__(self, label: str) -> None:
        self.label, self.started, self.wrong, self.tty = label, time.monotonic(), 0, sys.stderr.isatty()

    def __call__(self, done: int, total: int, result: Any) -> None:
        self.wrong += result.counts.wrong_final_state_runs
        line = (f"[{self.label}] run {done}/{total}: {result.verdict}, wrong {self.wrong}/{done}, "
                f"lost {result.counts.lost}, {time.monotonic() - self.started:.1f} s")
        end = "\r" if self.tty and done < total else "\n"
        print(line, end=end, file=sys.stderr, flush=True)


def _rig(args: argparse.Namespace) -> dict[str, str | None]:
    """The backend, topology and server this command runs on (read at the edge: chaos.cli
    `_check_topology_options`); the replay names them."""
    return {"backend": args.backend, "topology": args.topology, "server": args.server}


def cell_spec(preset: str, faults: list[str], parts: dict[str, str], runs: int, seed: int, time_scale: float,
              backend: str | None, topology: str | None = None, server: str | None = None) -> CellSpec:
    """The edge: the command line's specs parsed once, with the backend, topology and server it runs on."""
    return CellSpec.parse(preset, faults, parts, runs=runs, seed=seed, time_scale=time_scale, backend=backend,
                          topology=topology, server=server)


@dataclass(frozen=True)
class Checked:
    """What the edge checked before a server starts: the strategy, and the rig components the
    configured faults may take down (Fault.takes_down)."""

    strategy: Any
    spared: frozenset[str]


def _check_inputs(spec: CellSpec) -> Checked:
    """The strategy, once every fault fits it (BadArguments naming the fix, before a server starts).
    Each fault is made once here, checked and asked what it takes down."""
    from chaos.cluster import DEFAULT_BACKEND
    from chaos.strategies.presets import resolve
    from faults.interface import Plan
    from faults.registry import make_fault
    strategy = resolve(spec.preset, parts=spec.part_texts)
    plan = Plan(strategy=strategy, backend=spec.backend or DEFAULT_BACKEND)
    made = [make_fault(fault) for fault in spec.faults]
    for fault in made:
        fault.check(plan)
    return Checked(strategy, frozenset().union(*(fault.takes_down for fault in made)))


def _replay(spec: CellSpec) -> str:
    return spec.replay()


def _expectation(spec: CellSpec) -> Any:
    from chaos.expectations import expect_cell
    return expect_cell(spec)


def run_one_cell(cluster: Any, spec: CellSpec, trace: bool, runs_root: Path,
                 named: list[Path] | None = None, checked: Checked | None = None) -> tuple[dict, int]:
    """Run a cell and build its JSON object and exit code; keeps the run dirs of a failed cell
    (added to `named`, the dirs this command has named), then bounds the runs root."""
    out, code, _ = run_judged_cell(cluster, spec, trace, runs_root, named, checked)
    return out, code


def run_judged_cell(cluster: Any, spec: CellSpec, trace: bool, runs_root: Path,
                    named: list[Path] | None = None, checked: Checked | None = None) -> tuple[dict, int, Any]:
    """`run_one_cell`, also returning the CellRun (chaos.cellrun: the runner the fixture uses);
    `checked`: what `_check_inputs` gave at the edge (else it is checked here)."""
    from chaos.cellrun import run_judged
    checked = checked or _check_inputs(spec)
    expected = _expectation(spec)
    label = spec.preset_text
    runs, seed, time_scale = spec.runs, spec.seed, spec.time_scale
    named = [] if named is None else named
    root = options.new_run_dir(runs_root, label.replace(':', '_').replace(',', '_').replace('/', '_'))
    finished: list[Any] = []     # runs done so far: what --json prints if the framework crashes
    result: list[Any] = []
    show = Progress(label)

    def progress(done: int, total: int, run: Any) -> None:
        finished.append(run)
        failures.crash_site.runs_done = len(finished)
        show(done, total, run)

    def partial(broken: list[str]) -> dict | None:
        """The cell so far; ``broken``: the rig failures that ended the run under way (unknown)."""
        from chaos.checker import check_run, summarize
        from chaos.results import FinalState
        done = list(finished)
        if broken and not result:
            done.append(check_run([], FinalState(events=[]), run=len(done), seed=seed + len(done),
                                  rig_failures=broken))
        cell = result[0] if result else (summarize(done) if done else None)
        if cell is None:
            return None
        try:
            again = _replay(spec)
        except Exception:  # noqa: BLE001 - the object is printed without it
            again = None
        return cell.to_json(preset=label, fault=spec.fault_text, runs=runs, seed=seed,
                            time_scale=time_scale, run_dir=str(root), reproduce=again)

    failures.crash_site.run_dir, failures.crash_site.cell_json = root, partial
    failures.crash_site.runs_done = 0
    try:
        with failures.watching(cluster, checked.spared):
            judged = run_judged(cluster, spec, expected=expected, strategy=checked.strategy, run_root=root,
                                keep_runs="always", progress=progress, raise_fault_errors=False,
                                trace=(lambda line: print(line, file=sys.stderr)) if trace else None)
    finally:
        options.release_run_dir(root)
    cell = judged.result
    result.append(cell)
    mismatches = expected.mismatches(cell) if expected is not None else []
    matches = not mismatches
    unknown = cell.verdict == "unknown"
    reproduce = _replay(spec)
    keep = unknown or not matches
    if keep:
        named.append(root)
    else:
        shutil.rmtree(root, ignore_errors=True)
    options.bound_runs_root(runs_root, spare=named)
    out = cell.to_json(preset=label, fault=spec.fault_text, runs=runs, seed=seed,
                       time_scale=time_scale, expected=expected, mismatches=mismatches,
                       matches_expectation=matches, wall_s=round(cell.wall_s, 3),
                       run_dir=str(root) if keep else None, reproduce=reproduce)
    out["throughput"] = [m.throughput for m in cell.metrics]
    out["notes"] = list(getattr(cell, "notes", None) or [])
    failures.crash_site.cell_json = lambda _broken: out   # a crash from here on still prints the whole object
    if keep:
        _say_kept(spec, cell, root, runs_root, mismatches, unknown, reproduce)
    code = EXIT_UNKNOWN if unknown else (EXIT_OK if matches else EXIT_MISMATCH)
    return out, code, judged


def _say_kept(spec: CellSpec, cell: Any, root: Path, runs_root: Path, mismatches: list[str], unknown: bool,
              reproduce: str) -> None:
    print(f"[{spec.preset_text}] {'unknown verdict' if unknown else 'MISMATCH'}: run dirs kept in {root} "
          f"({runs_root} keeps {options.retention_help()})", file=sys.stderr)
    for text in mismatches:
        print(f"  {text}", file=sys.stderr)
    for reason in cell.unknown_reasons[:5]:   # a rig failure's log tail indented under its first line
        print("  " + reason.replace("\n", "\n      "), file=sys.stderr)
    print(f"  reproduce: {reproduce}", file=sys.stderr)
    bad = [r for r in cell.runs if r.verdict != "valid"]
    for run in bad[:3]:
        print(f"  run {run.run} alone: {spec.replay(runs=1, seed=run.seed)}", file=sys.stderr)


def _start_cluster(args: argparse.Namespace) -> Any:
    return failures.start_topology(args.backend, f"cli-{os.getpid()}", topology=args.topology, server=args.server)


def _runs_root(args: argparse.Namespace) -> Path:
    """The run dirs' root, made now: one that cannot be made, or a bad CHAOS_KEPT_* bound, is bad
    input, refused before a server starts."""
    from chaos.cluster.rundirs import Retention
    Retention.from_env()
    root = options.runs_root(args)
    _writable(root, f"run dirs cannot go to {root}", f"give a writable dir with --run-dir or ${options.RUNS_ROOT_ENV}")
    return root


def _writable(folder: Path, what: str, fix: str) -> None:
    """Make ``folder`` and write a file in it, or BadArguments: found before a server starts, not after the cells."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".writable-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        reason = f"{exc.filename} is not a directory" if isinstance(exc, FileExistsError) else exc.strerror or exc
        raise BadArguments(f"{what} ({reason}): {fix}") from None


def cmd_run(args: argparse.Namespace) -> int:
    runs = _positive(str(args.runs), "--runs", int)
    scale = _positive(str(args.time_scale), "--time-scale")
    if blackbox_cmd.wants_blackbox(args):  # your own consumer, checked black-box (docs/blackbox.md)
        return blackbox_cmd.run_from_args(args)
    if not args.preset:
        raise BadArguments('give --preset NAME (see `python -m chaos list`) or --worker-cmd "..." --worker-config FILE')
    spec = cell_spec(args.preset, args.fault or [], _parts(args.part), runs, args.seed, scale, args.backend,
                     args.topology, args.server)
    checked = _check_inputs(spec)
    root = _runs_root(args)
    failures.crash_site.partial_json = lambda broken: (failures.crash_site.cell_json
                                                       and failures.crash_site.cell_json(broken))
    with _start_cluster(args) as cluster:
        out, code = run_one_cell(cluster, spec, args.trace, root, checked=checked)
    if args.json:
        print(json.dumps(out, default=str))
    else:
        print(_summary_line(out))
    return code


def _summary_line(out: dict) -> str:
    keys = ("published", "lost", "duplicated", "reordered", "wrong_final_state_runs", "pending_left", "dlq")
    figures = ", ".join(f"{k}={out[k]}" for k in keys)
    verdict = out["verdict"]
    match = "no expectation" if out["expected"] is None else (
        "matches expectation" if out["matches_expectation"] else "MISMATCH")
    line = f"{out['preset']} x {out['fault']}: {out['runs']} runs, {verdict}, {figures} ({match}, {out['wall_s']} s)"
    rig = [f"\n  rig failed: {failure.splitlines()[0].removesuffix('; log tail:')}"
           for failure in out.get("rig_failures") or []]
    return line + "".join(rig) + "".join(f"\n  note: {note}" for note in out.get("notes") or [])


def cmd_matrix(args: argparse.Namespace) -> int:
    """The expectation table's rows, each run with its own parameters (see chaos.report.matrix)."""
    from chaos.cluster.sentinel import parse_topology
    from chaos.expectations.plan import coverage, plan_cells, split_by_topology
    from chaos.report.matrix import matrix_row
    topology = parse_topology(args.topology)[0]
    planned, skipped = split_by_topology(plan_cells(args.area or None, split_specs(args.presets), split_specs(args.faults)),
                                         topology)
    if not planned:
        hint = f" ({skipped[0]['reason']})" if skipped else ""
        raise BadArguments(f"no cells to run: area {args.area!r} has no rows for presets {args.presets!r} x "
                           f"faults {args.faults!r} on this topology{hint}; drop --presets/--faults, "
                           "change --topology, or see `python -m chaos list`")
    if skipped:
        print(f"{len(skipped)} rows not run here: {skipped[0]['reason']} (listed in the JSON's `skipped` "
              "and on the page)", file=sys.stderr)
    runs = None if args.runs is None else _positive(str(args.runs), "--runs", int)
    scale = _positive(str(args.time_scale), "--time-scale")
    specs = [cell.spec.but(runs=runs or cell.runs, seed=args.seed, time_scale=scale, **_rig(args))
             for cell in planned]
    checks = [_check_inputs(spec) for spec in specs]
    if args.out:
        _writable(Path(args.out).parent, f"--out {args.out}", "give a path in a writable dir")
    root = _runs_root(args)
    cells, worst = [], EXIT_OK
    named: list[Path] = []     # the kept dirs the matrix names: retention spares them all

    def partial(_broken: list[str]) -> dict:   # a crash still prints the cells that finished
        return {"schema_version": 1, "topology": topology, "runs": runs, "seed": args.seed, "time_scale": scale,
                "cells": list(cells), "skipped": skipped}

    failures.crash_site.partial_json = partial
    with _start_cluster(args) as cluster:
        for cell, spec, checked in zip(planned, specs, checks, strict=True):
            failures.crash_site.cell_json = None
            out, code, judged = run_judged_cell(cluster, spec, False, root, named, checked)
            row = matrix_row(judged.row, out, area=cell.area)
            cells.append(row)
            worst = max(worst, code)
            print(_summary_line(out), file=sys.stderr)
    matrix = {"schema_version": 1, "topology": topology, "runs": runs, "seed": args.seed, "time_scale": scale,
              "cells": cells, "skipped": skipped, "coverage": coverage()}
    if args.out:
        _write_page(matrix, Path(args.out))
    if args.json:
        print(json.dumps(matrix, default=str))
    else:
        for row in cells:
            print(_row_line(row))
    return worst


def _row_line(row: dict) -> str:
    from chaos.report.matrix import STATUS_TEXT, cell_status
    params = ",".join(f"{k}={v}" for k, v in (row.get("params") or {}).items())
    return (f"{row['area'] or '-'}: {row['preset']} x {row['fault']}{' [' + params + ']' if params else ''}: "
            f"{row['runs']} runs, {row['verdict']}, lost={row['lost']} duplicated={row['duplicated']} "
            f"reordered={row['reordered']} wrong={row['wrong_final_state_runs']}/{row['runs']} "
            f"pending={row['pending_left']} ({STATUS_TEXT[cell_status(row)]})")


def _write_page(matrix: dict, path: Path) -> None:
    from chaos.report.matrix import write_matrix_page
    write_matrix_page(matrix, path)
    print(f"matrix page: {path} (and {path.with_suffix('.json')})", file=sys.stderr)


def add_parser(subparsers: Any) -> None:
    run = subparsers.add_parser("run", help="run one preset x faults cell")
    run.add_argument("--preset", default=None, help="preset[:k=v,...], see `list` (or --worker-cmd)")
    run.add_argument("--fault", action="append", default=[], help="fault[:k=v,...]; may be repeated")
    run.add_argument("--part", action="append", default=[], help="replace a whole part: SLOT=SPEC "
                     "(e.g. workload=many-orders:keys=40,events=5)")
    run.add_argument("--trace", action="store_true", help="a lab-notebook trace per run on stderr")
    options.add_run_options(run)
    blackbox_cmd.add_arguments(run)
    run.set_defaults(func=cmd_run)
    matrix = subparsers.add_parser("matrix", help="run the expectation table's cells and write the matrix page")
    matrix.add_argument("--area", default="", help="only this area's rows (ordering, delivery, producer, ...)")
    matrix.add_argument("--presets", default="", help="comma-separated presets: their rows (pairs without a row "
                        "run on defaults, unjudged); default: every row of the table")
    matrix.add_argument("--faults", default="", help="comma-separated faults (none = no fault), as --presets")
    matrix.add_argument("--out", default="", help="matrix page path, e.g. reports/matrix.html (JSON beside it)")
    options.add_run_options(matrix)
    for action in matrix._actions:  # the table's cells carry their own run counts
        if action.dest == "runs":
            action.default, action.help = None, "runs per cell (default: each row's own, 3 where its area gives none)"
    matrix.set_defaults(func=cmd_matrix)
