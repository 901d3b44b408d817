"""The scorecard in pytest: one test per fault through the `blackbox` fixture, on real
example consumers. The same property (no_loss under a kill) fails for the ack-first
consumer and passes for its compare-and-set twin."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def small(example: str, work_ms: int | None = None) -> dict:
    """The example's worker config on 40 keys (80 events), as the fixture's dict form.

    ``work_ms``: each job's cost. The kill (``at=holding``) waits for its victim to hold
    entries it read while a backlog waits: at 10 ms a job a producer slowed by a loaded machine
    lets the consumers keep up, and there may be no such moment (the run is then unknown); at
    40 ms a job the 80 events are a backlog for more than a second."""
    import tomllib
    raw = tomllib.loads((ROOT / f"examples/{example}.toml").read_text())
    raw["worker"]["schema"] = str(ROOT / "examples" / raw["worker"]["schema"])
    raw["workload"]["keys"] = 40
    if work_ms is not None:
        raw["worker"]["env"]["ORDERS_WORK_MS"] = str(work_ms)
    return raw


@pytest.mark.blackbox(command="python -m examples.redis_py_cas", config=small("redis_py_cas", work_ms=40))
@pytest.mark.scorecard(faults="kill-consumer:at=holding")
def test_cas_consumer_grid(blackbox, scorecard_fault):
    """The scorecard's kill, the same as the ack-first twin's below: an ack-after consumer
    killed holding work loses nothing (its entries wait in the PEL for the survivor)."""
    cell = blackbox.scorecard(scorecard_fault)
    assert cell.fault == "kill-consumer:at=holding"
    assert {k: g.status for k, g in cell.grades.items()} == {
        "no_loss": "pass", "no_duplicate_side_effects": "pass", "final_state": "pass", "keeps_consuming": "pass",
        "pel_drains": "pass", "poison_handled": "unknown"}, cell.grades
    assert any(op["f"] == "fault" for op in cell.cell.runs[0].history)       # the kill happened
    assert len([s for s in cell.samples[0] if s.length is not None]) > 5      # Redis was sampled during the run
    assert cell.like.startswith("like s5 + inbox")


@pytest.mark.blackbox(command="python -m examples.redis_py_ack_first", config=small("redis_py_ack_first", work_ms=40))
def test_ack_first_consumer_fails_no_loss_in_its_scorecard_test(blackbox):
    """Killed while it holds entries it read (at=holding: not at a time, which can fall between
    a batch's last write and the next read, where it loses nothing), the ack-first consumer
    loses the acked, unwritten rest of its batch in every run."""
    with pytest.raises(AssertionError) as failed:
        blackbox.scorecard("kill-consumer:at=holding")
    text = str(failed.value)
    assert "no_loss: lost" in text and "no_loss fail" in text, text
    assert "python -m chaos run --worker-cmd 'python -m examples.redis_py_ack_first'" in text


def test_the_marker_parametrizes_one_test_per_catalogue_cell(tmp_path):
    (tmp_path / "test_grid.py").write_text(
        "import pytest\n\n@pytest.mark.scorecard\ndef test_grid(scorecard_fault):\n    pass\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "chaos.plugin",
                           "-p", "no:cacheprovider", "test_grid.py"], cwd=tmp_path, env=env, text=True,
                          capture_output=True, timeout=120)
    from chaos.scorecard.plan import catalogue
    specs = [c.spec for c in catalogue("replica") if not c.skipped]
    collected = [line for line in done.stdout.splitlines() if "::test_grid[" in line]
    assert len(collected) == len(specs) > 10, done.stdout + done.stderr
    assert "test_grid.py::test_grid[kill-consumer:at=holding]" in collected


def test_the_marker_runs_the_poison_cell_where_the_config_declares_poison(tmp_path):
    (tmp_path / "test_grid.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.blackbox(command='python -m examples.redis_py_cas', config=%r)\n"
        "@pytest.mark.scorecard\ndef test_cas(scorecard_fault):\n    pass\n\n"
        "@pytest.mark.blackbox(command='python -m examples.redis_py_ack_first', config=%r)\n"
        "@pytest.mark.scorecard\ndef test_ack_first(scorecard_fault):\n    pass\n"
        % (str(ROOT / "examples/redis_py_cas.toml"), str(ROOT / "examples/redis_py_ack_first.toml")))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "chaos.plugin",
                           "-p", "no:cacheprovider", "test_grid.py"], cwd=tmp_path, env=env, text=True,
                          capture_output=True, timeout=120)
    assert "test_grid.py::test_cas[poison:source=config]" in done.stdout, done.stdout + done.stderr
    assert "test_ack_first[kill-consumer:at=holding]" in done.stdout and "test_ack_first[poison" not in done.stdout
