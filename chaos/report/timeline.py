"""A timeline plot of one run's history: one lane per process, fault windows shaded.

Like Jepsen's perf plots: time runs left to right (ms since the run's first op), each
process has a lane, an operation with a duration (publish, apply, lock) is a bar from its
invoke to its completion coloured by outcome, instant ops (deliver, ack, dlq, failpoint)
are markers, and every fault window is a shaded band. Built from matplotlib collections,
so a history of 10^5 ops still renders in seconds.
"""
from __future__ import annotations

import io
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from matplotlib.figure import Figure  # not pyplot: no global state, no display needed
from matplotlib.patches import Patch

SPAN_FS = ("publish", "apply", "lock", "unlock", "claim")
SPAN_HEIGHT = 0.6
LABEL_LIMIT = 80  # label bars with their version only when the plot stays readable
OUTCOME_COLOURS = {
    "ok": "#2e7d32", "fail": "#c62828", "info": "#ef6c00", "dangling": "#9e9e9e",
    "applied": "#1565c0", "stale": "#90a4ae", "duplicate": "#8e24aa",
}
MARKERS = {  # f -> (marker, colour, label)
    "deliver": ("|", "#212121", "deliver (read)"),
    "ack": (".", "#2e7d32", "ack"),
    "dlq": ("v", "#6d4c41", "dlq"),
    "failpoint": ("X", "#c62828", "failpoint"),
    "retry": ("^", "#ef6c00", "retry"),
    "group": ("*", "#ff6f00", "group gone / recreated (NOGROUP)"),
}
REDELIVERY_COLOUR = "#d81b60"
FAULT_COLOURS = ["#ffcdd2", "#fff9c4", "#c8e6c9", "#bbdefb", "#e1bee7"]
LANE_ORDER = ("P", "R", "dispatcher", "C", "W")
RATE_FS = {"publish": "#2e7d32", "deliver": "#212121", "apply": "#1565c0"}
RATE_BINS = 60  # producers first, then routers, consumers, workers


@dataclass
class Timeline:
    """The plot's content, separated from drawing so it can be tested without pixels."""

    origin: float
    end_ms: float
    lanes: list[str]
    bars: dict[str, list[tuple[int, float, float]]] = field(default_factory=lambda: defaultdict(list))
    labels: list[tuple[int, float, str]] = field(default_factory=list)
    marks: dict[str, list[tuple[int, float]]] = field(default_factory=lambda: defaultdict(list))
    faults: list[tuple[str, float, float]] = field(default_factory=list)  # name, start ms, stop ms
    skipped_ms: float = 0.0  # start-up before the first drawn op (process spawns), left out
    completions: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))  # f -> ok times

    def rates(self, bins: int = RATE_BINS) -> tuple[list[float], dict[str, list[float]]]:
        """Completed ops per second in `bins` equal time bins (the lower panel)."""
        width = max(self.end_ms, 1e-6) / bins
        centres = [(i + 0.5) * width for i in range(bins)]
        out = {}
        for f, times in self.completions.items():
            counts = [0] * bins
            for t in times:
                counts[min(int(t / width), bins - 1)] += 1
            out[f] = [n * 1000 / width for n in counts]
        return centres, out


def _lane_rank(process: str) -> tuple:
    if process in ("nemesis", "orchestrator"):
        return (len(LANE_ORDER) + 1, process)
    for rank, prefix in enumerate(LANE_ORDER):
        if process.startswith(prefix):
            return (rank, len(process), process)
    return (len(LANE_ORDER), process)


def build_timeline(history: list[dict]) -> Timeline:
    """Pair invokes with completions, collect markers and fault windows."""
    if not history:
        raise ValueError("cannot plot an empty history; did the run start any process?")
    first = min(op["time"] for op in history)
    drawn = [op for op in history if op["f"] != "log"]  # log ops (spawned, exited, phases) draw nothing
    history = drawn or history
    origin = min(op["time"] for op in history)
    end_ms = (max(op["time"] for op in history) - origin) * 1000
    # a process whose only ops are fault windows (the nemesis) gets no lane: the bands say it
    lanes = sorted({op["process"] for op in history if op["f"] != "fault"}, key=_lane_rank)
    lane_of = {p: i for i, p in enumerate(lanes)}
    tl = Timeline(origin, end_ms, lanes, skipped_ms=(origin - first) * 1000)
    open_spans: dict[tuple, list[dict]] = defaultdict(list)
    open_faults: dict[str, float] = {}
    applies = [op for op in history if op["f"] == "apply"]
    label = len(applies) <= LABEL_LIMIT
    with_key = len({op.get("key") for op in applies}) > 1  # "42:v2" once several keys share a lane
    for op in history:
        f, kind, t = op["f"], op["type"], (op["time"] - origin) * 1000
        lane = lane_of.get(op["process"], -1)
        if kind == "ok" and f in RATE_FS:
            tl.completions[f].append(t)
        if f == "fault":
            value = op.get("value") if isinstance(op.get("value"), dict) else {}
            name = str(value.get("name", "fault"))
            if value.get("phase") == "start":
                open_faults.setdefault(name, t)
            elif value.get("phase") == "stop":
                tl.faults.append((name, open_faults.pop(name, t), t))
            continue
        if f in SPAN_FS:
            slot = (op["process"], f, op.get("event_id"), op.get("key"))
            if kind == "invoke":
                open_spans[slot].append(op)
                continue
            started = open_spans[slot].pop()["time"] if open_spans.get(slot) else op["time"]
            start_ms = (started - origin) * 1000
            colour = op.get("effect") if f == "apply" and kind == "ok" else kind
            tl.bars[colour if colour in OUTCOME_COLOURS else kind].append((lane, start_ms, t - start_ms))
            if label and f == "apply" and op.get("version") is not None:
                text = f"{op.get('key')}:v{op['version']}" if with_key else f"v{op['version']}"
                tl.labels.append((lane, t, text))
            continue
        if f == "deliver" and (op.get("via") in ("claim", "pending") or (op.get("delivery_count") or 1) > 1):
            tl.marks["redeliver"].append((lane, t))
        elif f in MARKERS:
            tl.marks[f].append((lane, t))
    for slot, invokes in open_spans.items():
        for op in invokes:  # a SIGKILLed process never completed these
            start_ms = (op["time"] - origin) * 1000
            tl.bars["dangling"].append((lane_of[slot[0]], start_ms, max(end_ms - start_ms, 0.0)))
    for name, start in open_faults.items():
        tl.faults.append((name, start, end_ms))
    return tl


def plot_timeline(history: list[dict], title: str = "", width_in: float = 12.0) -> bytes:
    """The timeline as PNG bytes."""
    tl = build_timeline(history)
    height = max(2.5, 0.45 * len(tl.lanes) + 1.5) + 1.8
    fig = Figure(figsize=(width_in, height), dpi=100)
    ax, rate_ax = fig.subplots(2, 1, sharex=True,
                               gridspec_kw={"height_ratios": [max(2.0, 0.45 * len(tl.lanes)), 1.6]})
    _draw(ax, tl)
    _draw_rates(rate_ax, tl)
    ax.set_title(title or "run timeline", fontsize=10)
    if tl.skipped_ms >= 1:
        rate_ax.set_xlabel(f"ms since the first worker op ({tl.skipped_ms / 1000:.1f} s of start-up before it)")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def _draw(ax, tl: Timeline) -> None:
    handles = []
    _shade_faults(ax, tl)
    for name, start, _ in tl.faults:
        ax.text(start, -0.75, f" {name}", fontsize=7, va="top", ha="left", color="#b71c1c")
    if tl.faults:
        handles.append(Patch(color=FAULT_COLOURS[0], alpha=0.6, label="fault window"))
    for outcome, bars in tl.bars.items():
        by_lane = defaultdict(list)
        for lane, start, width in bars:
            by_lane[lane].append((start, max(width, tl.end_ms / 2000)))
        for lane, spans in by_lane.items():
            ax.broken_barh(spans, (lane - SPAN_HEIGHT / 2, SPAN_HEIGHT), color=OUTCOME_COLOURS[outcome])
        handles.append(Patch(color=OUTCOME_COLOURS[outcome], label=outcome))
    for lane, t, text in tl.labels:
        ax.text(t, lane + SPAN_HEIGHT / 2 + 0.02, text, fontsize=6, ha="right", va="bottom")
    for f, points in tl.marks.items():
        marker, colour, label = MARKERS.get(f, ("|", REDELIVERY_COLOUR, "deliver (redelivery)"))
        xs, ys = [t for _, t in points], [lane for lane, _ in points]
        handles.append(ax.scatter(xs, ys, marker=marker, color=colour, s=30, zorder=3, label=label))
    ax.set_yticks(range(len(tl.lanes)), tl.lanes, fontsize=8)
    ax.set_ylim(-0.8 - (0.4 if tl.faults else 0), len(tl.lanes) - 0.4)
    ax.set_xlim(-tl.end_ms * 0.01 - 0.5, tl.end_ms * 1.01 + 0.5)
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)
    if handles:
        ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def _shade_faults(ax, tl: Timeline) -> None:
    for i, (_, start, stop) in enumerate(tl.faults):  # an instant fault still gets a visible band
        ax.axvspan(start, max(stop, start + tl.end_ms / 500 + 1e-3),
                   color=FAULT_COLOURS[i % len(FAULT_COLOURS)], alpha=0.6, zorder=0)


def _draw_rates(ax, tl: Timeline) -> None:
    _shade_faults(ax, tl)
    centres, rates = tl.rates()
    for f, colour in RATE_FS.items():
        if f in rates:
            ax.plot(centres, rates[f], color=colour, linewidth=1.2, label=f"{f} ok/s")
    ax.set_ylabel("ops/s", fontsize=8)
    ax.set_xlabel("ms since the run's first op")
    ax.grid(alpha=0.3)
    if rates:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def write_timeline(history: list[dict], path: Path, title: str = "") -> Path:
    """Render to a PNG file (parents created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(plot_timeline(history, title))
    return path
