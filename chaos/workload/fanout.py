"""The fan-out reader (S3) and its per-key-bucket worker processes.

The reader is the group's only consumer. Before it connects anywhere it forks one
worker per bucket (each with PR_SET_PDEATHSIG, so they die with it) and talks to them
over pipes: a job line to worker crc32(key) % n, a done line back. A separate acker
thread XACKs an entry only when its worker reported it done, so a killed reader leaves
every unfinished entry (queued or in work) in its PEL for the next reader.

An entry stays in flight until its XACK's reply (or its dead-lettering) came back, and one
acked during a claim round is remembered until the next round: an XAUTOCLAIM page that
still lists it (claimed before the XACK landed) never sends it to a worker again. While
anything is in flight the reader does not block in XREADGROUP (it reads without BLOCK and
waits for the acker), so a reader seen blocked there owes nothing: idle means nothing owed.
In the drain it keeps the entries in flight from going idle (GroupReader.keep_held), so
no other consumer's XAUTOCLAIM takes them from its hands.
"""
from __future__ import annotations

import json
import os
import selectors
import signal
import sys
import threading
import traceback
from typing import Any

import redis

from chaos.strategies.ack import AckPolicy
from chaos.strategies.delivery.sharded import shard_of
from chaos.strategies.guards import GUARDS
from chaos.strategies.part import build
from chaos.workload.consumer import LINK_ERRORS, GroupReader
from chaos.workload.env import WorkerEnv
from chaos.events import Event
from chaos.workload.jobs import JobRunner
from chaos.workload.procutil import die_with_parent
from chaos.workload.workerspec import WorkerSpec

WORKER_DIED = 3


def _worker(spec: WorkerSpec, jobs_fd: int, done_fd: int) -> int:
    env = WorkerEnv(spec)
    env.op("info", "log", value={"started": "worker"})
    own = env.spec
    runner = JobRunner(env, build(GUARDS, own["guard"]).bind(env), AckPolicy(**own["ack"]["params"]), own["group"])
    with os.fdopen(jobs_fd, "r") as jobs, os.fdopen(done_fd, "w", buffering=1) as done:
        for line in jobs:
            job = json.loads(line)
            status = runner.apply(Event.from_dict(job["event"]), job["entry_id"])
            done.write(f"{job['entry_id']} {status}\n")
    env.close()
    return 0


def _fork_workers(spec: WorkerSpec) -> tuple[list[Any], list[int], list[int]]:
    pipes_out, done_fds, pids = [], [], []
    reader = os.getpid()
    for name in spec.role_spec["workers"]:
        jobs_r, jobs_w = os.pipe()
        done_r, done_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                die_with_parent(reader)
                for fd in (jobs_w, done_r, *done_fds, *(p.fileno() for p in pipes_out)):
                    os.close(fd)
                code = _worker(spec.helper(name), jobs_r, done_w)
            except BaseException:  # noqa: BLE001 - report, then leave without running the parent's code
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        os.close(jobs_r)
        os.close(done_w)
        pipes_out.append(os.fdopen(jobs_w, "w", buffering=1))
        done_fds.append(done_r)
        pids.append(pid)
    return pipes_out, done_fds, pids


class InFlight:
    """The entries sent to a worker and not yet acked (or dead-lettered), shared by the reader
    and the acker; `finished` holds those put down since the current claim round began."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple[str, Event, int]] = {}
        self.finished: set[str] = set()
        self.changed = threading.Condition()

    def add(self, entry_id: str, item: tuple[str, Event, int]) -> None:
        with self.changed:
            self.entries[entry_id] = item
            self.finished.discard(entry_id)

    def get(self, entry_id: str) -> tuple[str, Event, int]:
        with self.changed:
            return self.entries[entry_id]

    def put_down(self, entry_id: str) -> None:
        """Its XACK was answered (or it was dead-lettered, or failed and stays pending)."""
        with self.changed:
            self.entries.pop(entry_id, None)
            self.finished.add(entry_id)
            self.changed.notify_all()

    def known(self, entry_id: str) -> bool:
        """In flight, or put down during this claim round: a claimed copy is not handled again."""
        with self.changed:
            return entry_id in self.entries or entry_id in self.finished

    def new_claim_round(self) -> None:
        """Called before an XAUTOCLAIM is sent: an entry acked before it cannot be in its reply."""
        with self.changed:
            self.finished.clear()

    def owed(self) -> bool:
        with self.changed:
            return bool(self.entries)

    def held(self) -> list[tuple[str, str]]:
        with self.changed:
            return [(stream, entry_id) for entry_id, (stream, _, _) in self.entries.items()]

    def wait(self, timeout: float) -> None:
        """Until the acker puts an entry down (or `timeout` seconds)."""
        with self.changed:
            if self.entries:
                self.changed.wait(timeout)


class Acker(threading.Thread):
    """XACKs (or dead-letters) entries as their workers report them done."""

    def __init__(self, env: WorkerEnv, runner: JobRunner, done_fds: list[int], inflight: InFlight) -> None:
        super().__init__(name="acker", daemon=True)
        self.env, self.runner, self.inflight = env, runner, inflight
        self.r = env.new_redis(decode_responses=True, protocol=2)   # through Sentinel in that topology
        # Raw fds, each with its own buffer: a buffered reader would pull several lines off the
        # pipe at once and hand out one per wake-up, leaving the rest unacked until more came.
        self.sel = selectors.DefaultSelector()
        for fd in done_fds:
            self.sel.register(fd, selectors.EVENT_READ, bytearray())
        self.worker_died = threading.Event()

    def run(self) -> None:
        while self.sel.get_map():
            for key, _ in self.sel.select(timeout=0.5):
                data = os.read(key.fd, 65536)
                if not data:
                    self.sel.unregister(key.fd)
                    os.close(key.fd)
                    if not self.env.stopping:
                        self.worker_died.set()
                    continue
                buf = key.data
                buf += data
                *lines, rest = buf.split(b"\n")
                buf[:] = rest
                for line in lines:
                    self.done(line.decode())

    def done(self, line: str) -> None:
        """One worker's `entry_id status` line: XACK (or dead-letter) that entry."""
        entry_id, status = line.split()
        stream, ev, count = self.inflight.get(entry_id)   # in flight until the XACK's reply
        if "before_ack" in self.env.failpoints.armed:
            self.env.failpoints.hit("before_ack", **ev.op_fields())
        while True:
            try:
                self.runner.finish(self.r, stream, entry_id, ev, status, count)
                break
            except LINK_ERRORS as exc:
                self.env.op("info", "log", value={"acker": "link broken", "error": str(exc)})
                self.env.sleep_ms(50)
        self.inflight.put_down(entry_id)


def main(env: WorkerEnv) -> int:
    spec = env.spec
    pipes, done_fds, pids = _fork_workers(env.worker)
    reader = GroupReader(env)
    runner = JobRunner(env, None, reader.ack, reader.group)
    inflight = InFlight()
    acker = Acker(env, runner, done_fds, inflight)
    acker.start()
    r, n = reader.r, len(pipes)
    block_s = env.seconds(spec["block_ms"])

    def dispatch(stream: str, entry_id: str, fields: dict | None, via: str, count: int) -> None:
        if inflight.known(entry_id):
            return  # claimed back from ourselves: queued, in work, or acked since the claim was sent
        ev = runner.deliver(r, stream, entry_id, fields, via, count)
        if ev is None:
            return
        if reader.ack.max_attempts and count > reader.ack.max_attempts:
            runner.dead_letter(r, stream, entry_id, ev, count)
            return
        inflight.add(entry_id, (stream, ev, count))
        pipes[shard_of(ev.key, n)].write(json.dumps({"entry_id": entry_id, "event": ev.to_dict()}) + "\n")

    started = False
    while not env.stopping and not acker.worker_died.is_set():
        try:
            if not started:
                for item in reader.own_pending():
                    dispatch(*item)
                started = True
            reader.keep_held(inflight.held)
            if reader.claim_due():
                inflight.new_claim_round()
                for item in reader.claimed():
                    dispatch(*item)
            owed = inflight.owed()   # only the reader adds entries: none can appear during a blocking read
            resp = reader.read_new(block=not owed)
            if owed and not resp:
                inflight.wait(block_s)
            for stream, entries in resp:
                for entry_id, fields in entries:
                    dispatch(stream, entry_id, fields, "read", 1)
        except LINK_ERRORS as exc:
            reader.link_broken(exc)
        except redis.ResponseError as exc:
            if not reader.group_gone(exc):   # NOGROUP with on_nogroup=fail: leave (anything else raises)
                break
    for pipe in pipes:
        pipe.close()
    died = acker.worker_died.is_set()
    for pid in pids:
        if died:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    acker.join(timeout=5)
    if died:
        print("fan-out worker died unexpectedly; reader exits", file=sys.stderr)
        return WORKER_DIED
    return 0
