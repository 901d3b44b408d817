"""Regenerate the checker's regression set: real cells run through the orchestrator, each
run's history and final state kept, with what the in-memory checker (read_history + check_run)
said about them. tests/checker/test_regression.py checks that the streaming check gives
byte-identical JSON.

    PYTHONPATH=$PWD python3 tests/checker/regression/generate.py   # about a minute, real servers

Each run becomes `<name>.tar.gz`: history/<process>.jsonl, final_state.json, check.json (the
check_run arguments besides history and final) and expected.json (`CellResult.to_json` of
the run alone). Regenerate only when the checker's meaning changes on purpose.
"""
from __future__ import annotations

import io
import json
import os
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import chaos.strategies  # noqa: E402,F401 - parts load in dependency order
from chaos.checker import check_run, summarize  # noqa: E402
from chaos.cluster import start_cluster  # noqa: E402
from chaos.history import history_files, read_history  # noqa: E402
from chaos.orchestrator import check as checking  # noqa: E402
from chaos.results import FinalState  # noqa: E402
from chaos.run import run_cell  # noqa: E402

HERE = Path(__file__).resolve().parent
ORDERS = "many-orders:keys=100,events=20,cost_ms=0"
# name -> (preset, faults, parts): one cell per part of the checker that matters most
CELLS = {
    "recommended-kill-consumer": ("recommended", ["kill-consumer"], {"workload": ORDERS}),
    "baseline-none": ("baseline", [], {"workload": ORDERS}),
    "s1-promote-replica": ("s1", ["promote-replica:after_entries=500,at_ms=0"], {"workload": ORDERS}),
    "s1-pg-reset-downstream": ("s1", ["pg-reset:stream=downstream"], {}),
    "inbox-pg-reset-downstream": ("inbox", ["pg-reset:stream=downstream"], {}),
    "poison-dlq": ("poison-dlq", [], {}),
    "baseline-long-job": ("baseline:claim=always,claim_idle_ms=300", ["long-job:event_id=e42-1"], {}),
}
ONLY = sys.argv[1:]   # names to regenerate (default: all)


def check_args(kwargs: dict) -> dict:
    return {"run": kwargs.get("run", 0), "unknown_reasons": list(kwargs.get("unknown_reasons", ())),
            "seed": kwargs.get("seed"), "rig_failures": list(kwargs.get("rig_failures", ())),
            "explained": sorted(kwargs.get("explained", ())), "consumers_live": bool(kwargs.get("consumers_live"))}


def expected_json(run_dir: Path, final: FinalState, args: dict) -> dict:
    result = check_run(read_history(run_dir, run=args["run"]), final, **args)
    return summarize([result]).to_json(preset="regression", fault="regression")


def main() -> None:
    saved: dict[Path, tuple[dict, dict]] = {}
    original = checking.check_run

    def keeping(history, final, **kwargs):   # the orchestrator's call, kept beside the run dir
        final.stream_entries, final.events = list(final.stream_entries), list(final.events)   # (read in pages)
        saved[Path(current["dir"])] = (final.to_json(), check_args(kwargs))
        kwargs.pop("observe", None)
        return original(history, final, **kwargs)

    current: dict = {}
    checking.check_run = keeping
    cluster = start_cluster("native", f"regression-{os.getpid()}")
    try:
        for name, (preset, faults, parts) in CELLS.items():
            if ONLY and name not in ONLY:
                continue
            with tempfile.TemporaryDirectory() as tmp:
                root = Path(tmp)
                from chaos.orchestrator import sequence
                real_check = sequence.checking.check

                def check(run, events, faults_, _real=real_check):
                    current["dir"] = run.dir
                    return _real(run, events, faults_)
                sequence.checking.check = check
                try:
                    result = run_cell(cluster, preset, faults, parts=parts, run_root=root, keep_runs="always",
                                      raise_fault_errors=False)
                finally:
                    sequence.checking.check = real_check
                run_dir = Path(result.run_dirs[0])
                final_json, args = saved[run_dir]
                expected = expected_json(run_dir, FinalState.from_json(final_json), args)
                assert expected["per_run"][0] == result.runs[0].to_json() | {"drain_end": None}, name
                pack(HERE / f"{name}.tar.gz", run_dir, final_json, args, expected)
                print(name, result.verdict, result.counts.published, "events",
                      (HERE / f"{name}.tar.gz").stat().st_size // 1024, "KB")
    finally:
        checking.check_run = original
        cluster.close()
        if "chaos.workload.forkserver" in sys.modules:
            sys.modules["chaos.workload.forkserver"].close_fork_server()


def pack(path: Path, run_dir: Path, final: dict, args: dict, expected: dict) -> None:
    with tarfile.open(path, "w:gz", compresslevel=9) as tar:
        for file in history_files(run_dir):
            tar.add(file, arcname=f"history/{file.name}")
        for name, data in (("final_state.json", final), ("check.json", args), ("expected.json", expected)):
            blob = json.dumps(data, sort_keys=name != "final_state.json").encode()   # (its dicts keep their order)
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))


if __name__ == "__main__":
    main()
