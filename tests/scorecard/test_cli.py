"""`python -m chaos scorecard`: bad input refused in one line (exit 254, nothing started), a
consumer that crashes on start graded fail with its log tail, the JSON object's schema."""
from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.cli import main

ROOT = Path(__file__).resolve().parents[2]
CAS = ["--worker-cmd", "python -m examples.redis_py_cas", "--worker-config", "examples/redis_py_cas.toml"]
PROPERTIES = {"no_loss", "no_duplicate_side_effects", "final_state", "keeps_consuming", "pel_drains", "poison_handled"}


def small_config(tmp_path: Path, base: str = "examples/redis_py_ack_first.toml", *, extra: str = "",
                 table: str = "orders", work_ms: int | None = None) -> Path:
    """The example's config on 40 keys (80 events), its schema by absolute path.

    ``work_ms``: each job's cost. A kill loses ack-first work only when it finds the consumer with
    acked, unwritten entries in hand: at the example's 10 ms a producer slowed by a loaded machine
    lets the consumers keep up and idle in XREADGROUP (lost 0 seen in a loaded CI run); at 40 ms
    they are still working through the backlog at 300 ms."""
    text = (ROOT / base).read_text().replace('schema = "orders_schema.sql"',
                                             f'schema = "{ROOT / "examples/orders_schema.sql"}"')
    text = text.replace("keys = 100", "keys = 40").replace('table = "orders"', f'table = "{table}"')
    if work_ms is not None:
        text = text.replace('ORDERS_WORK_MS = "10"', f'ORDERS_WORK_MS = "{work_ms}"')
    path = tmp_path / "worker.toml"
    path.write_text(text + extra)
    return path


def scorecard(*argv: str, cwd: Path = ROOT, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "chaos", "scorecard", *argv], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=timeout)


@pytest.mark.parametrize("argv, words", [
    (["--worker-cmd", "no-such-consumer-binary", "--worker-config", "examples/redis_py_cas.toml"],
     ["not on PATH"]),
    ([*CAS, "--faults", "sentinel-failover"], ["--topology sentinel"]),
    ([*CAS, "--faults", "kill-consumer", "--runs", "0"], ["--runs 0"]),
    ([*CAS, "--worker-config", "examples/no-such.toml"], ["no-such.toml"]),
])
def test_bad_input_is_one_line_and_exit_254(tmp_path, capsys, argv, words):
    out = tmp_path / "out"
    code = main(["scorecard", *argv, "--out", str(out), "--run-dir", str(tmp_path / "runs")])
    err = capsys.readouterr().err.strip()
    assert code == 254, err
    assert len(err.splitlines()) == 1 and all(w in err for w in words), err
    assert not out.exists() and not (tmp_path / "runs").exists()      # nothing started, nothing written


def test_an_unwritable_out_is_refused_before_anything_starts(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user that can write a read-only dir (root)")
        code = main(["scorecard", *CAS, "--out", str(locked / "card"), "--run-dir", str(tmp_path / "runs")])
    finally:
        locked.chmod(stat.S_IRWXU)
    err = capsys.readouterr().err.strip()
    assert code == 254 and "give a writable directory" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_an_out_that_is_a_file_is_refused(tmp_path, capsys):
    """Root can write anywhere; a regular file in the way is unwritable for everyone."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code = main(["scorecard", *CAS, "--out", str(blocker / "card"), "--run-dir", str(tmp_path / "runs")])
    err = capsys.readouterr().err.strip()
    assert code == 254 and "--out" in err and "give a writable directory" in err, err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("var", ["CHAOS_KEPT_DIRS", "CHAOS_KEPT_MB", "CHAOS_KEPT_DAYS"])
def test_a_bad_kept_bound_is_refused_before_anything_starts(tmp_path, capsys, monkeypatch, var):
    """As `run` does: the bound of the runs root is checked before a run dir or a topology is made."""
    monkeypatch.setenv(var, "lots")
    code = main(["scorecard", *CAS, "--faults", "kill-consumer", "--out", str(tmp_path / "out"),
                 "--run-dir", str(tmp_path / "runs")])
    err = capsys.readouterr().err.strip()
    assert code == 254, err
    assert len(err.splitlines()) == 1 and f"{var}='lots': give a" in err and ">= 0" in err, err
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()


def test_a_config_naming_a_missing_table_is_refused_before_a_worker_starts(tmp_path):
    cfg = small_config(tmp_path, table="no_such_orders")
    done = scorecard("--worker-cmd", "python -m examples.redis_py_ack_first", "--worker-config", str(cfg),
                     "--faults", "none", "--out", str(tmp_path / "out"), "--run-dir", str(tmp_path / "runs"))
    err = done.stderr.strip().splitlines()
    assert done.returncode == 254, done.stderr
    assert "no_such_orders" in err[-1] and err[-1].startswith("error:"), done.stderr
    assert not any("worker(s) connected" in line for line in err)
    assert not (tmp_path / "out").exists()


def test_a_consumer_that_crashes_on_start_is_graded_fail_and_the_card_goes_on(tmp_path):
    cfg = small_config(tmp_path, extra="\n[expect]\nlost = 0\n")
    crash = f"{sys.executable} -c \"import sys; print('boom: no ORDERS_DSN'); sys.exit(3)\""
    done = scorecard("--worker-cmd", crash, "--worker-config", str(cfg), "--faults", "none,pause",
                     "--out", str(tmp_path / "out"), "--run-dir", str(tmp_path / "runs"), "--json")
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    assert [c["fault"] for c in data["cells"]] == ["none", "pause:at_ms=200,duration_ms=1500"]
    for cell in data["cells"]:
        assert set(cell["properties"].values()) == {"fail"}
        evidence = cell["evidence"]["no_loss"]["evidence"]
        assert "crashed on start" in evidence and "boom: no ORDERS_DSN" in evidence and "exit code 3" in evidence
    assert data["summary"]["broken_promises"] == [
        f"{fault}: {p}: the consumer crashed on start" for fault in ("none", "pause:at_ms=200,duration_ms=1500")
        for p in ("no_loss", "keeps_consuming")]
    assert (tmp_path / "out" / "index.html").is_file() and (tmp_path / "out" / "cells" / "01.html").is_file()


def test_json_schema_grid_page_and_exit_code_of_a_broken_promise(tmp_path):
    """ack-first promises no loss and breaks it under a kill: exit 1, the cell says why."""
    cfg = small_config(tmp_path, extra="\n[expect]\nlost = 0\n", work_ms=40)
    assert 'ORDERS_WORK_MS = "40"' in cfg.read_text()
    done = scorecard("--worker-cmd", "python -m examples.redis_py_ack_first", "--worker-config", str(cfg),
                     "--faults", "kill-consumer:at_ms=300", "--out", str(tmp_path / "out"),
                     "--run-dir", str(tmp_path / "runs"), "--json", "--seed", "3", "--runs", "2")
    data = json.loads(done.stdout)
    assert set(data) >= {"schema_version", "consumer", "cells", "summary"} and data["schema_version"] == 1
    assert data["consumer"]["worker_cmd"] == "python -m examples.redis_py_ack_first"
    assert data["consumer"]["promised"] == ["no_loss", "keeps_consuming"]
    (cell,) = data["cells"]
    assert cell["fault"].startswith("kill-consumer")
    assert set(cell["properties"]) == PROPERTIES
    assert set(cell["properties"].values()) <= {"pass", "fail", "unknown"}
    assert {"published", "lost", "duplicated_side_effects", "pending_left", "undelivered"} <= set(cell["counts"])
    assert cell["reproduce"].startswith("python -m chaos run --worker-cmd") and "--seed 3" in cell["reproduce"]
    assert "--fault kill-consumer:at_ms=300" in cell["reproduce"]
    assert cell["counts"]["lost"] > 0 and cell["properties"]["no_loss"] == "fail", cell
    assert done.returncode == 1 and data["summary"]["exit_code"] == 1
    assert any(b.startswith("kill-consumer:at_ms=300: lost") for b in data["summary"]["broken_promises"])
    page = (tmp_path / "out" / "index.html").read_text()
    assert "cells/00.html" in page and "#d0453b" in page                 # a red square, linked
    detail = (tmp_path / "out" / "cells" / "00.html").read_text()
    assert "00-run0.png" in detail and "00-run1.png" in detail and cell["reproduce"].split()[0] in detail
    for n in (0, 1):     # every run's curves, each named on the page with its seed
        assert (tmp_path / "out" / "cells" / f"00-run{n}.png").stat().st_size > 10_000
        assert f"Run {n} (seed {3 + n})" in detail
    assert json.loads((tmp_path / "out" / "scorecard.json").read_text())["cells"][0]["fault"] == cell["fault"]
    from chaos.scorecard.page import markdown_grid
    row = markdown_grid(data).splitlines()[2]
    assert row.startswith("| kill-consumer | **fail** (lost ") and "| ack-on-receive" in row


def test_poison_is_graded_where_the_config_declares_it(tmp_path):
    """The poison cell publishes the config's [poison] payload (version "not-a-number") in the
    middle of the workload. The CAS example dead-letters what it cannot parse and acks it:
    pass. The ack-first example acks its batch first, then dies on int(): fail, with the log tail."""
    grades = {}
    # The fault-less cell's "unknown" does not depend on the consumer: shown once, beside the CAS example.
    for base, extra, faults in (("examples/redis_py_cas.toml", "", "poison,none"),
                                ("examples/redis_py_ack_first.toml",
                                 '\n[poison]\nfields = { version = "not-a-number" }\n', "poison")):
        folder = tmp_path / Path(base).stem
        folder.mkdir()
        cfg = small_config(folder, base, extra=extra)
        command = "python -m examples." + Path(base).stem
        done = scorecard("--worker-cmd", command, "--worker-config", str(cfg), "--faults", faults,
                         "--out", str(folder / "out"), "--run-dir", str(folder / "runs"), "--json")
        data = json.loads(done.stdout)
        cells = {c["fault"]: c for c in data["cells"]}
        if "none" in faults:
            assert cells["none"]["properties"]["poison_handled"] == "unknown"      # nothing poison published there
            assert "no poison published in this cell" in cells["none"]["evidence"]["poison_handled"]["evidence"]
        cell = cells["poison:source=config"]
        grades[Path(base).stem] = cell
        assert cell["counts"]["poison_published"] == 1, cell["counts"]
        print(Path(base).stem, cell["properties"]["poison_handled"], cell["evidence"]["poison_handled"]["evidence"][:300])
    cas, ack_first = grades["redis_py_cas"], grades["redis_py_ack_first"]
    assert cas["properties"]["poison_handled"] == "pass", cas["evidence"]["poison_handled"]
    # (a loaded run may dead-letter the poison twice: a CAS batch of 50 that outlasts the 1 s min-idle
    # has it claimed and read again, and each reader dead-letters it; at least once is the promise)
    found = re.search(r"1 read and acked \((\d+) dead-lettered to orders:dlq\), 0 left pending",
                      cas["evidence"]["poison_handled"]["evidence"])
    assert found and int(found[1]) >= 1, cas["evidence"]["poison_handled"]["evidence"]
    assert cas["counts"]["poison_dlq"] >= 1 and cas["counts"]["lost"] == 0 and cas["counts"]["verdict"] == "valid"
    assert ack_first["properties"]["poison_handled"] == "fail", ack_first["evidence"]["poison_handled"]
    evidence = ack_first["evidence"]["poison_handled"]["evidence"]
    assert "died during the run" in evidence and "ValueError" in evidence, evidence
