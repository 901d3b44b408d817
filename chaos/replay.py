"""The command line that replays a cell: one spelling for `chaos run`'s own output, the
black-box mode, the Allure report, the matrix page and the pytest summary (a leaf: the
reports need it without the CLI).

Every option that shapes a run is written out, including the ones that came from the
environment ($CHAOS_BACKEND, $CHAOS_TOPOLOGY, $CHAOS_SERVER, read at the edge and passed here
as values: a CellSpec's `backend`, `topology`, `server`, filled from the cluster the cell ran
on): the replay must not depend on the shell it is pasted into, and nothing here reads it.
A backend or topology not given is the default (`native`, `replica`); ``--server`` is left
out when none was named (the server is then whatever binary $CHAOS_REDIS_SERVER or PATH
gives, which no option says).
"""
from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping

DEFAULT_BACKEND, DEFAULT_TOPOLOGY = "native", "replica"


def reproduce_command(preset: str, faults: Iterable[str], parts: Mapping[str, str], runs: int, seed: int,
                      time_scale: float, backend: str | None = None, *, topology: str | None = None,
                      server: str | None = None) -> str:
    """`python -m chaos run --preset P --fault F ... --runs N --seed S --time-scale T --backend B
    --topology X [--server V]`, shell-quoted."""
    replaced = [a for slot, spec in parts.items() for a in ("--part", f"{slot}={spec}")]
    return _command(["--preset", preset], faults, runs, seed, time_scale, backend, replaced, topology, server)


def blackbox_command(worker_cmd: str, worker_config: str, faults: Iterable[str], runs: int, seed: int,
                     time_scale: float, backend: str | None = None, *, topology: str | None = None,
                     server: str | None = None) -> str:
    """The same for a black-box cell: `python -m chaos run --worker-cmd CMD --worker-config FILE ...`."""
    return _command(["--worker-cmd", worker_cmd, "--worker-config", worker_config], faults, runs, seed,
                    time_scale, backend, topology=topology, server=server)


def _command(what: list[str], faults: Iterable[str], runs: int, seed: int, time_scale: float,
             backend: str | None, parts: list[str] = (), topology: str | None = None,
             server: str | None = None) -> str:
    argv = ["python", "-m", "chaos", "run", *what]
    for fault in faults:
        if fault and fault != "none":
            argv += ["--fault", fault]
    argv += parts
    argv += ["--runs", str(runs), "--seed", str(seed), "--time-scale", f"{time_scale:g}"]
    argv += ["--backend", backend or DEFAULT_BACKEND, "--topology", topology or DEFAULT_TOPOLOGY]
    if server:      # set by --server: the replay runs the same server
        argv += ["--server", server]
    return " ".join(shlex.quote(a) for a in argv)
