"""The checker's regression set: runs of real cells (tests/checker/regression/*.tar.gz, made by
its generate.py with the in-memory checker of before the streaming check) must give
byte-identical JSON: the same verdict, counts, anomalies and final state, whether the history
is a list in memory or read lazily from the run dir (the orchestrator's streaming check)."""
from __future__ import annotations

import json
import random
import tarfile
from collections.abc import Iterator
from itertools import groupby
from pathlib import Path
from types import SimpleNamespace

import pytest

from chaos.checker import check_run, summarize
import chaos.history as history_module
from chaos.history import HistorySource, iter_history, read_history
from chaos.orchestrator.notes import WorkNotes, work_metrics
from chaos.results import FinalRows, FinalState
from chaos.workload.final_state import INTENDED_FILE, Intended, ReadAhead

SAVED = sorted((Path(__file__).parent / "regression").glob("*.tar.gz"))


def unpack(archive: Path, into: Path) -> tuple[FinalState, dict, str]:
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    final = FinalState.from_json(json.loads((into / "final_state.json").read_text()))
    args = json.loads((into / "check.json").read_text())
    return final, args, (into / "expected.json").read_text()


def as_text(result) -> str:
    return json.dumps(summarize([result]).to_json(preset="regression", fault="regression"), sort_keys=True)


def test_the_regression_set_is_there() -> None:
    assert len(SAVED) >= 6, f"tests/checker/regression holds {len(SAVED)} runs; regenerate with its generate.py"


@pytest.mark.parametrize("archive", SAVED, ids=[p.name.removesuffix(".tar.gz") for p in SAVED])
def test_in_memory_check_gives_the_saved_json(archive: Path, tmp_path: Path) -> None:
    final, args, expected = unpack(archive, tmp_path)
    assert as_text(check_run(read_history(tmp_path, run=args["run"]), final, **args)) == expected


@pytest.mark.parametrize("archive", SAVED, ids=[p.name.removesuffix(".tar.gz") for p in SAVED])
def test_streaming_check_gives_the_saved_json(archive: Path, tmp_path: Path) -> None:
    """The history read lazily from its files (HistorySource), the final state's stream and
    intended events given as one-shot iterators, as the orchestrator gives them."""
    final, args, expected = unpack(archive, tmp_path)
    final.stream_entries, final.events = iter(final.stream_entries), iter(final.events)
    assert as_text(check_run(HistorySource(tmp_path, run=args["run"]), final, **args)) == expected


@pytest.mark.parametrize("archive", SAVED, ids=[p.name.removesuffix(".tar.gz") for p in SAVED])
def test_final_rows_as_postgresql_gives_them_give_the_saved_json(archive: Path, tmp_path: Path) -> None:
    """PostgreSQL's rows as chaos.workload.schema reads them (FinalRows: keys and rows in read
    order, no index; here in a shuffled order, as a table scan may give them): the same JSON,
    the final state's included."""
    final, args, expected = unpack(archive, tmp_path)
    pairs = list(final.rows.items())
    random.Random(archive.name).shuffle(pairs)
    final.rows = FinalRows([k for k, _ in pairs], [row for _, row in pairs])
    final.stream_entries, final.events = iter(final.stream_entries), iter(final.events)
    assert as_text(check_run(HistorySource(tmp_path, run=args["run"]), final, **args)) == expected


@pytest.mark.parametrize("archive", SAVED, ids=[p.name.removesuffix(".tar.gz") for p in SAVED])
def test_work_notes_folded_into_the_check_count_as_alone(archive: Path, tmp_path: Path) -> None:
    """The orchestrator's WorkNotes ride the checker's pass and count the events handled from
    the checker's records (their NOTED flag), not from a set of ids: the same figures as the
    notes folded alone over read_history, and the check's JSON unchanged."""
    final, args, expected = unpack(archive, tmp_path)
    notes = WorkNotes()
    result = check_run(HistorySource(tmp_path, run=args["run"]).without(b'"f":"ack"'), final,
                       observe=notes.observe, **args)
    assert as_text(result) == expected
    assert notes.handled_count is not None and not notes.handled
    assert notes.work() == work_metrics(read_history(tmp_path))[:2]


def test_a_file_out_of_time_order_is_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two threads of one process may write their ops in the other order than their times:
    the lazy merge finds it, and the check is done again with that file sorted whole."""
    archive = next(p for p in SAVED if p.name.startswith("baseline-none"))
    final, args, expected = unpack(archive, tmp_path)
    path = sorted((tmp_path / "history").glob("C*.jsonl"))[0]
    lines = path.read_bytes().splitlines(keepends=True)
    lines[100], lines[101] = lines[101], lines[100]
    path.write_bytes(b"".join(lines))
    monkeypatch.setattr(history_module, "CHUNK_LINES", 64)
    source = HistorySource(tmp_path, run=args["run"])
    assert as_text(check_run(source, final, **args)) == expected
    assert source.sort_whole == {str(path)}
    assert list(source) == read_history(tmp_path, run=args["run"])


@pytest.mark.parametrize("chunk", [1, 3, 4096])
def test_lazy_merge_is_read_history(chunk: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """iter_history gives read_history's ops in its order (ties by file, then line), whatever
    the chunk; torn lines skipped alike."""
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "a.jsonl").write_bytes(
        b'{"time":1.0,"process":"a","type":"ok","f":"x","n":1}\n{"time":2.0,"process":"a","type":"ok","f":"x","n":2}\n'
        b'{"time":2.0,"process":"a","type":"ok","f":"x","n":3}\n{"time":5.0,"process":"a","type":"ok","f":"x","n":4}\n'
        b'{"time":6.0,"process":"a","ty')
    (tmp_path / "history" / "b.jsonl").write_bytes(
        b'{"time":0.5,"process":"b","type":"ok","f":"x","n":5}\n{"time":2.0,"process":"b","type":"ok","f":"x","n":6}\n'
        b'{"time":2.0,"process":"b","type":"ok","f":"x","n":7}\n{"time":9.0,"process":"b","type":"ok","f":"x","n":8}\n')
    (tmp_path / "history" / "c.jsonl").write_bytes(b"")
    monkeypatch.setattr(history_module, "CHUNK_LINES", chunk)
    ops = list(iter_history(tmp_path, run=2))
    assert ops == read_history(tmp_path, run=2)
    assert [op["n"] for op in ops] == [5, 1, 2, 3, 6, 7, 4, 8]


@pytest.mark.parametrize("archive", SAVED, ids=[p.name.removesuffix(".tar.gz") for p in SAVED])
def test_final_lists_read_as_tuples_give_the_saved_json(archive: Path, tmp_path: Path) -> None:
    """The intended events spilled and read back as tuples (Intended.tuples) and the streams'
    entries in pages read ahead by a thread (PagedEntries.pages' shape), as the orchestrator's
    check reads them: the same JSON as the dicts give."""
    final, args, expected = unpack(archive, tmp_path / "run")
    planned = [SimpleNamespace(**{"key": None, "version": None, "etype": None, **row}) for row in final.events]
    final.events = Intended.spill(planned, tmp_path / INTENDED_FILE)
    assert final.events.path is not None
    final.stream_entries = _Pages(final.stream_entries)
    assert as_text(check_run(HistorySource(tmp_path / "run", run=args["run"]), final, **args)) == expected


class _Pages:
    """Stream entries as PagedEntries gives them to the checker: (stream, a page of (entry id,
    event id) pairs), 3 to a page, read ahead by a thread."""

    def __init__(self, entries: list[dict]) -> None:
        self.entries = entries

    def pages(self) -> ReadAhead:
        def paged() -> Iterator[tuple]:
            for stream, run in groupby(self.entries, key=lambda e: e.get("stream")):
                pairs = [(e.get("entry_id"), e.get("event_id")) for e in run]
                for k in range(0, len(pairs), 3):
                    yield stream, pairs[k:k + 3]
        return ReadAhead(paged())
