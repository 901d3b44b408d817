"""One black-box cell: the user's consumer under faults, runs x (prepare, run, observe, check).

A run: reset the topology, apply the user's migration, check the config against the
schema (a ConfigError before any process starts), install the observing triggers,
create the stream and group, start the workers and wait until each is connected, start
the framework's producer and the faults together, let the workers drain, stop them,
read effects and Redis state, remove the triggers (and prove the schema is as it was),
then check. The order is the orchestrator's one phase sequence (chaos/orchestrator/sequence.py
`run_phases`; `_Run` gives its steps): the faults act from the arm until the heal, and run
their course once the producer is done. A worker that exits at once, never connects or never
writes anything ends the run with verdict ``unknown`` and its exit code and output tail as
the reason.

The rig vouches for itself: the orchestrator's rig watcher (chaos/orchestrator/rigwatch.py)
checks every server and proxy of the topology from its own thread during the run, and once
more before the check (chaos/cluster/health.py). One that died or hangs outside what a
configured fault may take down ends the run at once with verdict ``unknown``, the component
named in ``rig_failures`` with its log tail, and no further run of the cell is started (the
topology is broken).
"""
from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Callable

import redis

from chaos.blackbox.config import WorkerConfig
from chaos.blackbox.counts import BlackBoxCounts, Liveness
from chaos.blackbox.drain import DrainProgress, drain
from chaos.blackbox.effects import EffectRecorder, schema_fingerprint
from chaos.blackbox.errors import ConfigError, WorkerError
from chaos.blackbox.events import intended_events, poison_events
from chaos.blackbox.producer import PRODUCER, FrameworkProducer
from chaos.blackbox.redis_state import StreamState, busy_consumers, outstanding, read_stream_state
from chaos.blackbox.verdict import (OBSERVER, BlackBoxRun, check_blackbox_run, final_rows,
                                    wall_to_monotonic)
from chaos.blackbox.workers import WorkerPool, parse_command
from chaos.cellspec import NO_FAULT, Spec
from chaos.checker import check_run, summarize
from chaos.results import CellResult, FinalState, Phase
from chaos.errors import BadArguments
from chaos.cluster.health import rig_problems
from chaos.orchestrator.check import missed_effects
from chaos.orchestrator.sequence import run_phases
from chaos.orchestrator.faultthreads import RIG_JOIN_S, FaultSchedule, failure_text, heal_bound_s
from chaos.orchestrator.phaseclock import PhaseClock
from chaos.orchestrator.rigwatch import RigWatch, spared_by
from chaos.orchestrator.workers import RunAborted, merge_failpoints
from chaos.cluster.rundirs import runs_dir
from chaos.history import read_history
from chaos.workload.failpoints import PRODUCER_FAILPOINTS
from faults.interface import Plan



class RigBroken(Exception):
    """A server or proxy of the topology died or hangs: the run stops and cannot be judged."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(p.splitlines()[0] for p in problems))
        self.problems = problems


def topology_problems(cluster: Any, spared: set[str] = frozenset()) -> list[str]:
    """What is wrong with the topology now; one that cannot even list its parts is broken."""
    try:
        return rig_problems(cluster, spared)
    except Exception as exc:  # noqa: BLE001 - a topology that cannot even list its parts is broken
        return [f"topology {getattr(cluster, 'name', '?')}: its health could not be read: "
                f"{type(exc).__name__}: {exc}"]


@dataclass
class BlackBoxRuns:
    """All runs of one (worker command, faults) cell."""

    command: list[str]
    config: WorkerConfig
    faults: tuple[Spec, ...]     # parsed at the edge (preflight); `fault_texts` as written back
    runs: list[BlackBoxRun] = field(default_factory=list)
    phases: list[Phase] = field(default_factory=list)    # of every run, the orchestrator's names

    @property
    def fault_texts(self) -> list[str]:
        return [f.text for f in self.faults]

    @property
    def cell(self) -> CellResult:
        return replace(summarize([r.result for r in self.runs]), phases=list(self.phases))

    @property
    def extra(self) -> BlackBoxCounts:
        total = BlackBoxCounts()
        for r in self.runs:
            total = total + r.extra
        return total

    @property
    def stalled_after_heal_s(self) -> float | None:
        """The longest stall after a heal over the runs (None: no run had a fault that healed)."""
        stalls = [r.liveness.stalled_after_heal_s for r in self.runs]
        return max((s for s in stalls if s is not None), default=None)

    def count(self, name: str) -> Any:
        """A checker count, a black-box count (``duplicated_side_effects``...), runs or verdict."""
        if name in BlackBoxCounts.__dataclass_fields__:
            return getattr(self.extra, name)
        return self.cell.count(name)


def load_faults(specs: Sequence[Spec], workers: list[str]) -> list[Any]:
    """Make (faults.registry.make_fault, no text parsed) and check the faults against what a
    black-box run starts (before anything starts)."""
    from faults.registry import make_fault

    plan = Plan(roles={"consumer": workers, "producer": [PRODUCER]},
                failpoints={"consumer": set(), "producer": set(PRODUCER_FAILPOINTS)})
    out = []
    for spec in specs:
        fault = make_fault(spec)
        try:
            fault.check(plan)
        except BadArguments as exc:
            if "at" not in fault.values:   # no way to act from outside: its own message says what to do
                raise
            raise BadArguments(f"{exc}. A black-box worker carries no failpoints: act from outside, "
                               f"e.g. --fault {fault.name}:at=time") from None
        out.append(fault)
    return out


def producer_failpoints(faults: Sequence[Any]) -> dict[str, dict]:
    """The failpoints the faults arm in the framework producer (the only process that has any)."""
    return merge_failpoints([fault.failpoints() for fault in faults], {PRODUCER})


class _Run:
    """One black-box run: the steps of the orchestrator's one phase sequence
    (chaos/orchestrator/sequence.py `run_phases`) for the team's command, its effects observed
    through triggers; its resources released in reverse order whatever happens (`execute`)."""

    run_course = True       # the faults run their course once the producer is done
    report_cut = False      # a run cut short (broken rig, Ctrl-C) names the rig, not a fault's failure

    def __init__(self, cluster: Any, argv: list[str], config: WorkerConfig, fault_specs: Sequence[Spec],
                 run: int, seed: int, time_scale: float, run_dir: Path, log: Callable[[str], None],
                 trace: Callable[[str], None] | None = None, cwd: Path | None = None,
                 reset_topology: bool = True) -> None:
        from chaos.blackbox.faultcontext import BlackBoxContext

        self.cluster, self.argv, self.config = cluster, argv, config
        self.fault_specs, self.run, self.seed, self.scale = fault_specs, run, seed, time_scale
        self.run_dir, self.log, self.trace, self.cwd = run_dir, log, trace, cwd or Path.cwd()
        self.t0 = time.monotonic()
        self.reasons: list[str] = []
        self.pool: WorkerPool | None = None
        self.producer = FrameworkProducer(cluster, config, run_dir, time_scale, seed)
        self.pg: Any = None
        self.recorder: EffectRecorder | None = None
        self.before: Any = None                 # the user's schema, fingerprinted before the triggers
        self.faults = load_faults(fault_specs, [f"C{i}" for i in range(1, config.worker.processes + 1)])
        self.rig = RigWatch(cluster, spared_by(self.faults), run_dir, name=f"blackbox-rig-watch-{run}")
        self.ctx = BlackBoxContext(cluster, seed=seed, time_scale=time_scale, roles={"consumer": []}, run_dir=run_dir)
        self.schedule = FaultSchedule(self.ctx, lambda fault, exc: self.reasons.append(failure_text(fault, exc)))
        self.events: list[Any] = []
        self.poison: list[Any] = []
        self.broken: list[str] = []             # the rig's failures, once it broke (nothing judged)
        self.unstarted = ""                     # why the workers never got going (nothing published)
        self.drain_end, self.progress_at, self.drained_at = "", None, 0.0   # set by _drain
        self.healed_at: float | None = None
        self.rig_clear, self.live, self.state = False, [], None
        self.phases: list[Phase] = []
        self.clock = PhaseClock(run, self.phases)     # the phase clock, the orchestrator's phase names
        self.reset_topology = reset_topology          # (False: the caller got a freshly reset one)

    def execute(self) -> BlackBoxRun:
        try:
            return run_phases(self)
        finally:
            self.rig.stop()
            self._stop_processes()
            self.clock.close()
            self._release()

    def _release(self) -> None:
        """The triggers removed (the schema proven as it was) and the connection closed; a dead
        PostgreSQL keeps no triggers (the next reset renews it)."""
        try:
            if self.before is not None and not self.broken:
                self.recorder.remove()
                if schema_fingerprint(self.pg) != self.before:
                    raise RuntimeError("the user's schema differs after the triggers were removed; this is a "
                                       f"framework bug: report it with the run dir {self.run_dir}")
        finally:
            try:
                if self.pg is not None:
                    self.pg.close()
            except Exception:  # noqa: BLE001 - closing a connection to a dead server
                pass

    # -- the sequence's steps -------------------------------------------------------------
    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.clock.enter(name)
        try:
            yield
        finally:
            self.clock.close()

    def stop_event(self) -> threading.Event:
        return self.ctx.stop_event

    def heal_bound_s(self) -> float:
        return heal_bound_s(self.scale, self.rig.failed.is_set())

    def cut_bound_s(self) -> float:
        return RIG_JOIN_S

    def aborted(self, exc: Exception, where: str) -> bool:
        """A broken rig (its watcher's finding, or a dead server's client error) or workers that
        never started end the run (the check says which); any other error is raised."""
        if isinstance(exc, RunAborted) and self.unstarted:
            return True
        broken = exc.problems if isinstance(exc, RigBroken) else (
            self.rig.failures or topology_problems(self.cluster, self.rig.spared))
        if not broken:
            return False
        if not isinstance(exc, RigBroken):
            self.log(f"run {self.run}: {type(exc).__name__} while the rig was broken: {exc}")
        self.broken = list(broken)
        return True

    def reset(self) -> None:
        """The topology reset, the user's migration, the config checked against the schema, the
        observing triggers installed."""
        cfg = self.config
        if self.reset_topology:
            self.cluster.reset()
        self.pg = self.cluster.pg_connect()
        if cfg.worker.schema:
            apply_migration(self.pg, cfg.worker.schema)
        cfg.check_schema(self.pg)
        before = schema_fingerprint(self.pg)
        self.recorder = EffectRecorder(self.pg, cfg)
        self.recorder.install()
        self.before = before

    def arm(self) -> None:
        """The rig watched, the stream and group made, the workers connected, the producer's
        first publish, then the faults."""
        cfg, cluster = self.config, self.cluster
        self.rig.start()
        events = self.events = intended_events(cfg.workload, random.Random(self.seed))
        poisoned = any(f.name == "poison" for f in self.faults) and cfg.poison is not None
        self.poison = poison_events(cfg.workload, cfg.poison.count, events) if poisoned else []   # [poison]
        cluster.direct_redis().xgroup_create(cfg.worker.stream, cfg.worker.group, id="0", mkstream=True)
        self.pool = WorkerPool(self.argv, cfg.worker, cluster.worker_links, self.run_dir / "workers",
                               extra_env={"CHAOS_TIME_SCALE": str(self.scale)}, cwd=self.cwd)
        try:
            self.pool.start()
        except WorkerError as exc:
            self.log(f"run {self.run}: {exc}")
            self.unstarted = str(exc)
            raise RunAborted(self.unstarted) from exc
        self.log(f"run {self.run}: {len(self.pool.workers)} worker(s) connected; publishing {len(events)} events")
        self.ctx.roles["consumer"] = self.pool.workers
        self.producer.start(events + self.poison, producer_failpoints(self.faults))
        self.ctx.producer = self.producer.handle()
        self.producer.wait_first_publish(self._check_rig)   # fault times count from the workload's real t=0
        self.t0 = time.monotonic()                          # the trace counts from here too
        try:
            self.schedule.start(self.faults)
        except RunAborted as exc:   # healed, its reasons given: the run goes on to its verdict, unknown
            self.reasons.append(str(exc))

    def workload(self) -> None:
        self.producer.wait(self.events, self._check_rig, self.reasons)

    def drainable(self) -> bool:
        return not (self.broken or self.unstarted)

    def drain(self) -> None:
        """(The faults healed) the rig checked, the workers left to drain; who exited unexpectedly."""
        self.healed_at = last_heal(self.ctx.ops) if self.schedule.threads else None
        self.rig_clear = not self.reasons          # every fault healed, the producer finished
        self._check_rig(force=True)
        self.state = self._drain(self.events)
        self.live = [w.name for w in self.pool.workers if w.alive()]
        for w in self.pool.unexpected_exits():
            self.reasons.append(f"worker {w.name} exited unexpectedly with exit code {w.exit_code()}; "
                                f"last output:\n{w.output_tail()}")

    def stop(self) -> None:
        self._stop_processes()

    def check(self) -> BlackBoxRun:
        if not (self.broken or self.unstarted):
            try:
                return self._judge()
            except Exception as exc:  # noqa: BLE001 - the rig's, if it says so
                if not self.aborted(exc, "check"):
                    raise
        if self.unstarted:
            return unstarted_run(self.run, self.seed, self.events, self.unstarted)
        self.log(f"run {self.run}: unknown: the rig failed: "
                 f"{self.broken[0].splitlines()[0].removesuffix('; log tail:')}")
        return rig_failed_run(self.run, self.seed, self.broken, self.events, self.reasons)

    def _judge(self) -> BlackBoxRun:
        """The effects, the final rows and Redis state read (on a sound rig) and checked."""
        cfg, events = self.config, self.events
        effects = self.recorder.read()
        rows = final_rows(self.pg, cfg)
        keep_observations(self.run_dir, effects, rows)
        state = self._stream_state(events) or self.state
        silent = not effects and bool(events)
        if silent:
            tails = "\n".join(f"--- {w.name} (exit code {w.exit_code()}) ---\n{w.output_tail()}"
                              for w in self.pool.workers)
            self.reasons.append(f"no write to {cfg.state.table} was observed in {cfg.worker.drain_s:g} s of "
                                f"drain: the worker hangs, fails every job, or writes somewhere the config "
                                f"does not name\n{tails}")
        self._check_rig(force=True)      # the final state was read from a sound rig
        history = read_history(self.run_dir) + list(self.ctx.ops)
        self.reasons += took_back_missing(self.faults, history)
        offset = wall_to_monotonic()
        progress_at = max([t for t in (self.progress_at, max((e.at + offset for e in effects), default=None))
                           if t is not None], default=None)
        liveness = Liveness(drain_end=self.drain_end, live_workers=self.live, rig_clear=self.rig_clear,
                            healed_at=self.healed_at, ended_at=self.drained_at, progress_at=progress_at)
        result = check_blackbox_run(cfg, history=history, effects=effects, rows=rows, stream=state, events=events,
                                    offset=offset, run=self.run, seed=self.seed,
                                    unknown_reasons=self.reasons, liveness=liveness, poison=self.poison)
        if silent:  # a worker that never wrote cannot be judged: its "wrong state" is the rig's, not its own
            result.result.verdict = "unknown"
        trace_and_log(result, run=self.run, seed=self.seed, t0=self.t0, trace=self.trace, log=self.log)
        return result

    def _check_rig(self, force: bool = False) -> None:
        """RigBroken when the rig watcher found a failure (with ``force``: checked now, probes too)."""
        if force:
            self.rig.check(deep=True)
        if self.rig.failed.is_set():
            raise RigBroken(list(self.rig.failures))

    def _stream_state(self, events: list[Any], *, final: bool = True) -> StreamState | None:
        cfg = self.config
        by_kv = {(e.key, e.version): e.event_id for e in events}
        try:
            with raw_redis(self.cluster) as r:
                return read_stream_state(r, cfg.worker.stream, cfg.worker.group, cfg.encoder, by_kv,
                                         cfg.worker.dlq_stream)
        except Exception as exc:  # noqa: BLE001 - Redis itself unreachable: the run cannot vouch
            if final:
                self.reasons.append(f"could not read the final Redis state: {exc}")
            return None

    def _outstanding(self, r: redis.Redis) -> int | None:
        """Entries pending or undelivered now, read with the drain's client (None: Redis did not answer)."""
        cfg = self.config
        try:
            return outstanding(r, cfg.worker.stream, cfg.worker.group)
        except Exception:  # noqa: BLE001 - Redis unreachable for a moment: the last count stands
            return None

    def _drain(self, events: list[Any]) -> StreamState:
        """The drain (chaos/blackbox/drain.py); sets ``drain_end`` (why it ended), ``progress_at``
        (the last new effect or new low seen, None if none) and ``drained_at``; the state it
        ended on (the judge's fallback if Redis does not answer then). Its looks (every ROUND_S)
        share one client on the primary (the faults are healed: it does not move), which
        reconnects by itself after an error."""
        with raw_redis(self.cluster) as r:
            progress = DrainProgress(partial(self._outstanding, r), self.recorder.count,
                                     partial(busy_workers, r, self.config, self.pool.workers))
            self.drain_end = drain(progress, lambda: any(w.alive() for w in self.pool.workers),
                                   self.config.worker.drain_s, self._check_rig)
        self.progress_at, self.drained_at = progress.progress_at, progress.drained_at
        return self._stream_state(events, final=False) or StreamState()

    def _stop_processes(self) -> None:
        self.producer.stop()
        if self.pool is not None:
            self.pool.stop()


def took_back_missing(faults: Sequence[Any], history: list[dict]) -> list[str]:
    """Why a fault given ``until`` (promote-replica, sentinel-failover) tested nothing: its kill
    came on ``until_ms``, not on what it waited for (faults.effects, the took-back effect: read
    from the fault's own op, on both servers, so it holds for a black box too; the other effects
    read the framework workers' ops, which a black-box run has not). Such a run is ``unknown``:
    the orchestrator's missed_effects, for those faults only."""
    from faults.effects import TOOK_BACK

    return missed_effects([fault for fault in faults if fault.effect == TOOK_BACK], history)


def busy_workers(r: redis.Redis, config: WorkerConfig, workers: list[Any], quiet_s: float) -> list[str]:
    """Live workers whose consumer has not come back for work for quiet_s (redis_state.busy_consumers,
    read with the drain's client `r`; [] when Redis does not answer: the drain then settles as it would have)."""
    names = [w.name for w in workers if w.alive()]
    try:
        return busy_consumers(r, config.worker.stream, config.worker.group, names, int(quiet_s * 1000))
    except Exception:  # noqa: BLE001 - Redis unreachable for a moment, or the group gone
        return []


def keep_observations(run_dir: Path, effects: list[Any], rows: dict[str, dict]) -> None:
    """What the triggers saw and the final rows, in the run dir (the history of a black box)."""
    with open(run_dir / "effects.jsonl", "w", encoding="utf-8") as out:
        for effect in effects:
            out.write(json.dumps(asdict(effect)) + "\n")
    (run_dir / "final_rows.json").write_text(json.dumps(rows, indent=1, default=str), encoding="utf-8")


def trace_and_log(result: BlackBoxRun, *, run: int, seed: int, t0: float, trace: Callable[[str], None] | None,
                  log: Callable[[str], None]) -> None:
    """The run's ops as trace lines (when traced) and its figures in one log line."""
    if trace is not None:
        from chaos.trace import trace_lines

        trace(f"--- run {run} (seed {seed}): {result.result.verdict}")
        for op in result.history:
            for line in ([observed_line(op, t0)] if op["process"] == OBSERVER
                         else trace_lines([op], origin=t0)):
                trace(line)
    log(f"run {run}: {result.result.verdict} lost={result.result.counts.lost} "
        f"duplicated={result.result.counts.duplicated} reordered={result.result.counts.reordered} "
        f"wrong_keys={result.result.counts.wrong_keys} pending_left={result.result.counts.pending_left} "
        f"duplicated_side_effects={result.extra.duplicated_side_effects}")


def unstarted_run(run: int, seed: int, events: list[Any], reason: str) -> BlackBoxRun:
    """A run whose workers never got going: nothing was published, so unknown, never invalid."""
    result = check_run([], FinalState(events=[e.intended() for e in events]), run=run, seed=seed,
                       unknown_reasons=[reason],
                       explained=("unattempted",))  # the reason says why nothing was attempted
    return BlackBoxRun(result=result, extra=BlackBoxCounts())


def rig_failed_run(run: int, seed: int, problems: list[str], events: list[Any] = (),
                   reasons: list[str] = ()) -> BlackBoxRun:
    """A run the broken rig ended: verdict unknown, the components named, nothing judged."""
    result = check_run([], FinalState(events=[e.intended() for e in events]), run=run, seed=seed,
                       unknown_reasons=list(reasons), rig_failures=problems, explained=("unattempted",))
    return BlackBoxRun(result=result, extra=BlackBoxCounts())


def last_heal(ops: list[dict]) -> float:
    """When the last fault healed: its last ``stop`` op (the faults were joined, so healed, by now)."""
    stops = [op["time"] for op in ops if op.get("f") == "fault" and (op.get("value") or {}).get("phase") == "stop"]
    return max(stops, default=time.monotonic())


def observed_line(op: dict, origin: float) -> str:
    """A trace line for an effect seen by the triggers (or inferred stale)."""
    what = f"#{op['key']} {op['etype']} (v={op['version']})"
    if op["effect"] == "stale":
        text = f"{what} never written; a newer version was (stale reject, or a loss hidden by it)"
    else:
        value = op.get("value") or {}
        text = f"{what} committed (tx {value.get('txid')}, commit #{value.get('commit_seq')})"
    return f"t={(op['time'] - origin) * 1000:6.0f} ms  {op['process']:<10} {text}"


def raw_redis(cluster: Any) -> redis.Redis:
    """A bytes client on the current primary: library formats (FastStream's) are not UTF-8."""
    ep = cluster.primary
    return redis.Redis(host=ep.host, port=ep.port, protocol=2, socket_timeout=5)


def apply_migration(pg: Any, path: Path) -> None:
    """Run the user's schema file on the fresh database; a failing one is bad input."""
    import psycopg

    try:
        pg.execute(path.read_text(encoding="utf-8"))
    except psycopg.Error as exc:
        raise ConfigError(f"[worker] schema {path} failed on the fresh database: {exc}".strip()) from None


def parse_faults(texts: Iterable[str | Spec]) -> tuple[Spec, ...]:
    """The edge: fault texts as given (`kill-consumer:at=time`; `none` and empty ones dropped)
    -> parsed Specs (BadArguments naming the fix on bad syntax). Specs pass as they are."""
    return tuple(t if isinstance(t, Spec) else Spec.parse(t, "fault spec")
                 for t in texts if isinstance(t, Spec) or (t and t != NO_FAULT))


def preflight(command: str | list[str], config: WorkerConfig, faults: Iterable[str | Spec] = (),
              runs: int = 1) -> tuple[list[str], tuple[Spec, ...]]:
    """Every check that needs no server (the edges call it): the command, the faults (texts
    parsed here, once), the run count. Returns the argv and the parsed fault specs."""
    argv = parse_command(command)
    fault_specs = parse_faults(faults)
    loaded = load_faults(fault_specs, [f"C{i}" for i in range(1, config.worker.processes + 1)])
    if config.poison is None and any(f.name == "poison" for f in loaded):
        raise BadArguments("fault 'poison:source=config' publishes the payload the worker config declares, and "
                           f"{config.path or 'the config'} has no [poison] table: add one, e.g. [poison] "
                           "fields = { version = \"not-a-number\" }")
    if runs < 1:
        raise BadArguments(f"runs={runs}: give at least 1")
    return argv, fault_specs


def run_blackbox(cluster: Any, command: str | list[str], config: WorkerConfig, *, faults: Sequence[Spec] = (),
                 runs: int = 1, seed: int = 0, time_scale: float = 1.0, run_root: Path | None = None,
                 log: Callable[[str], None] | None = None, trace: Callable[[str], None] | None = None,
                 reset: bool = True, cwd: Path | None = None) -> BlackBoxRuns:
    """Run the user's consumer ``runs`` times under ``faults`` and check every run.

    ``reset`` resets the cluster before each run (the first included); pass False for the
    first run when the caller got a freshly reset cluster (the pytest ``cluster`` fixture).
    The workers run in ``cwd`` (default: the current directory). ``faults`` are parsed specs
    (made at the edge: ``preflight`` or ``parse_faults``); a fault is made from each per run.
    """
    texts = [f for f in faults if not isinstance(f, Spec)]
    if texts:
        raise BadArguments(f"run_blackbox(faults={texts!r}): give parsed specs, made once at the edge: "
                           "chaos.blackbox.session.parse_faults([...]) (or preflight(...)'s second value)")
    argv, fault_specs = preflight(command, config, faults, runs)
    root = Path(run_root or runs_dir(cluster))
    say = log or (lambda _line: None)
    cell = BlackBoxRuns(command=argv, config=config, faults=fault_specs)
    for n in range(runs):
        run_dir = root / f"blackbox-{int(time.time() * 1000)}-{n}"
        run_dir.mkdir(parents=True, exist_ok=True)
        try:
            run = _Run(cluster, argv, config, fault_specs, n, seed + n, time_scale, run_dir, say, trace, cwd,
                       reset_topology=reset or n > 0)
            try:
                cell.runs.append(run.execute())
            finally:
                run.clock.close()
                cell.phases += run.phases
        except BadArguments:
            raise
        except Exception as exc:  # noqa: BLE001 - an error the run's own rig check did not explain
            problems = topology_problems(cluster)
            if not problems:
                raise
            say(f"run {n}: unknown: the rig failed ({type(exc).__name__}): {problems[0].splitlines()[0]}")
            cell.runs.append(rig_failed_run(n, seed + n, problems))
        if cell.runs[-1].result.rig_failures:
            break       # the topology is broken: a further run would only fail to reset it
    return cell
