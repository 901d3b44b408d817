"""Liveness, for real: a consumer pinned to its first address stops consuming after a
Sentinel failover and is judged invalid (exit 1, `stopped-consuming`); its twin that asks
Sentinel consumes on the new primary and is valid. Run as a user runs it:
`python -m chaos run --topology sentinel --worker-cmd ... --fault sentinel-failover:...`.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAULT = "sentinel-failover:after_entries=100,at_ms=0"
PINNED = "python -m examples.redis_py_pinned"
AWARE = "python -m examples.redis_py_sentinel"


PINNED_WINDOW_S = 1     # the pinned consumer never resumes: any window shows it, the test waits it out
AWARE_WINDOW_S = 15     # long enough for a consumer that resumes on a loaded machine


def config(tmp_path: Path, window_s: int) -> Path:
    """The pair's config with the schema by absolute path and a `window_s` no-progress window
    (30 in the example)."""
    text = (ROOT / "examples/redis_py_sentinel.toml").read_text()
    text = text.replace('schema = "orders_schema.sql"', f'schema = "{ROOT / "examples/orders_schema.sql"}"')
    assert "drain_s = 30" in text
    text = text.replace("drain_s = 30", f"drain_s = {window_s}")
    path = tmp_path / "sentinel.toml"
    path.write_text(text)
    return path


def run(command: str, worker_config: Path, tmp_path: Path) -> tuple[int, dict]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "chaos", "run", "--topology", "sentinel", "--worker-cmd", command,
                           "--worker-config", str(worker_config), "--fault", FAULT, "--runs", "1", "--seed", "0",
                           "--json", "--run-dir", str(tmp_path / "runs")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert done.stdout.strip(), done.stderr
    return done.returncode, json.loads(done.stdout)


def figures(data: dict) -> str:
    return ", ".join(f"{k}={data.get(k)}" for k in ("verdict", "published", "handled", "undelivered", "pending_left",
                                                    "stopped_consuming", "wrong_keys", "unsettled_keys",
                                                    "indeterminate", "dropped", "stalled_after_heal_s",
                                                    "run_dir"))   # (kept when the cell failed: the workers' logs)


@pytest.mark.slow(seconds=12)
def test_a_consumer_pinned_to_its_first_address_stops_consuming_and_is_invalid(tmp_path) -> None:
    code, data = run(PINNED, config(tmp_path, PINNED_WINDOW_S), tmp_path)
    print(figures(data))
    assert (data["verdict"], code) == ("invalid", 1), figures(data)
    assert data["anomaly_counts"].get("stopped-consuming", 0) == data["stopped_consuming"] > 0, figures(data)
    assert data["undelivered"] > 0 and data["handled"] < data["published"], figures(data)
    (run0,) = data["per_run"]
    assert run0["drain_end"] == "no progress" and run0["live_workers"] == ["C1", "C2"]
    assert data["stalled_after_heal_s"] >= PINNED_WINDOW_S   # no progress for the whole no-progress window
    assert data["unsettled_keys"] == 0 and data["wrong_keys"] > 0   # its wrong keys are findings now
    assert any(m.startswith("stopped_consuming:") for m in data["mismatches"])
    assert "--topology sentinel" in data["reproduce"]


@pytest.mark.slow(seconds=8)
def test_the_sentinel_aware_twin_consumes_on_the_new_primary_and_is_valid(tmp_path) -> None:
    code, data = run(AWARE, config(tmp_path, AWARE_WINDOW_S), tmp_path)
    print(figures(data))
    assert (data["verdict"], code) == ("valid", 0), figures(data) + f" {data['unknown_reasons']}"
    assert data["undelivered"] == data["pending_left"] == data["stopped_consuming"] == 0
    assert data["handled"] == data["published"] > 100 and data["wrong_keys"] == 0
    (run0,) = data["per_run"]
    assert run0["drain_end"] == "settled"
    # a fault ran and healed; its longest window without progress after the heal is a job's wait
    # (0.02 s measured), far from the pinned twin's whole window
    assert 0.0 <= data["stalled_after_heal_s"] < 5.0, figures(data)
