"""Helpers shared by fault modules: picking a worker or a proxy, toxics that heal exactly,
anchoring a fault to the workload's progress, and loud heal failures."""
from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from chaos.cluster.spawner import wait_until  # noqa: F401 - for the fault modules: one import place
from chaos.errors import BadArguments
from faults.interface import FaultContext, FaultError, WorkerHandle


LINKS = ("redis", "replica", "postgres", "replication")
SIGNALS = ("KILL", "TERM", "INT", "STOP", "CONT", "QUIT")


def pick_worker(ctx: FaultContext, role: str, target: str = "") -> WorkerHandle:
    """The worker a fault acts on: by name if ``target`` is set, else one drawn from ctx.rng."""
    workers = [w for w in ctx.workers(role) if w.alive()]
    if target:
        named = [w for w in workers if w.name == target]
        if not named:
            raise FaultError(f"no live {role} worker named {target!r}; live: {[w.name for w in workers]}")
        return named[0]
    if not workers:
        raise FaultError(f"no live {role} worker to act on")
    return workers[ctx.rng.randrange(len(workers))]


def proxy_for(ctx: FaultContext, link: str, target: str = "") -> list[str]:
    """Proxy names for a link: a shared link (``redis``, ``replication``...) when target is
    empty or ``shared``; the link of one worker process (by name or role) otherwise."""
    cluster = ctx.cluster
    if not target or target == "shared":
        if link not in cluster.links:
            raise FaultError(f"the topology has no shared link {link!r}; it has {sorted(cluster.links)}")
        return [cluster.links[link]]
    names: list[str] = []
    try:
        handles = list(ctx.workers(target))
    except Exception:  # noqa: BLE001 - an unknown role: treat target as a process name
        handles = []
    procs = [w.name for w in handles] or [target]
    for proc in procs:
        links = cluster.worker_links(proc)
        if link not in links.proxies:
            raise FaultError(f"worker {proc!r} has no {link!r} link; it has {sorted(links.proxies)}")
        names.append(links.proxies[link])
    return names


def check_link_target(fault: str, link: str, target: str) -> None:
    """A worker has its own redis, replica and postgres links; replication is the replica's."""
    if link == "replication" and target and target != "shared":
        raise BadArguments(f"fault {fault!r}: workers have no replication link (it is the replica's "
                           f"link to the primary); drop target={target} or pick link=redis|replica|postgres")


def workload_streams(redis: Any, exclude: tuple[str, ...] = ("dlq",)) -> list[str]:
    """Every stream key on the server except DLQ streams."""
    return sorted(k for k in redis.scan_iter(_type="stream") if not any(part in k for part in exclude))


def wait_for_entries(ctx: FaultContext, count: int, timeout_s: float, fault: str) -> float:
    """Block until the workload's streams hold ``count`` entries; return the seconds waited.
    Anchors a fault to the workload's progress instead of the clock (a loaded machine
    starts its producers late)."""
    started = time.monotonic()
    redis = ctx.cluster.direct_redis("primary")
    while True:
        if sum(redis.xlen(s) for s in workload_streams(redis)) >= count:
            return time.monotonic() - started
        if time.monotonic() - started > timeout_s:
            raise FaultError(f"fault {fault!r}: the workload's streams never reached {count} entries "
                             f"in {timeout_s:.0f} s; lower after_entries")
        time.sleep(0.002)


@dataclass(frozen=True)
class GroupView:
    """What the workload's consumer groups show of one consumer, read in one MULTI (one instant).

    ``delivered``: entries the groups have handed out (XINFO GROUPS entries-read, summed);
    ``undelivered``: entries not yet handed out by a group the consumer reads in (lag);
    ``read_ms``: when (server clock, ms) a read or claim last handed the consumer entries
    (XINFO CONSUMERS `inactive`, on Redis 7.0 `idle`, which only such a read resets; None:
    none yet), the latest over its groups; ``pending``: its PEL, summed; ``now_ms``: the
    server's clock. A process's consumers are the ones named by its process name (the worker
    contract's CHAOS_CONSUMER), with or without a suffix (``C1-reclaim``)."""

    delivered: int
    undelivered: int
    read_ms: int | None
    pending: int
    now_ms: int

    @property
    def idle_ms(self) -> int | None:
        """How long ago the consumer last got entries."""
        return None if self.read_ms is None else self.now_ms - self.read_ms


class GroupWatch:
    """Looks at the workload's consumer groups for some consumers, one MULTI a look (one
    round trip: the streams and their groups are listed again only when they change)."""

    def __init__(self, redis: Any) -> None:
        self.redis = redis
        self.pairs: list[tuple[str, str]] = []

    def look(self, consumers: list[str]) -> dict[str, GroupView] | None:
        """Each of `consumers`' GroupView now; None when a group changed under the read
        (deleted, being recreated): ask again."""
        import redis as redis_lib

        for attempt in (1, 2):
            try:
                if not self.pairs or attempt == 2:
                    self.pairs = [(s, _text(g["name"])) for s in workload_streams(self.redis)
                                  for g in self.redis.xinfo_groups(s)]
                pipe = self.redis.pipeline(transaction=True)
                pipe.time()
                for stream, group in self.pairs:
                    pipe.xinfo_groups(stream)
                    pipe.xinfo_consumers(stream, group)
                now, *replies = pipe.execute()
                return self._views(consumers, now, replies)
            except (redis_lib.ResponseError, LookupError):
                continue
        return None

    def _views(self, consumers: list[str], now: Any, replies: list[Any]) -> dict[str, GroupView]:
        now_ms = now[0] * 1000 + now[1] // 1000
        delivered = 0
        sums = {c: [0, 0, None] for c in consumers}          # undelivered, pending, read_ms
        for (stream, group), groups, found in zip(self.pairs, replies[0::2], replies[1::2]):
            info = next((g for g in groups if _text(g["name"]) == group), None)
            if info is None:
                raise LookupError(group)
            got = info.get("entries-read")
            delivered += got if got is not None else self.redis.xlen(stream)
            lag = info.get("lag")
            for name, acc in sums.items():
                mine = [c for c in found if _named(_text(c["name"]), name)]
                if not mine:
                    continue
                if lag is None:   # (not known after deletions: look past the last-delivered id)
                    lag = len(self.redis.xrange(stream, "(" + _text(info["last-delivered-id"]), "+", count=1))
                acc[0] += lag
                acc[1] += sum(c["pending"] for c in mine)
                for c in mine:
                    since = c.get("inactive", c["idle"])   # (7.2 added inactive; idle became any attempt)
                    if since is not None and since >= 0:
                        acc[2] = max(acc[2] or 0, now_ms - since)
        return {name: GroupView(delivered, undelivered, read, pending, now_ms)
                for name, (undelivered, pending, read) in sums.items()}


def group_view(redis: Any, consumer: str) -> GroupView | None:
    """`consumer`'s GroupView now (GroupWatch.look, for one); None: ask again."""
    views = GroupWatch(redis).look([consumer])
    return None if views is None else views[consumer]


def _named(name: str, process: str) -> bool:
    """Whether consumer `name` is process `process`'s: its name, or its name and a suffix
    (FastStream's ``C1-reclaim`` subscriber is process C1's)."""
    return name == process or (name.startswith(process) and not name[len(process)].isalnum())


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def workload_settled(redis: Any, events: int) -> bool:
    """The workload's streams hold `events` entries and every group has read and acked them all."""
    streams = workload_streams(redis)
    if sum(redis.xlen(s) for s in streams) < events:
        return False
    for stream in streams:
        last = redis.xinfo_stream(stream)["last-generated-id"]
        if any(g["pending"] or g["last-delivered-id"] != last for g in redis.xinfo_groups(stream)):
            return False
    return True


def once_settled(fault: Any, events: int, timeout_s: float = 30.0) -> Any:
    """A copy of `fault` that acts only once the workload has settled (`workload_settled`, at
    most `timeout_s`): a fault that must come after the workload, by a condition, not a time
    a loaded machine's unfinished workload could still meet."""
    class OnceSettled(type(fault)):
        def run(self, ctx: Any) -> None:
            redis, deadline = ctx.cluster.direct_redis("primary"), time.monotonic() + timeout_s
            while not workload_settled(redis, events) and time.monotonic() < deadline:
                time.sleep(0.01)
            super().run(ctx)

    return OnceSettled(**fault.given)


def signal_number(name: str) -> int:
    """``KILL`` / ``SIGKILL`` / ``9`` -> 9."""
    text = str(name).upper()
    if text.isdigit():
        return int(text)
    return int(getattr(signal, text if text.startswith("SIG") else "SIG" + text))


class ToxicSet:
    """Toxics a fault added, so heal removes exactly those (and re-enables what it disabled)."""

    def __init__(self, api: Any) -> None:
        self.api = api
        self.toxics: list[tuple[str, str]] = []
        self.disabled: list[str] = []
        self.lock = threading.Lock()

    def add(self, proxy: str, type: str, *, stream: str = "downstream", name: str | None = None,
            toxicity: float = 1.0, **attributes: Any) -> str:
        name = name or f"chaos-{type}-{stream}"
        self.api.add_toxic(proxy, type, stream=stream, name=name, toxicity=toxicity, **attributes)
        with self.lock:
            self.toxics.append((proxy, name))
        return name

    def disable(self, proxy: str) -> None:
        self.api.update_proxy(proxy, enabled=False)
        with self.lock:
            self.disabled.append(proxy)

    def remove_all(self) -> list[str]:
        """Remove every toxic and re-enable every proxy; return the errors (empty = healed)."""
        errors: list[str] = []
        with self.lock:
            toxics, self.toxics = self.toxics, []
            disabled, self.disabled = self.disabled, []
        for proxy, name in toxics:
            try:
                self.api.remove_toxic(proxy, name)
            except Exception as exc:  # noqa: BLE001 - report, keep healing the rest
                if getattr(exc, "status", None) != 404:
                    errors.append(f"remove toxic {name} on {proxy}: {exc}")
        for proxy in disabled:
            try:
                self.api.update_proxy(proxy, enabled=True)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"re-enable proxy {proxy}: {exc}")
        return errors


def raise_if(errors: Iterable[str], fault: str) -> None:
    """Make heal failures loud: the test errors and the cluster gets rebuilt."""
    errors = list(errors)
    if errors:
        raise FaultError(f"fault {fault!r} did not heal: " + "; ".join(errors))


def process_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def arrivals(ctx: FaultContext, point: str, done: threading.Event | None = None,
             poll_ms: float = 200) -> Iterator[WorkerHandle]:
    """Each worker that reaches failpoint `point` (stopped there by its `signal` action), as it
    arrives, until `done` is set or the run stops: the watch hold, xautoclaim and long-job keep on
    their failpoints (the caller resumes or holds each one)."""
    while not (done is not None and done.is_set()) and not ctx.stop_event.is_set():
        try:
            worker, _ = ctx.wait_failpoint(point, poll_ms)
        except FaultError:  # nobody there yet: look again
            time.sleep(0.01)
            continue
        yield worker


def heal_stopped(fault: Any, ctx: FaultContext, *resumes: Callable[[], None]) -> None:
    """The heal of a fault that stops workers at failpoints: nothing when this run did not arm
    it; else its watchers end (`fault.done`) and `resumes` run in order (each resumes workers it
    still holds); an error is the fault's FaultError."""
    if getattr(fault, "armed_for", None) != id(ctx):
        return
    fault.done.set()
    try:
        for resume in resumes:
            resume()
    except Exception as exc:  # noqa: BLE001
        raise FaultError(f"fault {fault.name!r} could not resume the workers it stopped: {exc}") from exc
