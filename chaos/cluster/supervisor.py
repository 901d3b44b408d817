"""The process behind `python -m chaos cluster up`: it owns a topology until `cluster down`.

This is the one place where servers outlive the command that asked for them: `up`
starts this supervisor in its own session, the supervisor starts the cluster (whose
servers die with *it*), writes a state file and sleeps until SIGTERM/SIGINT, or, with
`--owner-pid`, until that process has exited (a test killed before its `down` leaves nothing).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from chaos.cluster import start_cluster
from chaos.cluster.errors import config_problem
from chaos.cluster.rundirs import base_dir, process_started
from chaos.errors import EXIT_BAD_ARGS

STATE_DIR = ".cli"


@dataclass
class SupervisorState:
    """What `status` and `down` need, written once the cluster answers."""

    name: str
    backend: str
    pid: int
    create_time: float
    base_dir: str
    api_url: str
    primary: str
    replica: str
    postgres: str
    links: dict[str, str]          # link -> proxy name
    proxies: dict[str, str]        # proxy name -> listen address
    redis_url: str
    pg_dsn: str


def state_path(name: str) -> Path:
    path = base_dir() / STATE_DIR
    path.mkdir(mode=0o755, exist_ok=True)
    return path / f"{name}.json"


def read_state(name: str) -> SupervisorState | None:
    try:
        return SupervisorState(**json.loads(state_path(name).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def owner_watch(pid: int | None) -> Callable[[], bool]:
    """Whether the owner still runs (always, without one): the same pid *and* start time, so a
    reused pid is not taken for the owner."""
    if pid is None:
        return lambda: True
    started = process_started(pid)
    return lambda: started is not None and process_started(pid) == started


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos.cluster.supervisor")
    parser.add_argument("--name", required=True)
    parser.add_argument("--backend", default=None)
    parser.add_argument("--topology", default=None)
    parser.add_argument("--server", default=None)
    parser.add_argument("--owner-pid", type=int, default=None)
    args = parser.parse_args(argv)
    owner = owner_watch(args.owner_pid)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    path = state_path(args.name)
    try:
        cluster = start_cluster(args.backend, f"cli-{args.name}", topology=args.topology, server=args.server)
    except Exception as exc:  # noqa: BLE001 - `up` shows this log
        traceback.print_exc()
        problem = config_problem(exc)
        if problem is None:
            return 1
        print(f"error: {problem}", flush=True)   # `up` prints this line: bad configuration, exit 254
        return EXIT_BAD_ARGS
    try:
        state = SupervisorState(
            name=args.name, backend=cluster.backend, pid=os.getpid(),
            create_time=process_started(os.getpid()) or 0.0, base_dir=str(cluster.base_dir), api_url=cluster.api.url,
            primary=str(cluster.primary), replica=str(cluster.replica), postgres=str(cluster.postgres),
            links=dict(cluster.links), proxies={p: str(cluster.proxy_endpoint(p)) for p in cluster.links.values()},
            redis_url=cluster.redis_url(), pg_dsn=cluster.pg_dsn())
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(state), indent=2))
        tmp.replace(path)
        print(f"cluster {args.name} up; state in {path}", flush=True)
        while not stop.wait(1.0) and owner():
            pass
    finally:
        cluster.close()
        path.unlink(missing_ok=True)
        print(f"cluster {args.name} down", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
