"""The fan-out reader (S3) and its per-key-bucket worker processes.

The reader is the group's only consumer. Before it connects anywhere it forks one
worker per bucket (each with PR_SET_PDEATHSIG, so they die with it) and talks to them
over pipes: a job line to worker crc32(key) % n, a done line back. A separate acker
thread XACKs an entry only when its worker reported it done, so a killed reader leaves
every unfinished entry (queued or in work) in its PEL for the next reader.
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

from chaos.cluster.sentinel_client import spec_client
from chaos.strategies.ack import AckPolicy
from chaos.strategies.delivery.sharded import shard_of
from chaos.strategies.guards import GUARDS
from chaos.strategies.part import build
from chaos.workload.consumer import LINK_ERRORS, GroupReader
from chaos.workload.env import WorkerEnv
from chaos.events import Event
from chaos.workload.jobs import JobRunner
from chaos.workload.procutil import die_with_parent

WORKER_DIED = 3


def _worker(spec: dict[str, Any], jobs_fd: int, done_fd: int) -> int:
    env = WorkerEnv(spec)
    env.op("info", "log", value={"started": "worker"})
    runner = JobRunner(env, build(GUARDS, spec["guard"]).bind(env), AckPolicy(**spec["ack"]["params"]), spec["group"])
    with os.fdopen(jobs_fd, "r") as jobs, os.fdopen(done_fd, "w", buffering=1) as done:
        for line in jobs:
            job = json.loads(line)
            status = runner.apply(Event.from_dict(job["event"]), job["entry_id"])
            done.write(f"{job['entry_id']} {status}\n")
    env.close()
    return 0


def _fork_workers(spec: dict[str, Any]) -> tuple[list[Any], list[int], list[int]]:
    pipes_out, done_fds, pids = [], [], []
    reader = os.getpid()
    for name in spec["workers"]:
        jobs_r, jobs_w = os.pipe()
        done_r, done_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                die_with_parent(reader)
                for fd in (jobs_w, done_r, *done_fds, *(p.fileno() for p in pipes_out)):
                    os.close(fd)
                links = spec["worker_links"][name]
                code = _worker({**spec, "name": name, **links}, jobs_r, done_w)
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


class Acker(threading.Thread):
    """XACKs (or dead-letters) entries as their workers report them done."""

    def __init__(self, env: WorkerEnv, runner: JobRunner, done_fds: list[int], inflight: dict,
                 lock: threading.Lock) -> None:
        super().__init__(name="acker", daemon=True)
        self.env, self.runner, self.inflight, self.lock = env, runner, inflight, lock
        self.r = spec_client(env.spec, decode_responses=True, protocol=2)   # through Sentinel in that topology
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
        with self.lock:
            stream, ev, count = self.inflight.pop(entry_id)
        while True:
            try:
                self.runner.finish(self.r, stream, entry_id, ev, status, count)
                break
            except LINK_ERRORS as exc:
                self.env.op("info", "log", value={"acker": "link broken", "error": str(exc)})
                self.env.sleep_ms(50)


def main(env: WorkerEnv) -> int:
    spec = env.spec
    pipes, done_fds, pids = _fork_workers(spec)
    reader = GroupReader(env)
    runner = JobRunner(env, None, reader.ack, reader.group)
    inflight: dict[str, tuple[str, Event, int]] = {}
    lock = threading.Lock()
    acker = Acker(env, runner, done_fds, inflight, lock)
    acker.start()
    r, n = reader.r, len(pipes)

    def dispatch(stream: str, entry_id: str, fields: dict | None, via: str, count: int) -> None:
        with lock:
            if entry_id in inflight:
                return  # claimed back from ourselves: it is queued or in work already
        ev = runner.deliver(r, stream, entry_id, fields, via, count)
        if ev is None:
            return
        if reader.ack.max_attempts and count > reader.ack.max_attempts:
            runner.dead_letter(r, stream, entry_id, ev, count)
            return
        with lock:
            inflight[entry_id] = (stream, ev, count)
        pipes[shard_of(ev.key, n)].write(json.dumps({"entry_id": entry_id, "event": ev.to_dict()}) + "\n")

    started = False
    while not env.stopping and not acker.worker_died.is_set():
        try:
            if not started:
                for item in reader.own_pending():
                    dispatch(*item)
                started = True
            if reader.claim_due():
                for item in reader.claimed():
                    dispatch(*item)
            for stream, entries in reader.read_new():
                for entry_id, fields in entries:
                    dispatch(stream, entry_id, fields, "read", 1)
        except LINK_ERRORS as exc:
            reader.link_broken(exc)
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
