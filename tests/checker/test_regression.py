"""The checker's regression set: runs of real cells (tests/checker/regression/*.tar.gz, made by
its generate.py with the in-memory checker of before the streaming check) must give
byte-identical JSON: the same verdict, counts, anomalies and final state."""
from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from chaos.checker import check_run, summarize
from chaos.history import read_history
from chaos.results import FinalState

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
