"""A producer's plan rows kept in a file of the run dir instead of its spec.

A producer plan's spec carries its events as rows (`Event.to_row`, `"events"`): about 140 B
each in the orchestrator, which keeps the plan for as long as the run may respawn the
producer. At the arm the orchestrator writes them to a file (`spill`: pickled chunks of
`CHUNK` rows, every value keeps its type) and the spec names it instead (`"events_file"`);
the producer reads its rows from whichever the spec holds (`rows`), a respawned one reads
the same file again from its start. The file is removed (`remove`) once the workers are
stopped. A spec whose events could not be written (the disk full) keeps them inline.
"""
from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

EVENTS_FILE = "events_file"    # the spec key naming the file
SUFFIX = ".plan.pickle"        # the file's name: the plan's name + this (in the run dir)
CHUNK = 4096


def spill(spec: dict[str, Any], path: Path) -> dict[str, Any]:
    """`spec` with its `"events"` written to `path` and named by `"events_file"` instead (a new
    dict; `spec` itself is untouched), or `spec` as it is (no events, or the file cannot be written)."""
    rows = spec.get("events")
    if not rows:
        return spec
    try:
        with open(path, "wb") as fh:
            for start in range(0, len(rows), CHUNK):
                pickle.dump(rows[start:start + CHUNK], fh, pickle.HIGHEST_PROTOCOL)
    except OSError:
        Path(path).unlink(missing_ok=True)
        return spec
    out = {k: v for k, v in spec.items() if k != "events"}
    out[EVENTS_FILE] = str(path)
    return out


def rows(spec: dict[str, Any]) -> Iterator[Any]:
    """The plan's rows in their order: from the spec's `"events"`, or read from its file a chunk at a time."""
    path = spec.get(EVENTS_FILE)
    if path is None:
        yield from spec["events"]
        return
    for chunk in pickled_chunks(path):
        yield from chunk


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
