"""The command line that replays a cell: one spelling for `chaos run`'s own output, the
Allure report and the matrix page (a leaf: the reports need it without the CLI)."""
from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Mapping


def reproduce_command(preset: str, faults: Iterable[str], parts: Mapping[str, str], runs: int, seed: int,
                      time_scale: float, backend: str | None = None) -> str:
    """`python -m chaos run --preset P --fault F ... --runs N --seed S --time-scale T`, shell-quoted."""
    argv = ["python", "-m", "chaos", "run", "--preset", preset]
    for fault in faults:
        argv += ["--fault", fault]
    for slot, spec in parts.items():
        argv += ["--part", f"{slot}={spec}"]
    argv += ["--runs", str(runs), "--seed", str(seed), "--time-scale", f"{time_scale:g}"]
    if backend:
        argv += ["--backend", backend]
    if os.environ.get("CHAOS_SERVER"):      # set by --server: the replay runs the same server
        argv += ["--server", os.environ["CHAOS_SERVER"]]
    if os.environ.get("CHAOS_TOPOLOGY", "replica") != "replica":   # exported by --topology
        argv += ["--topology", os.environ["CHAOS_TOPOLOGY"]]
    return " ".join(shlex.quote(a) for a in argv)
