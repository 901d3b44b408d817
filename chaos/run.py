"""The orchestrator: run one preset x faults cell N times, each run checked on its own.

One run: reset the state (truncate + flush, fast), create the groups and the rows,
start the consumers as real OS processes (fork server) on their own proxies and wait
until each blocks in XREADGROUP, arm the faults, start the producers, watch every
process, wait for the workload to go quiet, heal the faults, drain with XAUTOCLAIM
recovery (bounded and scaled), stop the workers, read the FinalState and call the
checker. A worker that dies without a fault or failpoint having killed it makes the
run's verdict `unknown`, with its exit signal and log tail in the reasons.

The rig vouches for itself: a watch thread checks the cluster's servers and proxies and
the worker fork server throughout the run (chaos/cluster/health.py). A component that
died, stopped or stopped answering when no configured fault may take it down
(``Fault.takes_down``), or an error of the orchestrator's own Redis or PostgreSQL
connection, is a rig failure: the run ends at once (no drain, no waiting out a bound),
its verdict is `unknown` with the component named in ``rig_failures``, and it still gets
a RunResult (empty counts when the final state cannot be read).
"""
from __future__ import annotations

import bisect
import errno
import itertools
import json
import os
import random
import shutil
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psycopg
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from chaos.checker import HANDLED_EFFECTS, check_run, summarize
from chaos.cluster.health import rig_problems
from chaos.cluster.rundirs import runs_dir
from chaos.proxy.client import ToxiproxyError
from chaos.errors import BadArguments
from chaos.history import HistoryWriter, op_time, read_history
from chaos.results import CellResult, Counts, FinalState, Phase, RunMetrics, RunResult
from chaos.strategies.delivery.base import GROUP
from chaos.strategies.plan import CONSUMER, PRODUCER, ProcessPlan
from chaos.strategies.presets import Strategy, resolve
from chaos.workload import failpoints as fp
from chaos.workload import schema
from chaos.workload.env import ready_marker
from chaos.events import Event
from chaos.workload.final_state import fully_acked, pending_entries, read_final_state, undelivered
from chaos.workload.forkserver import Child, fork_server
from chaos.workload.procutil import describe_exit, tail
from chaos.workload.progress import ProgressWatch
from faults.context import FaultContextBase

TERMINATING = {signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGQUIT}
CONSUMER_FAILPOINTS = {"after_read", "mid_batch", "before_apply", "in_work", "before_lock", "before_commit",
                       "after_commit", "after_apply_before_ack"}
PRODUCER_FAILPOINTS = {"before_publish"}
ROLE_FAILPOINTS = {"dispatcher": {"before_publish", "after_xadd_before_mark", "after_publish_fail"},
                   "outbox-producer": {"before_publish"}}
POLL_S = 0.005
DONE_EVERY_MAX_S = 0.1      # a phase's end condition, while the run is busy, is asked at least this often
READY_TIMEOUT_S = 15.0
STOP_GRACE_S = 2.0
STALL_S = 10.0              # no useful op for this long (plus the longest job, x3) past the bound: stalled
FLOOR_EVENTS_PER_S = 200.0  # the workload's first bound allows at least this slow a run
FOLLOW_RETRY_S = 5.0        # how long a Redis call waits for a primary to answer (a failover's downtime)
FOLLOW_RETRY_EVERY_S = 0.005
CALL_TIMEOUT_S = 10.0       # the orchestrator's own Redis/PostgreSQL calls: a stopped server cannot hang a run
RIG_CHECK_EVERY_S = 0.05    # process checks of the rig (a poll and a /proc read per server)
RIG_PROBE_EVERY_S = 2.0     # network probes of the rig (PING, SELECT 1, the proxy API)
RIG_CONFIRM_S = 3.0         # a failed probe is repeated with this timeout before it names anything
RIG_JOIN_S = 5.0            # how long a fault thread may take to wind down once the rig failed


class PrimaryRedis:
    """The orchestrator's Redis client: every call goes to the node that is the primary at
    that moment (a failover moves it), and a refused connection is retried for a bounded
    time (between a primary's kill and the promotion no node answers). One client is kept
    per address, so polling costs no reconnect."""

    def __init__(self, cluster: Any, retry_s: float = FOLLOW_RETRY_S) -> None:
        self._cluster, self._retry_s = cluster, retry_s
        self._clients: dict[str, redis.Redis] = {}
        self._gone = False

    def client(self) -> redis.Redis:
        """The current primary's client, without retries (for a poll that may say "not yet")."""
        if self._gone:
            raise redis.ConnectionError("the Redis primary failed under the run (a rig failure): not asked again")
        address = str(self._cluster.primary)
        client = self._clients.get(address)
        if client is None:
            client = self._clients[address] = self._cluster.direct_redis("primary")
            # redis-py's own retries back off up to ~4 s against a node a failover just killed,
            # while the promoted one already answers: retry here, on the primary of the moment
            client.set_retry(Retry(NoBackoff(), 0))
            client.connection_pool.connection_kwargs.update(socket_timeout=CALL_TIMEOUT_S,
                                                            socket_connect_timeout=CALL_TIMEOUT_S)
        return client

    def give_up(self) -> None:
        """No more retrying (the rig failed: a dead server does not come back within the run)."""
        self._retry_s = 0.0

    def disconnect(self) -> None:
        """Close every connection, in use or not, and refuse new calls: a call blocked on a
        stopped primary returns, and none waits on it again."""
        self._gone = True
        for client in list(self._clients.values()):
            try:
                client.connection_pool.disconnect()
            except Exception:  # noqa: BLE001 - best effort: the call then ends at its own timeout
                pass

    def __getattr__(self, name: str) -> Any:
        if not callable(getattr(redis.Redis, name, None)):
            return getattr(self.client(), name)

        def call(*args: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            while True:
                try:
                    return getattr(self.client(), name)(*args, **kwargs)
                except (redis.ConnectionError, redis.TimeoutError):
                    if time.monotonic() > started + self._retry_s:     # give_up() ends it at once
                        raise
                    time.sleep(FOLLOW_RETRY_EVERY_S)
        return call

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()


@dataclass
class WorkerHandle:
    """A running worker process (docs/INTERFACES.md section 7): name, pid, links, kill, alive."""

    name: str
    plan: ProcessPlan
    links: Any
    child: Child
    log: Path
    expected_exit: bool = False
    stopping: bool = False
    accounted: bool = False
    drain_signalled: bool = False

    @property
    def pid(self) -> int:
        return self.child.pid

    @property
    def role(self) -> str:
        return self.plan.role

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send `sig`; a terminating signal makes the coming exit expected (a fault's doing)."""
        if sig in TERMINATING:
            self.expected_exit = True
        self.child.kill(sig)

    def alive(self) -> bool:
        return self.child.alive()


class RunContext(FaultContextBase):
    """The FaultContext of one run (docs/INTERFACES.md section 7); scale, sleep and resume
    are the one fault context base's (faults/context.py)."""

    def __init__(self, run: _Run) -> None:
        self._run = run
        self.cluster = run.cell.cluster
        self.rng = random.Random(f"fault:{run.seed}")
        self.stop_event = run.stop_event
        self.time_scale = run.cell.time_scale
        self.run_dir = run.dir

    def workers(self, role: str) -> list[WorkerHandle]:
        """Live and dead incarnations' latest handles by role, kind or process name."""
        handles = list(self._run.current.values())
        return [h for h in handles if role in (h.plan.role, h.plan.kind, h.name, h.plan.name)]

    def wait_failpoint(self, name: str, timeout_ms: float) -> tuple[WorkerHandle, dict]:
        from faults.interface import FaultError
        deadline = time.monotonic() + self.scale(timeout_ms) + 1.0
        directory = fp.failpoint_dir(self.run_dir)
        while time.monotonic() < deadline:
            for marker in sorted(directory.glob(f"*.{name}")) if directory.is_dir() else []:
                process = marker.name[: -len(name) - 1]
                info = json.loads(marker.read_text() or "{}")
                marker.unlink()
                handle = self._run.current.get(process)
                if handle is not None:
                    return handle, info
            time.sleep(POLL_S)
        raise FaultError(f"no worker reached failpoint {name!r} within {timeout_ms} ms "
                         f"(is it armed with action=signal for the right role?)")

    def record(self, phase: str, **value: Any) -> None:
        self._run.nemesis.op("info", "fault", value={"phase": phase, **value})


def _work_metrics(history: list[dict]) -> tuple[int, float | None, list[dict]]:
    """Events handled, seconds from the first publish to the last effect, and the fault ops:
    one pass over the history (10^5 events: 6 x 10^5 ops)."""
    first = next((op["time"] for op in history if op["f"] == "publish"), None)
    handled: set[str] = set()
    add = handled.add
    faults: list[dict] = []
    last = None
    for op in history:
        f = op["f"]
        if f == "apply":
            if op["type"] == "ok" and op.get("effect") in HANDLED_EFFECTS:
                add(op.get("event_id"))
                last = op["time"]
        elif f == "fault":
            faults.append(op)
    return len(handled), (last - first) if first is not None and last is not None else None, faults


def fault_phases(history: list[dict], run: int) -> list[Phase]:
    """`fault:<name>` phases from the nemesis's fault ops: from a fault's start op to its stop
    op (a fault with no stop, such as a SIGKILL, lasts an instant); a fault started twice
    (nemesis steps) gives one phase per start."""
    phases: list[Phase] = []
    open_at: dict[str, float] = {}
    for op in history:
        if op["f"] != "fault":
            continue
        value = op.get("value")
        if not isinstance(value, dict) or not value.get("name"):
            continue
        name, step = value["name"], value.get("phase")
        if step == "start":
            if name in open_at:
                phases.append(Phase(run, f"fault:{name}", open_at[name], open_at[name]))
            open_at[name] = op["time"]
        elif step == "stop" and name in open_at:
            phases.append(Phase(run, f"fault:{name}", open_at.pop(name), op["time"]))
    phases += [Phase(run, f"fault:{name}", t, t) for name, t in open_at.items()]
    return phases


def late_fault_notes(history: list[dict], t0: float, faults: list[dict] | None = None) -> list[str]:
    """A sentence for each fault that started when the workload had nothing left in flight:
    every publish done and every published event acked (or dead-lettered) before it. Such a
    fault tests nothing, and a silent `valid` would say the strategy survived it. (`faults`:
    the history's fault ops, when already picked out.)"""
    if faults is None:
        faults = [op for op in history if op.get("f") == "fault"]
    starts = [op["time"] for op in faults if isinstance(op.get("value"), dict) and op["value"].get("phase") == "start"]
    if not starts:
        return []
    # (sorted by time: a publish after the latest start means none was late, the usual case;
    # it is found a few ops after that start, and the full pass below is skipped)
    after = bisect.bisect_right(history, max(starts), key=op_time)
    if any(op.get("f") == "publish" for op in itertools.islice(history, after, None)):
        return []
    publish_times = [op["time"] for op in history if op.get("f") == "publish"]
    if not publish_times:
        return []
    last_publish = max(publish_times)
    unsettled: set[Any] = set()
    settled: set[Any] = set()
    open_applies = 0
    notes = []
    for op in history:  # sorted by time (read_history)
        f, kind, value = op.get("f"), op.get("type"), op.get("value")
        if f == "publish" and kind == "ok" and op.get("event_id") not in settled:
            unsettled.add(op.get("event_id"))
        elif f in ("ack", "dlq") and kind == "ok":
            unsettled.discard(op.get("event_id"))
            settled.add(op.get("event_id"))
        elif f == "apply":
            open_applies = max(0, open_applies + (1 if kind == "invoke" else -1))
        elif (f == "fault" and isinstance(value, dict) and value.get("phase") == "start"
              and op["time"] > last_publish and not unsettled and not open_applies):
            notes.append(f"{value.get('name')} fired after the workload ended (at {op['time'] - t0:.1f} s; "
                         f"last publish at {last_publish - t0:.1f} s): raise the workload's size or fire earlier")
    return notes


class _Cell:
    """What stays the same across the runs of one cell."""

    def __init__(self, cluster: Any, strategy: Strategy, fault_specs: list[Any], time_scale: float,
                 failpoints: dict[str, dict], root: Path, trace: Callable[[str], None] | None,
                 workload_bound_s: float | None = None, stall_s: float | None = None) -> None:
        self.cluster, self.strategy, self.fault_specs = cluster, strategy, fault_specs
        self.workload_bound_s, self.stall_s = workload_bound_s, stall_s
        self.time_scale, self.extra_failpoints, self.root, self.trace = time_scale, failpoints, root, trace
        self.streams = strategy.delivery.streams()
        self.job = {"guard": strategy.guard.to_spec(), "ack": strategy.ack.to_spec()}
        self.consumer_plans = strategy.delivery.plans(self.job)
        for plan in self.consumer_plans:
            plan.respawn = plan.respawn or strategy.delivery.respawn
            plan.respawn_ms = strategy.delivery.respawn_ms
        self._conn = None
        self.redis = PrimaryRedis(cluster)
        # rig components the configured faults may kill or stop (not a rig failure when they do)
        self.spared: set[str] = set().union(*(f.takes_down for f in self.new_faults()))
        self.pg_gone = False      # PostgreSQL failed under a run: not asked again

    def conn(self):
        if self.pg_gone:
            raise psycopg.OperationalError("PostgreSQL failed under the run (a rig failure): not asked again")
        if self._conn is None or self._conn.closed:
            self._conn = self.cluster.pg_connect(connect_timeout=int(CALL_TIMEOUT_S))
        return self._conn

    def pg(self, call: Callable[[Any], Any]) -> Any:
        """``call(conn)`` on the orchestrator's connection; a connection the server closed (a
        terminated backend) is opened again once: the orchestrator's own reads are idempotent.
        A server that is gone fails the new connect too, and that error propagates."""
        try:
            return call(self.conn())
        except (psycopg.OperationalError, psycopg.InterfaceError):
            if self._conn is not None and not (self._conn.closed or self._conn.broken):
                raise
            self._conn = None
            return call(self.conn())

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self.redis.close()

    def plan_roles(self, producer_plans: list[ProcessPlan]) -> dict[str, list[str]]:
        roles: dict[str, list[str]] = {}
        for plan in self.consumer_plans + producer_plans:
            for role in {plan.kind, plan.role}:
                roles.setdefault(role, []).append(plan.name)
            if plan.helpers:
                roles.setdefault("worker", []).extend(plan.helpers)
        return roles

    def new_faults(self) -> list[Any]:
        from faults.registry import get_fault
        return [get_fault(s) if isinstance(s, str) else type(s)(**s.given) for s in self.fault_specs]


def _merge_failpoints(sources: list[dict[str, dict]], keys: set[str]) -> dict[str, dict]:
    merged: dict[str, dict] = {}
    for source in sources:
        for target, points in source.items():
            if target in keys:
                merged.update(points)
    return merged


class RigWatch:
    """The rig's health during one run, checked from a thread of its own (so an orchestrator
    call blocked on a stopped server does not blind it): process checks every
    RIG_CHECK_EVERY_S, network probes every RIG_PROBE_EVERY_S (a failed probe is confirmed
    with a longer timeout before it names anything). A finding ends the run: the faults'
    stop event is set, the orchestrator's Redis client stops retrying and a PostgreSQL
    connection to a broken server is shut, so a call blocked on it returns."""

    def __init__(self, run: "_Run") -> None:
        self.run = run
        self.failures: list[str] = []
        self.failed = threading.Event()
        self.forks: Any = None          # the run's ForkServer, once it is used
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"rig-watch-{self.run.index}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(RIG_CONFIRM_S + 5)

    def _loop(self) -> None:
        probed = time.monotonic()
        while not self._stop.wait(RIG_CHECK_EVERY_S) and not self.failed.is_set():
            deep = time.monotonic() - probed >= RIG_PROBE_EVERY_S
            if deep:
                probed = time.monotonic()
            try:
                self.check(deep=deep)
            except Exception:  # noqa: BLE001 - a check that breaks must not end the run; the next one runs
                pass

    def problems(self, deep: bool = False) -> list[str]:
        """What is wrong now ([] when sound); probes only when ``deep``, confirmed before naming."""
        cell = self.run.cell
        found = rig_problems(cell.cluster, cell.spared, remote=False)    # exact and cheap; probes below, confirmed
        forks = self.forks
        if forks is not None and forks._proc is not None and not forks.alive():
            found.append(f"worker fork server (pid {forks._proc.pid}) died: "
                         f"{describe_exit(forks._proc.returncode)}; log tail:\n"
                         f"(it writes to the orchestrator's stderr; its workers died with it)")
        full = disk_full(self.run.dir)
        if full:
            found.append(full)
        if deep and not found and rig_problems(cell.cluster, cell.spared, deep=True):
            time.sleep(0.2)
            found = rig_problems(cell.cluster, cell.spared, deep=True, timeout=RIG_CONFIRM_S)
        return found

    def check(self, deep: bool = False) -> list[str]:
        found = self.problems(deep)
        if found:
            self.record(found)
        return found

    def record(self, found: list[str]) -> None:
        with self._lock:
            known = {f.split("; log tail:")[0] for f in self.failures}
            new = [f for f in found if f.split("; log tail:")[0] not in known]
            self.failures += new
        if not new:
            return
        run = self.run
        self.failed.set()
        run.stop_event.set()
        run.cell.redis.give_up()
        if any(f.startswith("PostgreSQL") for f in new):
            run.cell.pg_gone = True
            _shut(run.cell._conn)
        if any(f.startswith("Redis") and "(primary)" in f.split(";")[0] for f in new):
            run.cell.redis.disconnect()

    def final_state_source(self) -> str:
        """The failure of a server the final state is read from (the primary, PostgreSQL), or ''."""
        return next((f.split("; log tail:")[0] for f in self.failures
                     if f.startswith("PostgreSQL") or (f.startswith("Redis") and "(primary)" in f)), "")


def disk_full(path: Path, error: BaseException | None = None) -> str:
    """'' unless the file system of the run dir has no block left (for anyone, root included):
    workers then lose history lines and the checker would judge an incomplete history."""
    try:
        st = os.statvfs(path)
    except OSError:
        return ""
    if st.f_bfree and error is None:
        return ""
    size_kb = st.f_blocks * st.f_frsize // 1024
    what = f"{type(error).__name__}: {error}" if error is not None else os.strerror(errno.ENOSPC)
    return (f"run dir {path} full: {what} ({st.f_bfree * st.f_frsize // 1024} of {size_kb} KB free); "
            f"log tail:\n(free space where run dirs go: --run-dir or CHAOS_RUNS_DIR)")


def _no_space(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno == errno.ENOSPC


def _shut(conn: Any) -> None:
    """Shut the socket under a psycopg connection: a call blocked on a stopped server returns
    (with an OperationalError) instead of waiting for ever."""
    try:
        if conn is None or conn.closed:
            return
        sock = socket.socket(fileno=os.dup(conn.pgconn.socket))
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()
    except Exception:  # noqa: BLE001 - best effort: the call then ends at its own timeout
        pass


class _RigFailed(Exception):
    """The rig failed (the strings are in RigWatch.failures): end the run now."""


# What the orchestrator's own calls raise when the rig under them breaks.
RIG_ERRORS = (_RigFailed, redis.ConnectionError, redis.TimeoutError, psycopg.OperationalError,
              psycopg.InterfaceError, ToxiproxyError)


class _Run:
    """One run of a cell (see the module doc for the phases)."""

    def __init__(self, cell: _Cell, index: int, seed: int,
                 workload: tuple[list[Event], list[ProcessPlan]] | None = None) -> None:
        self.cell, self.index, self.seed = cell, index, seed
        self.workload = workload   # (events, producer plans) of this seed, when already made
        self.dir = cell.root / f"run-{index:03d}"
        self.stop_event = threading.Event()
        self.current: dict[str, WorkerHandle] = {}
        self.handles: list[WorkerHandle] = []
        self.reasons: list[str] = []
        self.fault_errors: list[str] = []
        self.respawns: list[tuple[float, WorkerHandle]] = []
        self.incarnation: dict[str, int] = {}
        self.phases: list[Phase] = []
        self.notes: list[str] = []
        self.rig = RigWatch(self)
        self.progress: ProgressWatch | None = None   # tails the history from the workload on
        self.drain_end = ""        # why the drain ended (what explains the entries it left)

    def log_op(self, value: dict) -> None:
        """An orchestrator info op; a full run dir is a rig failure, not a crash."""
        try:
            self.orchestrator.op("info", "log", value=value)
        except OSError as exc:
            self.disk_full_or_raise(exc)

    @property
    def rig_failures(self) -> list[str]:
        return self.rig.failures

    def raise_if_rig_failed(self) -> None:
        if self.rig.failed.is_set():
            raise _RigFailed("; ".join(f.split("; log tail:")[0] for f in self.rig.failures))

    def disk_full_or_raise(self, exc: OSError) -> None:
        """A full run-dir disk is a rig failure; any other OSError is the framework's own."""
        if not _no_space(exc):
            raise exc
        self.rig.record([disk_full(self.dir, exc)])

    def rig_error(self, exc: BaseException, where: str) -> None:
        """An orchestrator call failed under the rig: name the broken component (a confirmed
        probe), else the connection itself."""
        if isinstance(exc, _RigFailed):
            return
        if self.rig.check(deep=True):
            return
        if isinstance(exc, ToxiproxyError):
            name = "proxy server (its API, asked by the orchestrator)"
        elif isinstance(exc, redis.RedisError):
            name = "Redis primary (the orchestrator's connection)"
        else:
            name = "PostgreSQL (the orchestrator's connection)"
        self.rig.record([f"{name} failed during the {where}: {type(exc).__name__}: {str(exc).strip()[:500]}; "
                         f"log tail:\n(the server itself answers its probe)"])

    # -- state -------------------------------------------------------------------------
    def reset_state(self, events: list[Event]) -> None:
        cluster = self.cell.cluster
        if getattr(cluster, "failed_over", False):
            cluster.reset()  # a failover changed the topology: the slow, full reset
            self.cell._conn = None
        r = self.cell.redis
        r.flushall()
        guard = self.cell.strategy.guard

        def prepare(conn: Any) -> None:
            schema.ensure_schema(conn)
            if guard.schema:
                conn.execute(guard.schema)
            schema.truncate_all(conn)
            if guard.seeds_rows:
                schema.seed_rows(conn, {e.key for e in events})
        self.cell.pg(prepare)
        for stream in self.cell.streams:
            r.xgroup_create(stream, GROUP, id="0", mkstream=True)

    # -- processes ---------------------------------------------------------------------
    def spawn(self, plan: ProcessPlan, *, t0: float, name: str | None = None, failpoints: bool = True,
              gate: bool = False) -> WorkerHandle:
        cell = self.cell
        name = name or plan.name
        links = cell.cluster.worker_links(plan.name)
        keys = {plan.kind, plan.role, plan.name}
        sources = self.fault_failpoints + [cell.extra_failpoints]
        spec = {**plan.spec, "role": plan.role, "name": name, "run_dir": str(self.dir),
                "redis_url": links.redis_url, "pg_dsn": links.pg_dsn, "time_scale": cell.time_scale,
                "sentinels": list(links.sentinels), "master_name": links.master_name,
                "seed": self.seed, "t0": t0, "gate": gate,
                "failpoints": _merge_failpoints(sources, keys) if failpoints else {}}
        if plan.helpers:
            spec["worker_links"] = {}
            for helper in plan.helpers:
                hl = cell.cluster.worker_links(helper)
                spec["worker_links"][helper] = {
                    "redis_url": hl.redis_url, "pg_dsn": hl.pg_dsn,
                    "failpoints": _merge_failpoints(sources, {"worker", "consumer", helper}) if failpoints else {}}
        log = self.dir / "logs" / f"{name}.log"
        forks = fork_server()
        if self.rig.forks is None:
            self.rig.forks = forks
        child = forks.spawn(spec, log)
        handle = WorkerHandle(name, plan, links, child, log)
        self.handles.append(handle)
        self.current[plan.name] = handle
        self.log_op({"spawned": name, "pid": child.pid, "role": plan.role})
        return handle

    def blocked_readers(self, r: Any = None) -> int:
        clients = (r or self.cell.redis).client_list()
        return sum(1 for c in clients if c.get("cmd") == "xreadgroup" and "b" in c.get("flags", ""))

    def wait_ready(self, handle: WorkerHandle, blocked: int) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while self.blocked_readers() < blocked:
            self.raise_if_rig_failed()
            if not handle.alive() or time.monotonic() > deadline:
                raise _RunAborted(f"{handle.name} never started reading ({describe_exit(handle.child.exitcode)}); "
                                  f"log tail:\n{tail(handle.log)}")
            time.sleep(POLL_S)

    def wait_gated(self, handles: list[WorkerHandle]) -> None:
        """Until every gated worker waits for its start signal."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        for handle in handles:
            while not ready_marker(self.dir, handle.name).exists():
                self.raise_if_rig_failed()
                if not handle.alive() or time.monotonic() > deadline:
                    raise _RunAborted(f"{handle.name} never got ready ({describe_exit(handle.child.exitcode)}); "
                                      f"log tail:\n{tail(handle.log)}")
                time.sleep(POLL_S / 5)

    def _killed_by_failpoint(self, handle: WorkerHandle) -> bool:
        directory = fp.failpoint_dir(self.dir)
        names = [handle.name, *handle.plan.helpers]
        return directory.is_dir() and any(any(directory.glob(f"{n}.*.kill")) for n in names)

    def check_deaths(self) -> None:
        now = time.monotonic()
        for handle in list(self.handles):
            if handle.accounted or handle.alive():
                continue
            handle.accounted = True
            code = handle.child.exitcode
            if handle.stopping:
                continue
            if handle.plan.kind == PRODUCER and code == 0:
                continue
            killed = handle.expected_exit or self._killed_by_failpoint(handle)
            self.log_op({"exited": handle.name, "how": describe_exit(code), "expected": killed})
            if killed:
                if handle.plan.respawn:
                    delay = self.cell.time_scale * handle.plan.respawn_ms / 1000.0
                    self.respawns.append((now + delay, handle))
                continue
            self.rig.check()     # at once: the fork server's death takes its workers (before the watch's next tick)
            self.reasons.append(f"{handle.name} (pid {handle.pid}) died unexpectedly: {describe_exit(code)}; "
                                f"log tail:\n{tail(handle.log)}")
        if self.rig.failed.is_set():
            self.respawns.clear()      # the rig is gone: nothing to respawn onto
        for due, handle in list(self.respawns):
            if due <= now:
                self.respawns.remove((due, handle))
                n = self.incarnation.get(handle.plan.name, 1) + 1
                self.incarnation[handle.plan.name] = n
                self.spawn(handle.plan, t0=self.t0, name=f"{handle.plan.name}#{n}", failpoints=False)

    def stream_state(self) -> str:
        """The groups' pending and lag, for a reason text (what the run was waiting for)."""
        try:
            r = self.cell.redis
            parts = []
            for stream in self.cell.streams:
                for g in r.xinfo_groups(stream):
                    parts.append(f"{stream}: pending {g['pending']}, lag {g.get('lag')}, "
                                 f"last-delivered {g['last-delivered-id']}, length {r.xlen(stream)}")
            return "; ".join(parts) or "no groups"
        except Exception as exc:  # noqa: BLE001 - a diagnostic only
            return f"streams unreadable: {type(exc).__name__}: {exc}"

    def live_names(self) -> list[str]:
        """History names of the live workers and of their helper processes (fan-out workers)."""
        names = []
        for handle in self.live():
            names += [handle.name, *handle.plan.helpers]
        return names

    def live(self, kind: str | None = None) -> list[WorkerHandle]:
        return [h for h in self.current.values() if h.alive() and (kind is None or h.plan.kind == kind)]

    def watch(self, done: Callable[[], bool], bound_s: float, progress: ProgressWatch,
              stall_s: float) -> tuple[float, float] | None:
        """Poll deaths/respawns and `done` until it holds (None). Past `bound_s` the wait goes on
        while the run makes progress: it ends (returning the seconds waited) only when no
        useful op came for `stall_s`, or for ten times the mean gap between useful ops so far
        if that is longer (a slow run is not a stalled one): then (seconds waited, seconds
        since the last useful op).

        `done` asks Redis and PostgreSQL, so it is asked every POLL_S * 2 only while the run is
        quiet (no useful op since it was last asked: the moment it may have become true);
        while useful ops keep coming, every 5 % of the time waited so far, at most every
        DONE_EVERY_MAX_S (the history, tailed here, costs what was written since)."""
        started = time.monotonic()
        first_ops = progress.useful_ops
        asked_at, asked_ops = float("-inf"), -1
        while True:
            self.raise_if_rig_failed()
            self.check_deaths()
            progress.poll()
            now = time.monotonic()
            if progress.useful_ops == asked_ops or now - asked_at >= min(DONE_EVERY_MAX_S, (now - started) / 20):
                asked_at, asked_ops = now, progress.useful_ops
                if done():
                    return None
                now = time.monotonic()
            if now - started > bound_s:
                last = progress.last_useful
                ops = progress.useful_ops - first_ops
                gap = (last - started) / ops if ops and last > started else 0.0  # between useful ops, so far
                if now - last > max(stall_s, 10 * gap):
                    return now - started, now - last
            time.sleep(POLL_S * 2)

    # -- the run -----------------------------------------------------------------------
    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time one phase of this run (seam P); recorded even when the phase raises."""
        start = time.monotonic()
        try:
            yield
        finally:
            self.phases.append(Phase(self.index, name, start, time.monotonic()))

    def execute(self) -> tuple[RunResult, RunMetrics]:
        try:
            return self._execute()
        finally:
            if self.progress is not None:
                self.progress.release()   # (history() did, unless the run ended before it)

    def _execute(self) -> tuple[RunResult, RunMetrics]:
        cell, started = self.cell, time.monotonic()
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        self.orchestrator = HistoryWriter.for_run(self.dir, "orchestrator")
        self.nemesis = HistoryWriter.for_run(self.dir, "nemesis")
        events, producer_plans = self.workload or plan_workload(cell.strategy, self.seed)
        self.workload = None
        faults = cell.new_faults()
        self.fault_failpoints = [f.failpoints() for f in faults]
        self.t0 = time.monotonic()
        threads: list[Any] = []
        try:
            try:
                with self.phase("reset"):
                    self.reset_state(events)
                self.rig.start()       # after the reset: a reset restarts servers on purpose
                self.rig.check(deep=True)
                self.raise_if_rig_failed()
                with self.phase("arm"):
                    self.start_workload(events, producer_plans, faults, threads)
                self.progress = ProgressWatch(self.dir, keep=True)
                with self.phase("workload"):
                    self.workload_phase(events)
            except _RunAborted as exc:
                self.reasons.append(str(exc))
            except RIG_ERRORS as exc:
                self.rig_error(exc, "workload")
            except OSError as exc:
                self.disk_full_or_raise(exc)
            finally:
                self.stop_event.set()
                with self.phase("heal"):
                    self.join_faults(threads)
            if not self.rig.failed.is_set() and (
                    not self.reasons or all("died unexpectedly" in r for r in self.reasons)):
                with self.phase("drain"):
                    try:
                        self.drain_phase(events)
                    except RIG_ERRORS as exc:
                        self.rig_error(exc, "drain")
                    except OSError as exc:
                        self.disk_full_or_raise(exc)
        finally:
            with self.phase("stop"):
                self.stop_all()
        with self.phase("check"):
            try:
                self.rig.check()     # a run shorter than the watch's period is checked too
                final, unread = self.read_final(events)
            finally:
                self.rig.stop()
            for writer in (self.orchestrator, self.nemesis):
                try:
                    writer.close()
                except OSError as exc:
                    self.disk_full_or_raise(exc)
            # (parsed while it was written: the watch kept every op)
            history = (self.progress.history(run=self.index) if self.progress is not None
                       else read_history(self.dir, run=self.index))
            if not self.reasons and not self.rig.failures and not unread:
                self.reasons += self.leftovers(final)
            if self.rig.failures:     # a fault that failed on a broken rig is the rig's failure, not the fault's
                self.reasons += [r for r in self.fault_errors if r not in self.reasons]
                self.fault_errors = []
            result = check_run(history, final, run=self.index, unknown_reasons=self.reasons, seed=self.seed,
                               rig_failures=self.rig.failures)
            if unread:
                result.counts, result.anomalies, result.anomaly_counts, result.final_state = Counts(), [], {}, {}
                result.unknown_reasons.append(unread)
        handled, work_s, fault_ops = _work_metrics(history)
        self.phases += fault_phases(fault_ops, self.index)
        self.notes = [f"run {self.index}: {note}" for note in late_fault_notes(history, self.t0, fault_ops)]
        metrics = RunMetrics(self.index, self.seed, time.monotonic() - started, handled, work_s,
                             handled / work_s if work_s else None, str(self.dir))
        if cell.trace is not None:
            from chaos.trace import trace_lines
            cell.trace(f"--- run {self.index} (seed {self.seed}): {result.verdict}")
            for line in trace_lines(history, origin=self.t0):
                cell.trace(line)
            cell.trace("phases: " + ", ".join(
                f"{p.name} {(p.start - self.t0) * 1000:.0f}..{(p.end - self.t0) * 1000:.0f} ms"
                for p in sorted(self.phases, key=lambda p: p.start)))
            for note in self.notes:
                cell.trace(f"note: {note}")
        return result, metrics

    def read_final(self, events: list[Event]) -> tuple[FinalState, str]:
        """The FinalState, and '' ; or, when the rig lets it not be read in full, an empty one
        (the intended events only) and the sentence saying so (the counts are then left empty)."""
        cell = self.cell
        broken = self.rig.final_state_source()
        if broken:
            return self._empty_final(events), f"the final state was not read ({broken}): the counts are left empty"
        try:
            return cell.pg(lambda conn: read_final_state(cell.redis, conn, cell.streams, GROUP,
                                                         cell.strategy.ack.dlq, events)), ""
        except RIG_ERRORS as exc:
            self.rig_error(exc, "final-state read")
            return self._empty_final(events), (f"the final state could not be read ({type(exc).__name__}: {str(exc).strip()[:300]}): "
                           f"the counts are left empty")

    @staticmethod
    def _empty_final(events: list[Event]) -> FinalState:
        seen: dict[str, dict] = {}
        for ev in events:
            seen.setdefault(ev.event_id, ev.intended())
        return FinalState(events=list(seen.values()))

    def leftovers(self, final: FinalState) -> list[str]:
        """A run ends valid or invalid only when the drain reached a state the preset and faults
        explain: nothing undelivered, and pending entries only where nobody was left to claim
        them (every consumer gone by a configured kill), nobody claims (claim=never) or each
        failed again in the drain (a poison entry). Else a reason naming what was left."""
        if not final.undelivered and not final.pending:
            return []
        left = []
        if final.undelivered and self.drain_end != "nobody left":
            left.append(f"{len(final.undelivered)} undelivered")
        if final.pending and self.drain_end not in ("nobody left", "no claims", "failed again"):
            left.append(f"{len(final.pending)} pending")
        if not left:
            return []
        return [f"the run ended with {' and '.join(left)} entries that nothing explains "
                f"(the drain ended: {self.drain_end or 'not run'}; {self.stream_state()})"]

    def start_workload(self, events: list[Event], producer_plans: list[ProcessPlan], faults: list[Any],
                       threads: list[Any]) -> None:
        """Consumers (each until it blocks in XREADGROUP), gated producers, faults armed, then t0."""
        cell = self.cell
        self.log_op({"run": self.index, "seed": self.seed, "preset": cell.strategy.label()})
        blocked = 0
        for plan in cell.consumer_plans:
            handle = self.spawn(plan, t0=self.t0)
            blocked += plan.ready_blocked
            if plan.ready_blocked:
                self.wait_ready(handle, blocked)
        gated = [self.spawn(plan, t0=0.0, gate=True) for plan in producer_plans if plan.gated]
        self.wait_gated(gated)
        from faults.local import FaultThread
        ctx = RunContext(self)
        for fault in faults:
            thread = FaultThread(fault, ctx)
            threads.append(thread)
            try:
                thread.start()
            except Exception as exc:  # noqa: BLE001 - could not arm: heal what it did, verdict unknown
                threads.remove(thread)
                self._fault_failed(fault, exc)
                try:
                    fault.heal(ctx)
                except Exception as heal_exc:  # noqa: BLE001
                    self._fault_failed(fault, heal_exc)
                raise _RunAborted(f"fault {fault.name} could not be armed") from exc
        self.t0 = time.monotonic()
        self.log_op({"phase": "workload", "t0": self.t0})
        for handle in gated:
            handle.child.kill(signal.SIGUSR2)  # its t0: the schedule starts now
        for plan in producer_plans:
            if not plan.gated:
                self.spawn(plan, t0=self.t0)

    def join_faults(self, threads: list[Any]) -> None:
        """Wait for each fault's thread, then heal it (FaultThread.join always heals)."""
        for thread in threads:
            bound = RIG_JOIN_S if self.rig.failed.is_set() else max(10.0, 60 * self.cell.time_scale)
            try:
                thread.join(timeout_s=bound)
            except Exception as exc:  # noqa: BLE001 - FaultError and anything else: verdict unknown
                self._fault_failed(thread.fault, exc)

    def _fault_failed(self, fault: Any, exc: BaseException) -> None:
        message = f"fault {fault.name} did not act or heal: {type(exc).__name__}: {exc}"
        self.reasons.append(message)
        self.fault_errors.append(message)

    def stall_s(self, events: list[Event]) -> float:
        """How long a healthy run may go without a useful op: the longest job three times
        over, plus slack for a loaded machine."""
        if self.cell.stall_s is not None:
            return self.cell.stall_s
        longest = max((e.cost_ms for e in events), default=0.0)
        return STALL_S + 3 * self.cell.time_scale * longest / 1000.0

    def workload_bound_s(self, events: list[Event]) -> float:
        """The workload's first bound, from its size: the schedule, the jobs' cost and the
        producer's retries (scaled, three times over), plus a floor rate per event. Past it
        the run goes on for as long as it makes progress (see `watch`)."""
        if self.cell.workload_bound_s is not None:
            return self.cell.workload_bound_s
        producer = self.cell.strategy.producer
        scheduled = sum(e.cost_ms for e in events) + max((e.at_ms for e in events), default=0) + sum(
            producer.retry_delays_ms())
        return 20.0 + 3 * self.cell.time_scale * scheduled / 1000.0 + len(events) / FLOOR_EVENTS_PER_S

    def consumers_idle(self, watch: ProgressWatch) -> bool:
        """Nothing more happens without a drain: no consumer respawn due, nothing in hand or in
        an apply, nothing undelivered, and every live consumer blocked in XREADGROUP."""
        if any(h.plan.kind == CONSUMER for _, h in self.respawns):
            return False
        consumers = self.live(CONSUMER)
        if not consumers:
            return True  # nobody left to do anything
        watch.poll()
        names = self.live_names()
        if watch.busy(names) or watch.in_hand(names):
            return False
        try:
            r = self.cell.redis.client()
            if undelivered(r, self.cell.streams, GROUP):
                return False
            return self.blocked_readers(r) >= sum(h.plan.ready_blocked for h in consumers)
        except (redis.ConnectionError, redis.TimeoutError):
            return False  # no primary answers (a failover): not yet

    def workload_phase(self, events: list[Event]) -> None:
        """Until the producers are done and the consumers fully acked (ack after) or idle."""
        cell, watch = self.cell, self.progress
        producer = cell.strategy.producer

        def done() -> bool:
            if self.live(PRODUCER) or any(h.plan.kind == PRODUCER for _, h in self.respawns):
                return False
            if not cell.pg(producer.drained):
                return False
            if cell.strategy.ack.after and _acked_or_none(cell):
                return True
            # acked on receive says nothing about the work: the consumers must be idle too
            return self.consumers_idle(watch)

        stalled = self.watch(done, self.workload_bound_s(events), watch, self.stall_s(events))
        if stalled is not None:
            names = self.live_names()
            self.reasons.append(f"the workload did not finish within {stalled[0]:.1f} s: no progress for "
                                f"{stalled[1]:.1f} s (producers alive: {[h.name for h in self.live(PRODUCER)]}; "
                                f"{self.stream_state()}; busy: {watch.busy(names)}; "
                                f"in hand: {watch.in_hand(names)})")

    def drain_phase(self, events: list[Event]) -> None:
        """Recovery: consumers run XAUTOCLAIM until everything is acked, or until every entry
        still pending was claimed again in the drain and failed again (a poison entry)."""
        cell, watch = self.cell, self.progress
        if _acked_or_none(cell) and cell.pg(cell.strategy.producer.drained):
            self.drain_end = "acked"
            return
        self.log_op({"phase": "drain"})
        for handle in self.live(CONSUMER):
            handle.drain_signalled = True
            handle.child.kill(signal.SIGCONT)
            handle.child.kill(signal.SIGUSR1)
        began = time.monotonic()
        claims = cell.strategy.delivery.claim != "never"
        # with max_attempts every failing entry reaches the DLQ in the end: wait for it
        final_when_failed = not cell.strategy.ack.max_attempts

        def drained() -> bool:
            for handle in self.live(CONSUMER):
                if not handle.drain_signalled:
                    handle.drain_signalled = True  # a respawned consumer joins the drain
                    handle.child.kill(signal.SIGUSR1)
            if _acked_or_none(cell) and cell.pg(cell.strategy.producer.drained):
                self.drain_end = "acked"
                return True
            if not self.live(CONSUMER) and not self.respawns:
                self.drain_end = "nobody left"
                return True  # nobody left to recover anything: report what is pending
            if not self.consumers_idle(watch) or not cell.pg(cell.strategy.producer.drained):
                return False
            if not claims:
                self.drain_end = "no claims"
                return True  # nobody will claim what is pending: report it
            try:
                pending = pending_entries(cell.redis.client(), cell.streams, GROUP)
            except (redis.ConnectionError, redis.TimeoutError):
                return False
            if final_when_failed and all(watch.failed_since(entry, began) for entry in pending):
                self.drain_end = "failed again"
                return True
            return False

        idle = cell.time_scale * cell.strategy.delivery.claim_idle_ms / 1000.0
        bound = max(10.0, 10 * idle + 30 * cell.time_scale)
        if cell.workload_bound_s is not None:
            bound = min(bound, cell.workload_bound_s)
        stalled = self.watch(drained, bound, watch, self.stall_s(events) + 2 * idle)
        if stalled is not None:
            self.reasons.append(f"the drain timed out after {stalled[0]:.1f} s: no progress for "
                                f"{stalled[1]:.1f} s ({self.stream_state()})")

    def stop_all(self) -> None:
        for handle in self.live():
            handle.stopping = True
            handle.child.kill(signal.SIGCONT)
            handle.child.kill(signal.SIGTERM)
        grace = STOP_GRACE_S / 4 if self.rig.failed.is_set() else STOP_GRACE_S   # a broken rig: their history is moot
        deadline = time.monotonic() + grace
        for handle in self.handles:
            handle.child.wait(max(0.0, deadline - time.monotonic()))
        for handle in self.handles:
            if handle.alive():
                handle.stopping = True
                handle.child.kill(signal.SIGKILL)
                handle.child.wait(5)
        self.check_deaths()


def plan_workload(strategy: Strategy, seed: int) -> tuple[list[Event], list[ProcessPlan]]:
    """One run's routed events and producer plans (10^5 events: about 0.5 CPU s, so made once per run)."""
    events = strategy.delivery.route(strategy.workload.make_events(random.Random(seed)))
    return events, strategy.producer.plans(events)


def _acked_or_none(cell: _Cell) -> bool | None:
    """fully_acked on the current primary; None (not yet) while it does not answer (a failover)."""
    try:
        return fully_acked(cell.redis.client(), cell.streams, GROUP)
    except (redis.ConnectionError, redis.TimeoutError):
        return None


class _RunAborted(Exception):
    """A run could not get its workers going; the run's verdict is unknown."""


def _validate(time_scale: float, runs: int, failpoints: dict[str, dict], bounds: dict[str, float | None]) -> None:
    for name, value in bounds.items():
        if value is not None and not value > 0:
            raise BadArguments(f"{name} must be > 0 seconds (or None for the default), got {value!r}")
    if not isinstance(runs, int) or runs < 1:
        raise BadArguments(f"runs must be a whole number >= 1, got {runs!r}")
    if not time_scale or time_scale <= 0:
        raise BadArguments(f"time scale must be > 0 (1 = the reference's durations), got {time_scale!r}")
    for target, points in failpoints.items():
        try:
            fp.validate(points)
        except ValueError as exc:
            raise BadArguments(f"failpoints for {target}: {exc}") from None


def _fault_specs(faults: Sequence[Any]) -> list[Any]:
    from faults.registry import get_fault
    specs = []
    for fault in faults:
        if isinstance(fault, str):
            get_fault(fault)  # BadArguments now, before anything starts
        specs.append(fault)
    return specs


def fault_label(faults: Sequence[Any]) -> str:
    names = [f if isinstance(f, str) else f.spec for f in faults]
    return "+".join(names) if names else "none"


def run_cell(cluster: Any, preset: str | Strategy, faults: Sequence[Any] = (), runs: int = 1, seed: int = 0,
             time_scale: float = 1.0, *, parts: dict[str, str] | None = None,
             failpoints: dict[str, dict] | None = None, run_root: Path | None = None,
             keep_runs: str = "failed", trace: Callable[[str], None] | None = None,
             progress: Callable[[int, int, RunResult], None] | None = None,
             raise_fault_errors: bool = True, workload_bound_s: float | None = None,
             stall_s: float | None = None) -> CellResult:
    """Run `preset` under `faults` `runs` times (run i uses seed + i) and summarize.

    `parts` replaces whole parts (`{"workload": "many-orders:keys=40"}`); `failpoints`
    adds `{role-or-process: {failpoint: {...}}}` to what the faults arm. `keep_runs`:
    `always`, `never`, or `failed` (keep the dirs of runs that are not valid).
    `workload_bound_s` replaces the workload's first bound (by default from its size) and
    `stall_s` how long without a useful op past it counts as stalled (verdict unknown).
    Besides the checker's fields, the result carries `run_root`, `run_dirs`, `metrics`
    (RunMetrics per run), `wall_s`, `fault_errors`, `label`, `phases` (Phase of every run)
    and `notes` (e.g. a fault that fired after the workload ended).
    """
    failpoints = dict(failpoints or {})
    _validate(time_scale, runs, failpoints, {"workload_bound_s": workload_bound_s, "stall_s": stall_s})
    strategy = preset if isinstance(preset, Strategy) else resolve(preset, parts=parts)
    specs = _fault_specs(list(faults))
    root = Path(run_root) if run_root else runs_dir(cluster) / (
        f"{strategy.preset}-{time.strftime('%H%M%S')}-{os.getpid()}-{random.randrange(10**6)}")
    root.mkdir(parents=True, exist_ok=True)
    cell = _Cell(cluster, strategy, specs, time_scale, failpoints, root, trace, workload_bound_s, stall_s)
    # the first run's workload: the faults' check needs its producer roles (then the run uses it)
    first = plan_workload(strategy, seed) if specs else None
    _check_faults(cell, specs, first[1] if first else [])
    started = time.monotonic()
    results, metrics, fault_errors = [], [], []
    phases: list[Phase] = []
    notes: list[str] = []
    try:
        for index in range(runs):
            run = _Run(cell, index, seed + index, first if index == 0 else None)
            first = None
            result, m = run.execute()
            results.append(result)
            metrics.append(m)
            phases += run.phases
            notes += run.notes
            fault_errors += [f"run {index}: {e}" for e in run.fault_errors]
            if progress is not None:
                progress(index + 1, runs, result)
            if fault_errors and raise_fault_errors:
                break
            if run.rig_failures:
                break      # the rig is broken: the next runs would stand on it
    finally:
        cell.close()
    summary = replace(summarize(results), run_root=root, run_dirs=[Path(m.run_dir) for m in metrics],
                      metrics=metrics, wall_s=time.monotonic() - started, fault_errors=fault_errors,
                      label=strategy.label(), phases=phases, notes=notes)
    _tidy(summary, keep_runs)
    if fault_errors and raise_fault_errors:
        from faults.interface import FaultError
        raise FaultError("; ".join(fault_errors))
    return summary


def _check_faults(cell: _Cell, specs: list[Any], producer_plans: list[ProcessPlan]) -> None:
    """Each fault's check against the roles and failpoints the cell's processes have."""
    if not specs:
        return
    from faults.interface import Plan
    roles = cell.plan_roles(producer_plans)
    points = {role: ROLE_FAILPOINTS.get(role) or (PRODUCER_FAILPOINTS if role == PRODUCER else CONSUMER_FAILPOINTS)
              for role in roles}
    plan = Plan(roles=roles, failpoints=points, strategy=cell.strategy,
                backend=str(getattr(cell.cluster, "backend", "")))
    for fault in cell.new_faults():
        fault.check(plan)


def _tidy(summary: CellResult, keep_runs: str) -> None:
    if keep_runs == "always":
        return
    for result, path in zip(summary.runs, summary.run_dirs, strict=True):
        if keep_runs == "never" or result.verdict == "valid":
            shutil.rmtree(path, ignore_errors=True)
    root = summary.run_root
    if root.is_dir() and not any(root.iterdir()):
        root.rmdir()

