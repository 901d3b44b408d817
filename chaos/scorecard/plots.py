"""A cell's curves over time, fault windows shaded (a poison entry's publish dashed): stream
length, the group's lag, each consumer's PEL, and throughput (state writes committed per
second, from the observed effects).

Times count from the run's first publish. Drawn with matplotlib's Agg backend (no display).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

BUCKET_S = 0.25   # throughput bins


def origin(history: list[dict]) -> float | None:
    """The time of the run's first publish (the fault times' zero), else its first op."""
    times = [op["time"] for op in history if op.get("f") == "publish"] or [op["time"] for op in history]
    return min(times) if times else None


def fault_windows(history: list[dict], t0: float) -> list[tuple[str, float, float]]:
    """(name, start s, end s) per fault in the history; a fault without a stop is an instant."""
    starts: dict[str, float] = {}
    spans: list[tuple[str, float, float]] = []
    last = max((op["time"] for op in history), default=t0)
    for op in history:
        if op.get("f") != "fault":
            continue
        value = op.get("value") or {}
        name, phase = value.get("name", "fault"), value.get("phase")
        if phase == "start" and name not in starts:
            starts[name] = op["time"]
        elif phase == "stop" and name in starts:
            spans.append((name, starts.pop(name) - t0, op["time"] - t0))
    for name, at in starts.items():
        instant = name in ("kill-consumer", "sigterm", "maxlen-trim")
        spans.append((name, at - t0, at - t0 + 0.05 if instant else last - t0))
    return spans


def writes_per_second(history: list[dict], t0: float) -> tuple[list[float], list[float]]:
    """Committed state writes per second, in BUCKET_S bins (the observer's apply ops)."""
    times = [op["time"] - t0 for op in history if op.get("f") == "apply" and op.get("effect") == "applied"]
    if not times:
        return [], []
    n = int(max(times) / BUCKET_S) + 2
    bins = [0] * n
    for t in times:
        if t >= 0:
            bins[int(t / BUCKET_S)] += 1
    return [i * BUCKET_S for i in range(n)], [b / BUCKET_S for b in bins]


def plot_run(samples: list[Any], history: list[dict], path: Path, title: str) -> Path | None:
    """Four stacked panels for one run; None when the run has no history to place them on."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = origin(history)
    if t0 is None:
        return None
    windows = fault_windows(history, t0)
    span = [s for s in samples if s.t >= t0 - 0.5]
    xs = [s.t - t0 for s in span]
    fig, axes = plt.subplots(4, 1, figsize=(8, 7.2), sharex=True, constrained_layout=True)
    panels = [("stream length (XLEN)", [s.length for s in span]),
              ("group lag (undelivered entries)", [s.lag for s in span])]
    for ax, (label, ys) in zip(axes[:2], panels):
        ax.plot(xs, [float("nan") if y is None else y for y in ys], color="#1f5fa8", lw=1.4)
        ax.set_ylabel(label, fontsize=8)
    consumers = sorted({name for s in span for name in s.per_consumer})
    for name in consumers:
        axes[2].plot(xs, [float("nan") if s.pending is None else s.per_consumer.get(name, 0) for s in span],
                     lw=1.3, label=name)
    if consumers:
        axes[2].legend(fontsize=7, loc="upper right")
    axes[2].set_ylabel("PEL per consumer", fontsize=8)
    bx, by = writes_per_second(history, t0)
    axes[3].step(bx, by, where="post", color="#2a7d3b", lw=1.3)
    axes[3].set_ylabel("writes / s", fontsize=8)
    axes[3].set_xlabel("seconds since the first publish", fontsize=8)
    gaps = [s.t - t0 for s in span if s.length is None]
    poison = [op["time"] - t0 for op in history if op.get("f") == "publish" and op.get("type") == "ok"
              and str(op.get("event_id", "")).startswith("poison-")]     # fault poison:source=config
    for ax in axes:
        for i, (name, a, b) in enumerate(windows):
            ax.axvspan(a, max(b, a + 0.05), color="#d9534f", alpha=0.18, lw=0,
                       label=f"fault: {name}" if ax is axes[0] and i == 0 else None)
        for g in gaps:
            ax.axvline(g, color="#999999", lw=0.4, alpha=0.5)
        for i, p in enumerate(poison):
            ax.axvline(p, color="#8e44ad", lw=1.2, ls="--",
                       label="poison published" if ax is axes[0] and i == 0 else None)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.25)
    if windows or poison:
        axes[0].legend(fontsize=7, loc="upper right")
    fig.suptitle(title, fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
