"""The path a fault parameter takes through the calls: from the command line and from the fixture.

    python3 bench/spec_path.py cli        # python -m chaos run --preset s1 --fault kill-consumer:at_ms=100 --runs 1
    python3 bench/spec_path.py fixture    # chaos_cell("s1", "kill-consumer:at_ms=100", runs=1) in a pytest session

Runs the cell for real (a native cluster, worker processes) with a profiler on every thread
of this process, and records each call of a function under chaos/ or faults/ that is handed
the fault: an argument (not `self`) that is the fault text, a `Spec` or `CellSpec` holding it,
a `Fault` made from it, or a list, tuple, dataclass (a `Cell`, a `CellRun`) or argparse
namespace holding one of those (a dict
counts only for the objects: the text echoed in a history op or a fault's record is output,
not the parameter).
Consecutive calls in one module are one visit. Prints one JSON object:

* `visits`, `modules`: module visits in call order and the distinct modules;
* `climbs`: a visit to a module of a higher layer than the one before (the layer table of
  docs/INTERFACES.md section 0, tests/structure/test_layers.py's `LAYERS`);
* `returns`: a visit to a module the path had already left;
* `path`: the visits, each `module (layer)`.

Worker processes (across the fork server) are not traced: they get a WorkerSpec, not the fault.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import textwrap
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "structure"))

FAULT = "kill-consumer:at_ms=100"
PRESET = "s1"


def _holds(value: Any, depth: int = 0, in_dict: bool = False) -> bool:
    from chaos.cellspec import CellSpec, Spec
    if isinstance(value, str):      # the text itself; its echo in a history op or a record (a dict) is not
        return not in_dict and FAULT in value
    if isinstance(value, Spec):
        return value.text == FAULT
    if isinstance(value, CellSpec):
        return FAULT in value.fault_texts
    if getattr(type(value), "__module__", "").startswith("faults.") and hasattr(value, "spec") \
            and getattr(value, "name", None) == "kill-consumer":
        return True
    if depth >= 2:
        return False
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_holds(v, depth + 1, in_dict) for v in list(value)[:20])
    if isinstance(value, dict):
        return any(_holds(v, depth + 1, True) for v in list(value.values())[:20])
    if isinstance(value, argparse.Namespace):
        return any(_holds(v, depth + 1, in_dict) for v in vars(value).values())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):   # a Cell, a CellRun, a PlannedRow
        return any(_holds(getattr(value, f.name, None), depth + 1, in_dict) for f in dataclasses.fields(value))
    return False


class Tracer:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.roots = (str(ROOT / "chaos") + os.sep, str(ROOT / "faults") + os.sep)

    def __call__(self, frame: Any, event: str, _arg: Any) -> None:
        if event != "call":
            return
        filename = frame.f_code.co_filename
        if not filename.startswith(self.roots):
            return
        code = frame.f_code
        names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount
                                 + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)]
        args = [frame.f_locals.get(n) for n in names if n not in ("self", "cls")]
        try:
            touched = any(_holds(a) for a in args)
        except Exception:  # noqa: BLE001 - an object mid-construction: not the fault
            touched = False
        if touched:
            module = str(Path(filename).relative_to(ROOT).with_suffix("")).replace(os.sep, ".")
            with self.lock:
                self.calls.append((module.removesuffix(".__init__"), code.co_name))

    def start(self) -> None:
        threading.setprofile(self)
        sys.setprofile(self)

    def stop(self) -> None:
        sys.setprofile(None)
        threading.setprofile(None)


def figures(calls: list[tuple[str, str]]) -> dict[str, Any]:
    from test_layers import RANK, layer_rank, LAYERS
    names = list(LAYERS)
    visits: list[str] = []
    functions: list[list[str]] = []
    for module, function in calls:
        if not visits or visits[-1] != module:
            visits.append(module)
            functions.append([])
        if function not in functions[-1]:
            functions[-1].append(function)
    ranks = [layer_rank(m, RANK) for m in visits]
    climbs = sum(1 for a, b in zip(ranks, ranks[1:]) if a is not None and b is not None and b > a)
    returns = sum(1 for i, m in enumerate(visits) if m in visits[:i])
    return {"visits": len(visits), "modules": len(set(visits)), "climbs": climbs, "returns": returns,
            "path": [f"{m} ({names[r] if r is not None else '?'}): {', '.join(f)}"
                     for m, r, f in zip(visits, ranks, functions)]}


def run_cli(tracer: Tracer) -> int:
    from chaos.cli import main
    tracer.start()
    try:
        return main(["run", "--preset", PRESET, "--fault", FAULT, "--runs", "1", "--json"])
    finally:
        tracer.stop()


TEST = f'''
def test_one_cell(chaos_cell):
    import bench_spec_path_tracer as t
    t.TRACER.start()
    try:
        chaos_cell({PRESET!r}, {FAULT!r}, runs=1, fixed_runs=True, expected=False)
    finally:
        t.TRACER.stop()
'''


def run_fixture(tracer: Tracer) -> int:
    import types

    import pytest
    module = types.ModuleType("bench_spec_path_tracer")
    module.TRACER = tracer            # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    with tempfile.TemporaryDirectory(prefix="spec-path-") as tmp:
        (Path(tmp) / "test_spec_path.py").write_text(textwrap.dedent(TEST))
        (Path(tmp) / "pytest.ini").write_text("[pytest]\n")
        return int(pytest.main([str(Path(tmp) / "test_spec_path.py"), "-q", "-p", "no:cacheprovider",
                                "-p", "no:xdist", "-p", "no:randomly", "--rootdir", tmp]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("edge", choices=("cli", "fixture"))
    args = parser.parse_args()
    tracer = Tracer()
    saved = sys.stdout
    sys.stdout = sys.stderr           # the cell's own output goes to stderr; stdout is the JSON
    try:
        code = run_cli(tracer) if args.edge == "cli" else run_fixture(tracer)
    finally:
        sys.stdout = saved
    out = {"edge": args.edge, "fault": FAULT, "preset": PRESET, "exit": code, **figures(tracer.calls)}
    print(json.dumps(out, indent=2))
    return 0 if code in (0, 1) else code


if __name__ == "__main__":
    sys.exit(main())
