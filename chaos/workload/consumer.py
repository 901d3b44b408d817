"""The group consumer process: XREADGROUP, handle each entry, recover others' entries.

At start it re-reads its own PEL (`XREADGROUP .. 0`: a restarted consumer with the same
name finishes what its predecessor left, `via: pending`). Then it loops on
`XREADGROUP .. >` with BLOCK; the XACK of a read's last entry (and a batch's XACK with ack
batch=1) goes out in one write with the next read (XACK first, so the order of commands is
unchanged and a round trip is saved per read), on the process's one connection without
redis-py's Pipeline machinery (chaos/workload/link.py). The other entries' XACKs go out right
after their apply, as before, but their replies are not waited for: they are read with the
next read (at most UNCONFIRMED_ACKS owed), and each entry's ack op is written then, once its
XACK is confirmed; that round trip per entry was most of a cost-0 consumer's CPU and Redis's. In drain mode (SIGUSR1), or all along with claim=always,
it first runs XAUTOCLAIM with the min-idle time (`via: claim`). A broken link is
logged and retried; the process only ends on SIGTERM, or when its group is gone (NOGROUP)
and its `on_nogroup` policy says `fail`. The other policies back off, then recreate the
group from `0` or from `$` (`info group` op, shown on the timeline).

In the drain a consumer never takes work from another live consumer's hands: each one
keeps the entries it holds (the rest of its read batch or of its claimed page) from going
idle, re-claiming them to itself with `XCLAIM .. 0 .. JUSTID` (no delivery counted) at
least every quarter of the min-idle time (`keep_held`). So only entries whose holder is
gone (dead, or stopped by a fault) or that nobody holds (a lost XACK) reach the min-idle
time, and only those are claimed.

A SIGTERM that finds the consumer blocked in XREADGROUP with nothing in hand ends the wait
at once (`StopCut`: the socket is shut and the process leaves, without a read op, as a stop
that lands just after a read leaves that read's entries unhandled); otherwise it stops after
the job in hand, as before. The block (100 ms) waited out was most of every run's stop phase.
"""
from __future__ import annotations

import socket
import time
from typing import Any, Callable

import redis

from chaos.strategies.ack import AckPolicy
from chaos.strategies.guards import GUARDS
from chaos.strategies.part import build
from chaos.workload.env import WorkerEnv
from chaos.workload.failpoints import failpoint_dir
from chaos.workload.jobs import JobRunner, delivery_count
from chaos.workload.link import pinned, settle, through_sentinel

LINK_ERRORS = (redis.ConnectionError, redis.TimeoutError, OSError)
REFUSED = ("NOREPLICAS", "OOM")     # XREADGROUP and XACK are writes: a primary may refuse them
# the group is gone: NOGROUP, or UNBLOCKED for a read blocked when its stream key was deleted
GROUP_GONE = ("NOGROUP", "UNBLOCKED")
# XACKs sent and not yet confirmed, at most (link.send_only): their replies are read with the
# next read, or once this many are owed, or before a failpoint acts. A SIGKILL from outside may
# find that many sent and unconfirmed (no ack op written); through the proxy some of them may
# then never reach Redis (the dying socket's reset drops what the proxy had not read yet),
# and those entries stay pending, as an unconfirmed XACK's entry may today.
UNCONFIRMED_ACKS = 64


class GroupReader:
    """The read side shared by the consumer and the fan-out reader."""

    def __init__(self, env: WorkerEnv) -> None:
        spec = env.spec
        self.env = env
        self.streams: list[str] = spec["streams"]
        self.group: str = spec["group"]
        self.consumer: str = spec["consumer"]
        self.count: int = spec["count"]
        self.ack = AckPolicy(**spec["ack"]["params"])
        self.r = env.redis()
        self.last_claim = 0.0
        self.last_keep = 0.0

    def claim_due(self) -> bool:
        mode = self.env.spec.get("claim", "drain")
        if mode == "never" or (mode == "drain" and not self.env.draining):
            return False
        interval = self.env.seconds(self.env.spec["claim_idle_ms"]) / 4
        return time.monotonic() - self.last_claim >= interval

    def own_pending(self):
        """(stream, entry_id, fields, via, count) for this consumer's PEL (a restart)."""
        for stream in self.streams:
            resp = self.r.xreadgroup(self.group, self.consumer, {stream: "0"}, count=10_000)
            for _, entries in resp or []:
                for entry_id, fields in entries:
                    yield stream, entry_id, fields or None, "pending", delivery_count(
                        self.r, stream, self.group, entry_id)

    def claimed(self):
        """(stream, entry_id, fields, via, count) for entries idle longer than claim_idle_ms."""
        for page in self.claimed_pages():
            yield from page

    def claimed_pages(self):
        """The same, one XAUTOCLAIM page (up to 100 entries, all in hand once claimed) at a time."""
        self.last_claim = time.monotonic()
        idle = max(1, round(self.env.scaled_ms(self.env.spec["claim_idle_ms"])))
        for stream in self.streams:
            cursor = "0-0"
            while True:
                nxt, entries, *_ = self.r.xautoclaim(stream, self.group, self.consumer, idle,
                                                     start_id=cursor, count=100)
                yield [(stream, entry_id, fields or None, "claim", delivery_count(self.r, stream, self.group, entry_id))
                       for entry_id, fields in entries]
                if nxt == "0-0":
                    break
                cursor = nxt

    def read_new(self, block: bool = True):
        """One XREADGROUP > round: a list of (stream, [(entry_id, fields)]); without `block`, no BLOCK."""
        wait = max(1, round(self.env.scaled_ms(self.env.spec["block_ms"]))) if block else None
        return self.r.xreadgroup(self.group, self.consumer, {s: ">" for s in self.streams},
                                 count=self.count, block=wait, noack=self.ack.uses_noack) or []

    def keep_held(self, held: Callable[[], list[tuple[str, str]]]) -> None:
        """In the drain: the (stream, entry_id)s this consumer holds are made not idle again
        (XCLAIM to itself, min-idle 0, JUSTID: no delivery counted), every quarter of the
        min-idle time at most, so another consumer's XAUTOCLAIM cannot take them."""
        if not self.env.draining:
            return
        now = time.monotonic()
        if now - self.last_keep < self.env.seconds(self.env.spec["claim_idle_ms"]) / 4:
            return
        self.last_keep = now
        by_stream: dict[str, list[str]] = {}
        for stream, entry_id in held():
            by_stream.setdefault(stream, []).append(entry_id)
        for stream, ids in by_stream.items():
            self.r.xclaim(stream, self.group, self.consumer, 0, ids, justid=True)

    def read_now_command(self) -> tuple[Any, ...]:
        """The same read without BLOCK, as a raw command (sent after the acks it carries)."""
        return ("XREADGROUP", "GROUP", self.group, self.consumer, "COUNT", self.count,
                *(("NOACK",) if self.ack.uses_noack else ()), "STREAMS", *self.streams, *[">"] * len(self.streams))

    def group_gone(self, exc: redis.ResponseError) -> bool:
        """After NOGROUP: True once the group is recreated (read on), False when the policy is
        `fail` (the process leaves, marked as an intended exit); re-raises any other error."""
        if str(exc).split(" ", 1)[0] not in GROUP_GONE:
            raise exc
        policy = self.env.spec.get("on_nogroup", "fail")
        error = str(exc)[:200]
        if policy == "fail":
            self.env.op("info", "group", value={"group": "gone", "policy": policy, "error": error})
            marker = failpoint_dir(self.env.run_dir) / f"{self.env.name}.nogroup.kill"
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()   # the orchestrator counts the exit as intended (the policy chose it)
            return False
        self.env.sleep_ms(float(self.env.spec.get("nogroup_backoff_ms", 0)))
        start = "$" if policy.endswith("$") else "0"
        made = []
        for stream in self.streams:
            try:
                self.r.xgroup_create(stream, self.group, id=start, mkstream=True)
                made.append(stream)
            except redis.ResponseError as busy:
                if not str(busy).startswith("BUSYGROUP"):
                    raise
        self.env.op("info", "group", value={"group": "recreated" if made else "exists", "from": start,
                                             "streams": made, "policy": policy, "error": error})
        return True

    def link_broken(self, exc: Exception) -> None:
        self.env.op("info", "log", value={"link": "broken", "error": f"{type(exc).__name__}: {exc}"})
        try:
            self.r.connection_pool.disconnect()
        except Exception:  # noqa: BLE001
            pass
        self.env.sleep_ms(50)


def _rest(resp: list, stream: str, index: int) -> list[tuple[str, str]]:
    """The (stream, entry_id)s of a read from `stream`'s `index`-th entry on (still in hand)."""
    held, seen = [], False
    for name, entries in resp:
        seen = seen or name == stream
        if seen:
            held += [(name, entry_id) for entry_id, _ in (entries[index:] if name == stream else entries)]
    return held


class StopCut:
    """A blocking read a SIGTERM ends at once: while the read waits, the process's SIGTERM shuts
    its socket (the read fails as a broken link, `cut` says it was the stop). Only with nothing
    in hand: the replies owed for XACKs sent earlier are read first (their ack ops written), and
    no ack is deferred to ride with a read that blocks. Through Sentinel (a connection per call)
    the block is waited out, as before."""

    def __init__(self, env: WorkerEnv, r: redis.Redis) -> None:
        self.env, self.r = env, r
        self.cut = False

    def read(self, read_blocking: Callable[[], list]) -> list:
        env = self.env
        if env.stopping:
            return []
        if through_sentinel(self.r):
            return read_blocking()
        conn = pinned(self.r)
        settle(self.r)
        sock = conn._sock
        if sock is None:
            return read_blocking()

        def shut() -> None:
            self.cut = True
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        env.on_term = shut
        try:
            return [] if env.stopping else read_blocking()
        finally:
            env.on_term = None


def main(env: WorkerEnv) -> int:
    reader = GroupReader(env)
    guard = build(GUARDS, env.spec["guard"]).bind(env)
    runner = JobRunner(env, guard, reader.ack, reader.group)
    runner.pipelined_acks = UNCONFIRMED_ACKS
    r = reader.r

    def settle_acks() -> None:
        try:
            settle(r)
        except (*LINK_ERRORS, redis.ResponseError):
            pass    # the link broke: those XACKs' outcome stays unknown, no ack op (as for any lost reply)

    env.failpoints.before_action.append(settle_acks)
    read_now = reader.read_now_command()
    stop_cut = StopCut(env, r)

    def read_blocking() -> list:
        return stop_cut.read(reader.read_new)

    armed = env.failpoints.armed
    started = False
    while not env.stopping:
        try:
            if not started:
                for item in reader.own_pending():
                    runner.handle(r, *item)
                started = True
            if reader.claim_due():
                runner.flush_acks(r)
                for page in reader.claimed_pages():
                    for index, item in enumerate(page):
                        reader.keep_held(lambda: [(s, e) for s, e, *_ in page[index:]])
                        runner.handle(r, *item)
                        if env.stopping:
                            break
                    if env.stopping:
                        break
            resp = runner.read_after_acks(r, read_now, read_blocking)
            left = sum(len(entries) for _, entries in resp)
            for stream, entries in resp:
                for index, (entry_id, fields) in enumerate(entries):
                    if env.stopping:
                        break
                    reader.keep_held(lambda: _rest(resp, stream, index))
                    if index and "mid_batch" in armed:
                        env.failpoints.hit("mid_batch", None, entry_id=entry_id)
                    left -= 1
                    runner.hold_ack = not left  # the read's last entry: its XACK rides with the next read
                    runner.handle(r, stream, entry_id, fields, "read", 1)
            runner.hold_ack = False
        except LINK_ERRORS as exc:
            runner.hold_ack = False
            if stop_cut.cut:
                break       # the stop shut the socket of a blocked read: nothing in hand, nothing owed
            reader.link_broken(exc)
        except redis.ResponseError as exc:
            runner.hold_ack = False
            if str(exc).split(" ", 1)[0] in REFUSED:
                reader.link_broken(exc)   # the primary refused (min-replicas-to-write, maxmemory): retry, do not die
                continue
            runner.deferred.clear()       # their XACKs would find no PEL: the group they were read from is gone
            if not reader.group_gone(exc):
                return 0
    try:
        runner.flush_acks(r)  # asked to stop: what was processed is acked, as before the stop
    except (*LINK_ERRORS, redis.ResponseError) as exc:
        env.op("info", "log", value={"link": "broken", "error": f"{type(exc).__name__}: {exc}"})
    return 0
