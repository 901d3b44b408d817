"""`python -m chaos cluster up|status|down`: a topology to poke at by hand.

`up` starts a supervisor process (chaos/cluster/supervisor.py) that owns the servers
and outlives the command; `down` stops it, and with it everything `up` started.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from chaos.errors import EXIT_BAD_ARGS, EXIT_INTERNAL, BadArguments

UP_TIMEOUT_S = 90.0
DOWN_TIMEOUT_S = 30.0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from chaos.cluster import BACKENDS

    parser = subparsers.add_parser("cluster", help="start, inspect or stop a topology by hand")
    commands = parser.add_subparsers(dest="cluster_command", required=True)
    up = commands.add_parser("up", help="start a topology that outlives this command (until `cluster down`)")
    up.add_argument("--backend", choices=BACKENDS, default=None, help="default: $CHAOS_BACKEND or native")
    up.add_argument("--server", default=None, help="redis | valkey (default: $CHAOS_SERVER, else redis-server)")
    up.add_argument("--topology", default=None, help="replica (default) | sentinel[:k=v,...] (default: $CHAOS_TOPOLOGY)")
    up.add_argument("--owner-pid", type=int, default=None, metavar="PID",
                    help="go down by itself once process PID has exited (a script or test that may be "
                         "killed before its `cluster down`)")
    status = commands.add_parser("status", help="endpoints, replication state and proxies")
    down = commands.add_parser("down", help="stop everything `cluster up` started")
    for command in (up, status, down):
        command.add_argument("--name", default="default", help="several topologies can be up under different names")
        command.add_argument("--json", action="store_true", help="print one JSON object")
    up.set_defaults(func=run_up)
    status.set_defaults(func=run_status)
    down.set_defaults(func=run_down)


def run_up(args: argparse.Namespace) -> int:
    from chaos.cluster.supervisor import state_path

    backend = args.backend      # read and checked at the edge (chaos.cli._check_topology_options)
    if (state := _live_state(args.name)) is not None:
        raise BadArguments(f"cluster {args.name!r} is already up (supervisor pid {state.pid}): "
                           f"run `python -m chaos cluster down --name {args.name}` first, or pick another --name")
    owner = _owner(args.owner_pid)
    path = state_path(args.name)
    path.unlink(missing_ok=True)
    log = path.with_suffix(".log")
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    with open(log, "wb") as out:
        where = ["--topology", args.topology] + (["--server", args.server] if args.server else []) + owner
        proc = subprocess.Popen([sys.executable, "-m", "chaos.cluster.supervisor", "--name", args.name,
                                 "--backend", backend, *where], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)   # outlives us: that is its job
    deadline = time.monotonic() + UP_TIMEOUT_S
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            return _not_up(args.name, proc, log)
        time.sleep(0.02)
    return run_status(args)


def _owner(pid: int | None) -> list[str]:
    """The supervisor's `--owner-pid` arguments; a pid that names no running process is refused
    here, not found out by a cluster that goes down at once."""
    if pid is None:
        return []
    from chaos.cluster.rundirs import process_started

    if pid <= 0 or process_started(pid) is None:
        raise BadArguments(f"--owner-pid {pid}: no such process is running; give the pid of the script or "
                           f"test that owns the cluster (e.g. $$ in a shell), or leave --owner-pid out")
    return ["--owner-pid", str(pid)]


def _not_up(name: str, proc: subprocess.Popen, log: Path) -> int:
    """The supervisor exited (or hung): its one-line bad-configuration error (exit 254), else
    one line naming its log, which holds the traceback (exit 255)."""
    if proc.poll() is None:
        proc.terminate()
        proc.wait(DOWN_TIMEOUT_S)
    lines = log.read_text(errors="replace").splitlines()
    said = [line for line in lines if line.startswith("error: ")]
    if proc.returncode == EXIT_BAD_ARGS and said:
        log.unlink(missing_ok=True)
        raise BadArguments(said[-1][len("error: "):])
    last = next((line for line in reversed(lines) if line.strip()), "(no output)")
    print(f"internal error: cluster {name!r} did not come up ({last.strip()}); the supervisor's log with "
          f"the traceback: {log}", file=sys.stderr)
    return EXIT_INTERNAL


def run_status(args: argparse.Namespace) -> int:
    from chaos.cluster.supervisor import read_state

    state = read_state(args.name)
    if state is None:
        raise BadArguments(f"no cluster {args.name!r} is up: start one with `python -m chaos cluster up`")
    if _live_state(args.name) is None:
        raise BadArguments(f"cluster {args.name!r}: its supervisor (pid {state.pid}) is gone; "
                           f"run `python -m chaos cluster down --name {args.name}` to clean up")
    report = {**asdict(state), "server": _server(state), "replication": _replication(state),
              "proxy_state": _proxies(state)}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    server = report["server"]
    print(f"cluster {state.name} ({state.backend}, {server['server']} {server['version']}), "
          f"supervisor pid {state.pid}, dir {state.base_dir}")
    print(f"  redis primary {state.primary}   replica {state.replica}   postgres {state.postgres}")
    print(f"  through proxies: {state.redis_url}   {state.pg_dsn}")
    print(f"  proxy API {state.api_url}")
    for node, info in report["replication"].items():
        if "error" in info:
            print(f"  {node:8} {info['error']}")
        else:
            print(f"  {node:8} role={info.get('role')} link={info.get('master_link_status', '-')} "
                  f"offset={info.get('master_repl_offset', info.get('slave_repl_offset'))}")
    for name, proxy in report["proxy_state"].items():
        print(f"  proxy {name:12} {proxy['listen']:>21} -> {proxy['upstream']:21} "
              f"{'enabled' if proxy['enabled'] else 'DISABLED'} toxics={len(proxy.get('toxics') or [])}")
    return 0


def run_down(args: argparse.Namespace) -> int:
    from chaos.cluster.supervisor import read_state, state_path

    state = read_state(args.name)
    if state is None:
        raise BadArguments(f"no cluster {args.name!r} is up (nothing to stop)")
    if (live := _live_state(args.name)) is not None:
        import psutil
        supervisor = psutil.Process(live.pid)
        supervisor.send_signal(signal.SIGTERM)
        try:
            supervisor.wait(DOWN_TIMEOUT_S)
        except psutil.TimeoutExpired:
            supervisor.kill()                     # its servers follow through the parent-death signal
    state_path(args.name).unlink(missing_ok=True)
    state_path(args.name).with_suffix(".log").unlink(missing_ok=True)
    from chaos.cluster.rundirs import sweep
    sweep()
    print(json.dumps({"name": args.name, "stopped": True}) if args.json else f"cluster {args.name} stopped")
    return 0


def _live_state(name: str):
    """The state of a running supervisor (pid alive with the recorded start time), else None."""
    from chaos.cluster.rundirs import same_process
    from chaos.cluster.supervisor import read_state

    state = read_state(name)
    return state if state is not None and same_process(state.pid, state.create_time) else None


def _server(state) -> dict[str, str]:
    """Which server (redis | valkey) and version the primary runs."""
    from chaos.cluster.endpoint import Endpoint
    from chaos.cluster.redis_server import admin_client
    from chaos.cluster.servers import info_server

    endpoint = Endpoint.parse(state.primary)
    try:
        with admin_client(endpoint.host, endpoint.port) as client:
            return info_server(client.info("server"))
    except Exception as exc:  # noqa: BLE001 - a status report shows what is wrong
        return {"server": "unknown", "version": f"unreachable at {state.primary}: {exc}"}


def _replication(state) -> dict[str, dict]:
    from chaos.cluster.endpoint import Endpoint
    from chaos.cluster.redis_server import admin_client

    keys = ("role", "master_link_status", "master_repl_offset", "slave_repl_offset", "connected_slaves",
            "master_host", "master_port")
    out = {}
    for node, address in (("primary", state.primary), ("replica", state.replica)):
        endpoint = Endpoint.parse(address)
        try:
            with admin_client(endpoint.host, endpoint.port) as client:
                info = client.info("replication")
            out[node] = {k: info[k] for k in keys if k in info}
        except Exception as exc:  # noqa: BLE001 - a status report shows what is wrong
            out[node] = {"error": f"unreachable at {address}: {exc}"}
    return out


def _proxies(state) -> dict[str, dict]:
    from chaos.proxy.client import ToxiproxyClient, ToxiproxyError

    client = ToxiproxyClient(state.api_url, timeout=2.0)
    try:
        return client.proxies()
    except ToxiproxyError as exc:
        return {"(api)": {"listen": "-", "upstream": str(exc), "enabled": False}}
    finally:
        client.close()
