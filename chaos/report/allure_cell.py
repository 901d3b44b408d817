"""Everything Allure shows of one cell test: labels, readable parameters, the
phases of every run as timed steps, `cell.json`, and for a few runs (the invalid ones
first) the trace, the merged history and the timeline PNG.

`report_cell` is a no-op when nothing receives Allure data (no `--alluredir`), so the cell
runner calls it unconditionally and pays for the plots only when someone will see them.
It must be called while the run dirs still exist (or with `histories` already read).
"""
from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chaos.cellspec import NO_FAULT, CellSpec, split_faults
from chaos.results import (INVALID, LOST, REORDERED, STOPPED_CONSUMING, UNEXPECTED, UNKNOWN, VALID, WRONG_FINAL_STATE,
                            CellResult)
from chaos.history import HistoryError, format_history, history_dir, read_history
from chaos.report.rows import headline

MAX_RUNS_ATTACHED = 3
MAX_TEXT_CHARS = 1_000_000  # per text attachment: a 10^5-event history is ~80 MB of text
# Allure severity from the worst anomaly a cell showed: loss first, then a wrong result,
# then duplicated effects; a clean cell is minor (it tells nothing new when it passes).
SEVERITY_BY_KIND = (
    (LOST, "blocker"),
    (STOPPED_CONSUMING, "blocker"),
    (WRONG_FINAL_STATE, "critical"),
    (REORDERED, "critical"),
    (UNEXPECTED, "critical"),
    ("duplicated", "normal"),
    ("projection-drift", "normal"),
)
STEP_STATUS = {VALID: "passed", INVALID: "failed", UNKNOWN: "broken"}


def allure_active() -> bool:
    """True when something receives Allure data: allure-pytest registers its listener on
    `allure_commons.plugin_manager` only when `--alluredir` is given."""
    try:
        from allure_commons import plugin_manager
    except ModuleNotFoundError:
        return False
    return bool(plugin_manager.hook.attach_data.get_hookimpls())


def severity(result: CellResult) -> str:
    """`blocker` for a lost event, `critical` for a wrong/reordered/unexpected result,
    `normal` for duplicated effects (or an unknown verdict), `minor` for a clean cell. A cell
    whose rig broke is `normal` whatever it measured: its figures say nothing about the strategy."""
    if result.rig_failures:
        return "normal"
    kinds = {kind for kind, n in result.anomaly_counts.items() if n} | {a.kind for a in result.anomalies}
    if result.counts.lost:
        kinds.add(LOST)
    if result.counts.wrong_final_state_runs:
        kinds.add(WRONG_FINAL_STATE)
    if result.counts.duplicated:
        kinds.add("duplicated")
    for kind, level in SEVERITY_BY_KIND:
        if kind in kinds:
            return level
    return "normal" if result.verdict == UNKNOWN else "minor"


def chosen_runs(result: CellResult, limit: int = MAX_RUNS_ATTACHED) -> list[int]:
    """Indexes into result.runs: the runs that are not valid first (they explain a failure),
    then the first run, at most `limit`."""
    bad = [i for i, r in enumerate(result.runs) if r.verdict != VALID]
    return list(dict.fromkeys(bad + [0]))[:limit] if result.runs else []


def trace_text(history: list[dict]) -> str:
    """The lab-notebook trace (one readable line per meaningful op)."""
    from chaos.trace import trace_lines
    return "\n".join(trace_lines(history)) + "\n"


def cell_object(result: CellResult, spec: CellSpec, *, expected: Any, area: str | None = None,
                reproduce: str | None = None, extra_json: Mapping[str, Any] | None = None) -> dict:
    """The `run --json` object of the cell, plus area, parts, notes and phases. `reproduce`: the
    replay command the caller built (default: `spec.replay()`); `extra_json`: more keys (a
    black-box cell's figures)."""
    mismatches = expected.mismatches(result) if expected is not None else []
    extra: dict[str, Any] = {}
    if getattr(result, "wall_s", None) is not None:
        extra["wall_s"] = round(result.wall_s, 3)
    if getattr(result, "run_root", None) is not None:
        extra["run_dir"] = result.run_root
    out = result.to_json(preset=spec.preset_text, fault=spec.fault_text, runs=spec.runs, seed=spec.seed,
                         time_scale=spec.time_scale, expected=expected, mismatches=mismatches,
                         matches_expectation=not mismatches, area=area, parts=spec.part_texts,
                         notes=list(getattr(result, "notes", None) or []), reproduce=reproduce or spec.replay(),
                         **extra)
    out.update(extra_json or {})
    phases = getattr(result, "phases", None) or []
    if phases:
        out["phases"] = [{"run": p.run, "name": p.name, "duration_s": round(p.end - p.start, 4)} for p in phases]
    metrics = getattr(result, "metrics", None) or []
    if metrics:
        out["throughput"] = [getattr(m, "throughput", None) for m in metrics]
    return out


def report_cell(result: CellResult, spec: CellSpec | None = None, *, area: str, expected: Any,
                preset: str = "", fault: str = "", parts: Mapping[str, str] | None = None, runs: int = 1,
                seed: int = 0, time_scale: float = 1.0, histories: list[list[dict]] | None = None,
                reproduce: str | None = None, extra_json: Mapping[str, Any] | None = None) -> None:
    """Attach the cell to the current Allure test (see the module doc); a no-op without Allure.

    `spec` is the cell as run; without it, `preset`, `fault` (`a:k=v+b`), `parts`, `runs`,
    `seed` and `time_scale` are parsed into one here. `expected` is the row's Expectation or
    None; `histories[i]` is run i's merged history when the caller already read it (else it is
    read from `result.run_dirs`); `reproduce` and `extra_json` as for `cell_object` (a
    black-box cell gives both).
    """
    if not allure_active():
        return
    import allure

    if spec is None:
        spec = CellSpec.parse(preset, split_faults(fault or NO_FAULT), parts, runs=runs, seed=seed,
                              time_scale=time_scale)
    label = spec.label
    obj = cell_object(result, spec, expected=expected, area=area, reproduce=reproduce, extra_json=extra_json)
    as_expected = expected is not None and bool(obj.get("matches_expectation"))
    shown = {"preset": spec.preset_text, "fault": spec.fault_text,
             **{f"part {slot}": text for slot, text in spec.part_texts.items()},
             "runs": spec.runs, "time scale": spec.time_scale}
    earlier = _reported_before(label, _description(obj))
    if earlier:  # a test that runs several cells: each further one in a step of its own
        number = len(earlier) + 1
        allure.dynamic.title(" + ".join(title for title, _ in earlier) + f" + {label}")
        allure.dynamic.description("\n\n---\n\n".join(f"**{title}**: {text}" for title, text in earlier)
                                   + f"\n\n---\n\n**{label}**: {_description(obj)}")
        for name, value in shown.items():
            allure.dynamic.parameter(f"{name} (cell {number})", _Plain(value))
        with allure.step(f"cell {number}: {label}"):
            _cell_contents(result, obj, histories, as_expected)
        return
    allure.dynamic.title(label)
    allure.dynamic.epic(area)
    allure.dynamic.feature(spec.preset.name)
    allure.dynamic.story(spec.fault_names)
    allure.dynamic.severity(allure.severity_level(severity(result)))
    allure.dynamic.tag(result.verdict)
    if result.rig_failures:
        allure.dynamic.tag("rig-failure")
    server = spec.server or ""       # the cluster's, filled at the edge (CellSpec.server)
    if server and server != "redis":  # another server's results get their own history, not retries of Redis's
        shown = {**shown, "server": server}
    _hide_other_parameters(set(shown) | {"seed"})
    for name, value in shown.items():
        allure.dynamic.parameter(name, _Plain(value))
    allure.dynamic.parameter("seed", _Plain(spec.seed), excluded=True)  # a new seed continues the same history
    allure.dynamic.description(_description(obj))
    _cell_contents(result, obj, histories, as_expected)


def _cell_contents(result: CellResult, obj: dict, histories: list[list[dict]] | None, as_expected: bool) -> None:
    import allure
    _phase_steps(result, as_expected=as_expected)
    allure.attach(json.dumps(obj, indent=2, default=str), name="cell.json",
                  attachment_type=allure.attachment_type.JSON)
    if result.rig_failures:  # each component's log tail, as the rig found it
        allure.attach("\n\n".join(result.rig_failures) + "\n", name="rig failures.txt",
                      attachment_type=allure.attachment_type.TEXT)
    _attach_runs(result, histories)


_REPORTED: dict[str, list[tuple[str, str]]] = {}  # Allure test uuid -> (label, description) of its cells


def _reported_before(label: str, description: str) -> list[tuple[str, str]]:
    """The cells already reported on the current test (and note this one)."""
    reporter = _reporter()
    test = reporter.get_test(None) if reporter is not None and hasattr(reporter, "get_test") else None
    key = getattr(test, "uuid", None)
    if key is None:
        return []
    if len(_REPORTED) > 1000:  # tests long finished
        _REPORTED.clear()
    cells = _REPORTED.setdefault(key, [])
    earlier = list(cells)
    cells.append((label, description))
    return earlier


class _Plain:
    """A parameter value shown as is (allure-pytest quotes strings: `'s1'`)."""

    def __init__(self, value: Any) -> None:
        self.text = str(value)

    def __repr__(self) -> str:
        return self.text


def _hide_other_parameters(ours: set[str]) -> None:
    """The test's own pytest parameters (a Cell's dataclass repr) stay in the history id but
    are hidden: the readable ones above say the same."""
    reporter = _reporter()
    test = reporter.get_test(None) if reporter is not None and hasattr(reporter, "get_test") else None
    for parameter in getattr(test, "parameters", None) or []:
        if parameter.name not in ours and not parameter.excluded:
            parameter.mode = "hidden"


def _description(obj: dict) -> str:
    """Markdown: verdict and expectation, the figures, notes and the replay command."""
    expected = obj.get("expected")
    match = "no expectation" if expected is None else (
        "matches its expectation" if obj.get("matches_expectation") else "**does not match its expectation**")
    if obj.get("rig_failures"):
        match = "**the rig broke**: the figures below say nothing about the strategy"
    figures = ", ".join(f"{k} {obj.get(k)}" for k in ("published", "lost", "duplicated", "reordered",
                                                      "wrong_final_state_runs", "redelivered", "pending_left",
                                                      "undelivered", "dlq", "indeterminate", "unattempted",
                                                      "negative_drift"))
    stopped = (obj.get("anomaly_counts") or {}).get(STOPPED_CONSUMING)
    if stopped:   # liveness: what a live consumer never consumed, and for how long it made no progress
        stalled = obj.get("stalled_after_heal_s")   # black-box runs measure it; built-in ones name the live consumers
        figures += f", **stopped consuming {stopped}**" + (
            f" (no progress for {stalled} s after the last heal)" if stalled is not None else "")
    lines = [f"**{obj.get('verdict')}** over {obj.get('runs')} runs, {match}.", "", figures + "."]
    if isinstance(expected, dict):
        bounds = ", ".join(f"{k} {v}" for k, v in expected.items() if k != "note")
        lines += ["", f"Expected: {bounds}."]
        if expected.get("note"):
            lines += ["", f"Why: {expected['note']}"]
    for text in obj.get("mismatches") or []:
        lines.append(f"* {text}")
    for note in obj.get("notes") or []:
        lines += ["", f"Note: {note}"]
    rig = list(obj.get("rig_failures") or [])
    for failure in rig:
        lines += ["", f"**Rig broke** (no strategy is to blame): {headline(failure)}"]
    heads = {headline(f) for f in rig}
    for reason in [r for r in obj.get("unknown_reasons") or [] if headline(r) not in heads][:5]:
        lines += ["", f"Unknown: {reason}"]
    if obj.get("reproduce"):
        lines += ["", "Replay:", "", f"    {obj['reproduce']}"]
    return "\n".join(lines)


def _reporter() -> Any:
    """allure-pytest's reporter (its listener's `allure_logger`), for steps with recorded times."""
    from allure_commons import plugin_manager
    for plugin in plugin_manager.get_plugins():
        logger = getattr(plugin, "allure_logger", None)
        if logger is not None and hasattr(logger, "start_step"):
            return logger
    return None


def _phase_steps(result: CellResult, as_expected: bool) -> None:
    """One step per run, one nested step per phase, with the times the orchestrator recorded
    (monotonic clock, shifted to wall-clock milliseconds). A run's step is red (invalid) or
    yellow (unknown) only when the cell left its expectation: a known-broken strategy that
    broke as its row says is green, its verdict is in the step's name."""
    reporter = _reporter()
    if reporter is None:
        return
    from allure_commons.model2 import Parameter, TestStepResult
    shift = time.time() - time.monotonic()
    phases = list(getattr(result, "phases", None) or [])
    metrics = {getattr(m, "run", i): m for i, m in enumerate(getattr(result, "metrics", None) or [])}
    ms = lambda t: int((t + shift) * 1000)  # noqa: E731
    for run in result.runs:
        own = sorted((p for p in phases if p.run == run.run), key=lambda p: p.start)
        if own:
            start, stop = own[0].start, max(p.end for p in own)
        else:  # no phases recorded: one step for the run, timed by its wall clock when known
            m = metrics.get(run.run)
            stop = time.monotonic()
            start = stop - (getattr(m, "wall_s", 0.0) or 0.0)
        figures = f"lost {run.counts.lost}, duplicated {run.counts.duplicated}, reordered {run.counts.reordered}"
        if run.rig_failures:
            figures = "rig broke: " + "; ".join(headline(f) for f in run.rig_failures)
        run_step = TestStepResult(name=f"run {run.run} (seed {run.seed}): {run.verdict}; {figures}",
                                  start=ms(start), parameters=[Parameter(name="seed", value=str(run.seed))])
        run_uuid = uuid.uuid4().hex
        reporter.start_step(None, run_uuid, run_step)
        for phase in own:
            step_uuid = uuid.uuid4().hex
            reporter.start_step(run_uuid, step_uuid, TestStepResult(
                name=phase.name, start=ms(phase.start)))  # Allure shows the duration beside it
            reporter.stop_step(step_uuid, stop=ms(phase.end), status="passed")
        status = "passed" if as_expected else STEP_STATUS.get(run.verdict, "broken")
        reporter.stop_step(run_uuid, stop=ms(stop), status=status)


def _attach_runs(result: CellResult, histories: list[list[dict]] | None) -> None:
    import allure

    try:
        from chaos.report.timeline import plot_timeline
    except ModuleNotFoundError:   # matplotlib is the `plots` extra: the trace and history still go in
        plot_timeline = None

    dirs = list(getattr(result, "run_dirs", None) or [])
    for index in chosen_runs(result):
        run = result.runs[index]
        history = _history(index, histories, dirs)
        if history is None:
            continue
        tag = f"run {run.run} ({run.verdict})"
        where = dirs[index] if index < len(dirs) else None
        allure.attach(bounded(trace_text(history), where), name=f"{tag} trace.txt",
                      attachment_type=allure.attachment_type.TEXT)
        allure.attach(bounded(format_history(history), where), name=f"{tag} history.txt",
                      attachment_type=allure.attachment_type.TEXT)
        if history and plot_timeline is not None:
            png = plot_timeline(history, title=f"{tag}, seed {run.seed}")
            allure.attach(png, name=f"{tag} timeline.png", attachment_type=allure.attachment_type.PNG)


def bounded(text: str, run_dir: Path | None = None, limit: int = MAX_TEXT_CHARS) -> str:
    """The text, or its first and last lines within `limit` characters and a line saying how
    many were left out and where the whole history is."""
    if len(text) <= limit:
        return text
    head = text[: limit // 2].rpartition("\n")[0]
    tail = text[-(limit // 2):].partition("\n")[2]
    left_out = text.count("\n") - head.count("\n") - tail.count("\n") - 1
    where = f"; the whole history is in {history_dir(run_dir)} while the run dir is kept" if run_dir else ""
    return f"{head}\n... {left_out} lines left out{where} ...\n{tail}"


def _history(index: int, histories: list[list[dict]] | None, dirs: list[Path]) -> list[dict] | None:
    if histories is not None and index < len(histories):
        return histories[index]
    if index < len(dirs):
        try:
            return read_history(Path(dirs[index]))
        except HistoryError:
            return None  # tidied away (a valid run) or never started
    return None
