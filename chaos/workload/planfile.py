"""A producer's plan rows kept in a file of the run dir instead of its spec.

A producer plan's spec carries its events (`"events"`: a `PlanRows`, whose rows `Event.to_row`
makes one at a time, or a list of rows). At the arm the orchestrator writes them to a file
(`spill`: pickled chunks of `CHUNK` rows in schedule order, every value keeps its type), a chunk
at a time as they are made, so it never holds a row per event (10^6 events: ~140 MB); the spec
names the file instead (`"events_file"`). The producer reads its events from whichever the spec
holds (`schedule`: a file's a chunk at a time as they come due, so it does not hold its plan
either); a respawned one reads the same file again from its start. The file is removed
(`remove`) once the workers are stopped. A spec whose events could not be written (the disk
full) keeps them inline, as a list.
"""
from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from chaos.events import Event
from chaos.strategies.plan import PlanRows

EVENTS_FILE = "events_file"    # the spec key naming the file
SUFFIX = ".plan.pickle"        # the file's name: the plan's name + this (in the run dir)
CHUNK = 4096


def spill(spec: dict[str, Any], path: Path) -> dict[str, Any]:
    """`spec` with its `"events"` written to `path` in schedule order and named by `"events_file"`
    instead (a new dict; `spec` itself is untouched), or `spec` as it is (no events), or, when the
    file cannot be written, with its events inline as a list (what the fork server can send)."""
    rows = spec.get("events")
    if not rows:
        return spec
    in_order = rows if isinstance(rows, PlanRows) else sorted(rows, key=_at_ms)
    try:
        with open(path, "wb") as fh:
            for chunk in _chunks(in_order):
                pickle.dump(chunk, fh, pickle.HIGHEST_PROTOCOL)
    except OSError:
        Path(path).unlink(missing_ok=True)
        return spec if isinstance(rows, list) else {**spec, "events": list(rows)}
    out = {k: v for k, v in spec.items() if k != "events"}
    out[EVENTS_FILE] = str(path)
    return out


def _chunks(rows: Iterable[Any]) -> Iterator[list[Any]]:
    it = iter(rows)
    while chunk := list(islice(it, CHUNK)):
        yield chunk


def _at_ms(row: Any) -> float:
    return Event.from_plan(row).at_ms


def rows(spec: dict[str, Any]) -> Iterator[Any]:
    """The plan's rows: from the spec's `"events"` in their order, or read from its file a chunk
    at a time (in schedule order)."""
    path = spec.get(EVENTS_FILE)
    if path is None:
        yield from spec["events"]
        return
    for chunk in pickled_chunks(path):
        yield from chunk


def schedule(spec: dict[str, Any]) -> Iterator[Event]:
    """The plan's events in schedule order (`at_ms`, then plan order): a file's as they are read
    (`spill` wrote them so: the producer holds a chunk of its plan, not all of it), an inline
    plan's sorted here (the black box's, or one whose file could not be written)."""
    path = spec.get(EVENTS_FILE)
    if path is None:
        yield from sorted(map(Event.from_plan, spec["events"]), key=lambda ev: ev.at_ms)
        return
    last = float("-inf")
    for n, row in enumerate(rows(spec)):
        ev = Event.from_plan(row)
        if ev.at_ms < last:
            raise ValueError(f"{path}: row {n} ({ev.event_id}, at {ev.at_ms} ms) comes after one at {last} ms: "
                             "a plan file holds its rows in schedule order; write it with planfile.spill")
        last = ev.at_ms
        yield ev


def pickled_chunks(path: str | Path) -> Iterator[Any]:
    """Each object pickled to `path` in turn (the chunks of a spilled list), to the file's end."""
    with open(path, "rb") as fh:
        while True:
            try:
                yield pickle.load(fh)
            except EOFError:
                return


def remove(spec: dict[str, Any]) -> None:
    """Remove the spec's events file, if it has one (and it is still there)."""
    path = spec.get(EVENTS_FILE)
    if path is not None:
        Path(path).unlink(missing_ok=True)
