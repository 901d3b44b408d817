"""`python -m chaos run --worker-cmd ... --worker-config ...`: the handler the run command calls."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from chaos.cli import blackbox_cmd as cli
from chaos.blackbox.errors import ConfigError
from chaos.errors import BadArguments

ROOT = Path(__file__).resolve().parents[2]


def small_config(tmp_path: Path, extra: str = "") -> Path:
    """The ack-first example's config on 40 keys (80 events, 100 in the example), its schema by
    absolute path: what these tests show (the JSON, the exit code, a forced loss) does not rest
    on the burst's size, and the survivor works off a smaller backlog (the drain, 2.6-2.8 s of
    a 4 s test, was mostly that)."""
    text = (ROOT / "examples/redis_py_ack_first.toml").read_text().replace(
        'schema = "orders_schema.sql"', f'schema = "{ROOT / "examples/orders_schema.sql"}"')
    assert "keys = 100 " in text
    path = tmp_path / "w.toml"
    path.write_text(text.replace("keys = 100 ", "keys = 40 ") + extra)
    return path


def args(**given) -> argparse.Namespace:
    base = {"worker_cmd": "python -m examples.redis_py_ack_first", "worker_config": "examples/redis_py_ack_first.toml",
            "preset": None, "fault": [], "runs": 1, "seed": 7, "time_scale": 1.0, "json": True, "trace": False,
            "backend": None, "run_dir": None}
    return argparse.Namespace(**{**base, **given})


@pytest.mark.parametrize("given, words", [
    ({"worker_config": None}, ["--worker-config FILE"]),
    ({"worker_cmd": None}, ["--worker-cmd"]),
    ({"preset": "s1"}, ["give one"]),
])
def test_half_a_pair_or_both_modes_is_bad_input(given: dict, words: list[str]) -> None:
    with pytest.raises(BadArguments) as info:
        cli.wants_blackbox(args(**given))
    assert all(w in str(info.value) for w in words)


def test_options_are_added_to_a_parser() -> None:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    parsed = parser.parse_args(["--worker-cmd", "python w.py", "--worker-config", "w.toml"])
    assert (parsed.worker_cmd, parsed.worker_config) == ("python w.py", "w.toml")
    assert not cli.wants_blackbox(argparse.Namespace(worker_cmd=None, worker_config=None))


def test_bad_config_fails_before_any_server_starts(tmp_path: Path) -> None:
    bad = tmp_path / "w.toml"
    bad.write_text('[state]\ntable = "orders"\n')
    with pytest.raises(ConfigError, match="needs exactly one of version"):
        cli.run_from_args(args(worker_config=str(bad), run_dir=str(tmp_path / "runs")))
    # no topology was started: the CLI makes the runs root before it starts one (options.start_in_run_dir).
    # (Not a wall-clock bound: the call's first import of the black-box runner, ~0.3 CPU s, took
    # 0.8-2.1 s of wall beside two CPU hogs.)
    assert not (tmp_path / "runs").exists()


def test_bad_fault_fails_before_any_server_starts(tmp_path: Path) -> None:
    with pytest.raises(BadArguments, match="at=time"):
        cli.run_from_args(args(fault=["xautoclaim"], run_dir=str(tmp_path / "runs"),
                               worker_config=str(ROOT / "examples/redis_py_ack_first.toml")))


@pytest.mark.slow
def test_json_object_and_exit_code_of_a_broken_consumer(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    code = cli.run_from_args(args(worker_config=str(small_config(tmp_path)), fault=["kill-consumer:at=holding"],
                                  run_dir=str(tmp_path / "runs")))
    data = json.loads(capsys.readouterr().out)
    for key in ("schema_version", "preset", "fault", "runs", "seed", "published", "lost", "duplicated", "reordered",
                "wrong_final_state_runs", "pending_left", "verdict", "expected", "matches_expectation",
                "reproduce", "per_run", "duplicated_side_effects", "blackbox"):
        assert key in data
    assert data["verdict"] == "invalid" and data["lost"] > 0, data["per_run"]
    # no [expect] in the example config: only liveness is promised, and it held: exit 0
    assert list(data["expected"]) == ["stopped_consuming", "note"] and code == 0
    # the survivor took over at once: its longest window without progress after the kill is short
    # (0.05 s measured), not the drain's whole no-progress window
    assert data["stopped_consuming"] == 0 and 0.0 <= data["stalled_after_heal_s"] < 5.0, data["stalled_after_heal_s"]
    assert [r["drain_end"] for r in data["per_run"]] == ["settled"]
    assert data["run_dir"] and Path(data["run_dir"]).is_dir()  # kept: something to look at
    assert "--worker-cmd" in data["reproduce"] and "--seed 7" in data["reproduce"]


@pytest.mark.slow
def test_declared_expectation_mismatch_exits_1(tmp_path: Path, capsys, monkeypatch) -> None:
    config = small_config(tmp_path, "\n[expect]\nlost = 0\n")
    monkeypatch.chdir(ROOT)
    # killed holding entries it read (not at a time, which can fall between batches): the
    # ack-first example loses some in every run
    code = cli.run_from_args(args(worker_config=str(config), fault=["kill-consumer:at=holding"],
                                  run_dir=str(tmp_path / "runs")))
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and not data["matches_expectation"]
    assert any(m.startswith("lost: expected == 0") for m in data["mismatches"])
