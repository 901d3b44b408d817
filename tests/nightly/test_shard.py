"""--chaos-shard K/N on this repository's real collection: disjoint shards that cover it."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from chaos.pytest_plugin.shard import parse_shard, split

from .conftest import REAL_SHARD
from .helpers import collected_ids, collection, run_pytest

SMALL = ("tests/checker/test_history_io.py", "tests/faults/test_params.py")   # two small modules
KEYWORD = "history or describes"


def assert_partition(shards: list[list[str]], whole: list[str]) -> None:
    seen = [n for shard in shards for n in shard]
    assert len(seen) == len(set(seen)), "a test is in two shards"
    assert sorted(seen) == sorted(whole), "the shards do not cover the collection"


def test_shards_of_the_real_collection_are_disjoint_and_cover_it(real_collection):
    """One real shard of the whole collection is what `split` computes for it (the option
    applies `split`; a filtered selection checks every shard of a smaller collection below),
    and `split`'s three shards of the real collection partition it. The shard and the whole
    come from one child session (conftest.py `real_collection`)."""
    whole_collection = real_collection["whole"]
    shards = split(whole_collection, 3)
    assert REAL_SHARD == "2/3" and real_collection["shard"] == shards[1]
    assert_partition(shards, whole_collection)
    assert max(map(len, shards)) - min(map(len, shards)) <= 1   # no durations file: balanced by count


@pytest.fixture
def small_collections(shared_once) -> dict:
    """The collections of SMALL the tests below read, made once per session (each a pytest
    process, ~0.8 CPU s): all of it, its KEYWORD selection, and that selection's two shards
    with a durations file that does not exist (their output too, for its header)."""
    def build(folder: Path) -> dict:
        missing = str(folder / "missing.json")
        shards = [collection(*SMALL, "-k", KEYWORD, "--chaos-shard", f"{k}/2", "--chaos-durations", missing)
                  for k in (1, 2)]
        return {"everything": collected_ids(*SMALL), "selected": collected_ids(*SMALL, "-k", KEYWORD),
                "shards": [ids for ids, _ in shards], "shard_2_output": shards[1][1]}
    return shared_once("small-collections", build)


def test_shards_follow_a_keyword_filter(small_collections):
    everything, selected = small_collections["everything"], small_collections["selected"]
    assert 0 < len(selected) < len(everything)
    assert_partition(small_collections["shards"], selected)


def test_recorded_durations_balance_the_shards(tmp_path, whole_collection, small_collections):
    paths = SMALL
    durations = tmp_path / "durations.json"
    proc = run_pytest("-q", *paths, "--chaos-store-durations", str(durations))
    assert proc.returncode == 0, proc.stdout[-2000:]
    recorded = json.loads(durations.read_text())
    ids = small_collections["everything"]
    assert sorted(recorded) == sorted(ids) and all(v >= 0 for v in recorded.values())
    # recorded durations, with a few tests made slow: the option balances them across shards
    slow = ids[::7]
    weights = {**recorded, **{n: 60.0 + i for i, n in enumerate(slow)}}
    durations.write_text(json.dumps(weights))
    shards = [collected_ids(*paths, "--chaos-shard", f"{k}/3", "--chaos-durations", str(durations))
              for k in (1, 2, 3)]
    assert shards == split(ids, 3, weights)
    assert_partition(shards, ids)
    slow_per_shard = [sum(1 for n in shard if n in slow) for shard in shards]
    assert max(slow_per_shard) - min(slow_per_shard) <= 1, slow_per_shard
    loads = [sum(weights[n] for n in shard) for shard in shards]
    assert max(loads) - min(loads) <= max(weights.values()), loads
    # the same file on the whole real collection (ids it does not know count as the mean)
    parts = split(whole_collection, 4, weights)
    assert_partition(parts, whole_collection)
    mean = sum(weights.values()) / len(weights)
    loads = [sum(weights.get(n, mean) for n in part) for part in parts]
    assert max(loads) - min(loads) <= max(weights.values()), loads


def test_the_header_says_which_shard_and_how_it_was_balanced(small_collections):
    """A durations file that does not exist (a first night) balances by count, and says so."""
    out = small_collections["shard_2_output"]
    assert "chaos shard 2/2:" in out and "balanced by count (no durations file)" in out


def test_an_xdist_run_of_a_shard_runs_exactly_that_shard(small_collections):
    """What the xdist workers ran is the shard `split` makes of the collection (what the option
    collects without xdist: test_recorded_durations_... and test_shards_of_the_real_collection_...)."""
    mine = split(small_collections["everything"], 2)[0]
    proc = run_pytest("-q", "-n", "2", "-rA", *reversed(SMALL), "--chaos-shard", "1/2")
    assert proc.returncode == 0, proc.stdout[-3000:]
    ran = sorted(line.split(" ", 1)[1] for line in proc.stdout.splitlines() if line.startswith("PASSED "))
    assert ran == sorted(mine)


@pytest.mark.parametrize("spec, words", [
    ("3/2", "shards are numbered 1 to 2; give K between 1 and 2"),
    ("0/4", "shards are numbered 1 to 4; give K between 1 and 4 (e.g. 1/4)"),
    ("x/y", "give K/N, two whole numbers such as 1/4"),
    ("2", "give K/N"),
    ("1/0", "the shard count N must be 1 or more"),
])
def test_a_bad_shard_spec_is_a_usage_error_naming_the_fix(spec, words):
    with pytest.raises(ValueError) as raised:
        parse_shard(spec)
    assert f"--chaos-shard={spec}" in str(raised.value) and words in str(raised.value)
    if spec != "3/2":
        return   # one real session shows the option's error path; parse_shard gives every message
    proc = run_pytest("--collect-only", "-q", "tests/faults/test_params.py", f"--chaos-shard={spec}")
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR
    assert f"--chaos-shard={spec}" in proc.stderr and words in proc.stderr


def test_a_corrupt_durations_file_is_a_usage_error_naming_the_fix(tmp_path):
    bad = tmp_path / "durations.json"
    bad.write_text("{not json")
    proc = run_pytest("--collect-only", "-q", "tests/faults/test_params.py", "--chaos-shard", "1/2",
                      "--chaos-durations", str(bad))
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR
    assert f"durations file {bad}" in proc.stderr and "--chaos-store-durations" in proc.stderr


def test_the_split_does_not_depend_on_collection_order():
    """Tests of different names (pytest-split breaks a tie of equal duration and equal name
    by the collection order, which every runner collecting the same tests shares)."""
    ids = [f"suites/x/test_{i}.py::test_cell[{i}]" for i in range(57)]
    shuffled = ids[:]
    random.Random(7).shuffle(shuffled)
    durations = {n: float(i % 9) for i, n in enumerate(ids[:40])}
    for weights in (None, durations):
        a = [sorted(s) for s in split(ids, 5, weights)]
        b = [sorted(s) for s in split(shuffled, 5, weights)]
        assert a == b
        assert_partition(split(ids, 5, weights), ids)
    assert all(s == sorted(s, key=ids.index) for s in split(ids, 5, durations)), "collection order kept"


def test_without_pytest_split_the_option_names_the_fix():
    proc = run_pytest("--collect-only", "-q", "tests/faults/test_params.py", "--chaos-shard", "1/2",
                      "-p", "no:pytest-split")
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR
    assert "--chaos-shard=1/2: the split is pytest-split's" in proc.stderr and "pip install pytest-split" in proc.stderr
