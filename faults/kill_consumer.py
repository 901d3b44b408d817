"""kill-consumer: SIGKILL a consumer mid-batch, a real crash.

By time (``at=time``: from outside, ``at_ms`` into the workload, as the reference's
kill at 1.2 s into a 500-entry batch), by what the consumer holds (``at=holding``: from
outside, the first moment a consumer is seen holding entries it read) or by failpoint
(``at=mid_batch,after=250``: the worker SIGKILLs itself after 250 entries of a batch;
``after_apply_before_ack``: after the DB write, before XACK). What was delivered but not
done is then recoverable from the PEL with ack-after, and gone with ack-on-receive.

Why ``at=holding`` reads the consumer group, not the effects or the clock: a kill at a time
can land between a batch's last write and the next read, where an ack-first consumer holds
nothing and loses nothing (beside two CPU hogs, ``at_ms=300`` on 80 events at 40 ms a job:
2 runs of 20 lost 0); publishes (``after_entries``) say nothing of where a consumer is in its
batches. The group is what every consumer shows alike, the framework's and a black-box one
(the effect table says what was done, not by whom; an ack-first consumer's PEL is empty while
it works). The fault reads it every 5 ms (faults.helpers.GroupWatch, one MULTI a look) for each
candidate (``target``, else every consumer of the role: the first seen holding dies, so a
consumer that got one read early and no more does not leave the fault waiting):

* a read: the candidate's last read or claim that handed it entries moved on (XINFO CONSUMERS
  `inactive`; Redis 7.0's `idle`, which only such a read resets: neither XACK, an empty
  read nor a blocked one does), once the groups have handed out ``delivered`` entries;
* it holds that read's entries: it acked them (its PEL is back to what it was before the
  read: an ack-first consumer, at the start of its batch) and is stopped (SIGSTOP) within
  ``held_ms`` of the read, or they have been in its PEL ``held_ms`` (an ack-after one, at
  work on them). Acked and older than ``held_ms`` it may be done: the next read is awaited;
* looked at again while stopped (it runs no more code), then SIGKILL: the moment cannot
  slip between the look and the kill (a read since the stop would show). A read made before
  the first look counts, from an empty PEL.

So an ack-first victim dies with acked, unwritten entries in hand (lost in every run) and an
ack-after one with its work in the PEL (recovered). Consumers never handed entries give no
such moment: after ``wait_ms`` the fault fails and the run is unknown, not judged on a
kill that could not lose anything. What is left: a victim that finishes a whole batch in
less time than the look takes (a few ms; 5-20 under load).
"""
from __future__ import annotations

import signal
import time

from chaos.errors import BadArguments
from chaos.params import Param
from chaos.workload.procutil import process_stopped
from faults.helpers import GroupView, GroupWatch, pick_worker, process_alive, wait_for_entries, wait_until
from faults.effects import DIED_MID_WORK
from faults.interface import Fault, FaultContext, FaultError

POLL_S = 0.005   # at=holding: how often the group is read
HOLDS, WAIT, STALE = "holds", "wait", "stale"
_NOTHING_READ = GroupView(delivered=0, undelivered=0, read_ms=None, pending=0, now_ms=0)   # before a first look
KILL_POINTS = ("time", "holding", "after_read", "mid_batch", "before_apply", "after_apply_before_ack")


class KillConsumer(Fault):
    name = "kill-consumer"
    description = ("SIGKILL a consumer mid-batch, at a time, once it holds entries it read, or at a failpoint "
                   "(after k entries of a batch)")
    effect = DIED_MID_WORK
    touches_publish = False   # kills a worker process; its link and the primary are untouched
    params = (
        Param("at", "time", "time (from outside, at at_ms), holding (from outside, once a consumer holds "
              "entries it read: see held_ms) or the failpoint where the worker kills itself", choices=KILL_POINTS),
        Param("after_entries", 1, "for at=time: wait until the workload's streams hold this many "
              "entries first (1: the clock starts at the first publish)", kind=int, minimum=0),
        Param("at_ms", 1200, "for at=time: then wait this long before the SIGKILL"),
        Param("delivered", 1, "for at=holding: only a read once the workload's groups have handed out this "
              "many entries counts (XINFO GROUPS entries-read)", kind=int, minimum=0),
        Param("held_ms", 30, "for at=holding: a consumer holds what it read when it acked it within this "
              "long of the read, or has had it in its PEL this long"),
        Param("after", 250, "for a failpoint: fire after this many entries reached it", kind=int, minimum=0),
        Param("role", "consumer", "the role whose worker is killed"),
        Param("target", "", "the process name to kill (empty: one drawn from the run's seed; at=holding "
              "the first worker of the role seen holding work; a failpoint needs a name, default C1)"),
        Param("wait_ms", 30000, "how long to wait for the failpoint, for after_entries or for the victim to "
              "hold work (unscaled)"),
    )

    def validate(self) -> None:
        timed, held = {"after_entries", "at_ms"} & set(self.given), {"delivered", "held_ms"} & set(self.given)
        if self.at == "holding" and (timed or "after" in self.given):
            raise BadArguments(f"fault 'kill-consumer': at=holding kills when the victim holds work, not at "
                               f"a time or a failpoint's count; drop {', '.join(sorted(timed or {'after'}))} "
                               f"(it waits with delivered= and held_ms=)")
        if self.at != "holding" and held:
            raise BadArguments(f"fault 'kill-consumer': {', '.join(sorted(held))} applies to at=holding")
        if self.at not in ("time", "holding") and "after_entries" in self.given:
            raise BadArguments("fault 'kill-consumer': after_entries applies to at=time; a failpoint "
                               "counts with after= instead")
        if self.at == "time" and "after" in self.given:
            raise BadArguments("fault 'kill-consumer': after= counts entries at a failpoint; "
                               "with at=time give at_ms= instead (or at=mid_batch,after=250)")

    def explains(self) -> frozenset[str]:
        """A killed producer leaves the rest of its schedule unattempted."""
        producer = self.role == "producer" or self.target.startswith("P")
        return frozenset({"unattempted"}) if producer else frozenset()

    @property
    def victim(self) -> str:
        return self.target or "C1"

    def failpoints(self) -> dict[str, dict[str, dict]]:
        if self.at in ("time", "holding"):
            return {}
        return {self.victim: {self.at: {"action": "kill", "after": self.after, "count": 1}}}

    def arm(self, ctx: FaultContext) -> None:
        self.armed_for = id(ctx)
        self.killed: list[str] = []

    def run(self, ctx: FaultContext) -> None:
        if getattr(self, "armed_for", None) != id(ctx):
            self.arm(ctx)
        if self.at == "holding":
            self._kill_holding(ctx)
            return
        if self.at == "time":
            after_entries = self.values.get("after_entries", 0)   # (kill-dispatcher has none)
            if after_entries:
                wait_for_entries(ctx, after_entries, self.wait_ms / 1000, self.name)
            ctx.sleep(self.at_ms)
            worker = pick_worker(ctx, self.role, self.target)
            worker.kill(signal.SIGKILL)
            self.killed.append(worker.name)
            ctx.record("start", name=self.name, spec=self.spec, worker=worker.name, pid=worker.pid,
                       signal="SIGKILL")
            return
        # The worker kills itself at the failpoint; record when it is gone.
        worker = pick_worker(ctx, self.role, self.victim)
        deadline = time.monotonic() + self.wait_ms / 1000
        gone = wait_until(lambda: not process_alive(worker.pid) or ctx.stop_event.is_set(),
                          max(0.0, deadline - time.monotonic()))
        dead = gone and not process_alive(worker.pid)
        if dead:
            self.killed.append(worker.name)
        ctx.record("start" if dead else "info", name=self.name, spec=self.spec, worker=worker.name,
                   pid=worker.pid, failpoint=self.at, fired=dead)

    def heal(self, ctx: FaultContext) -> None:
        """A SIGKILL is not undone: recovery is the surviving consumers' XAUTOCLAIM in the drain."""

    def _kill_holding(self, ctx: FaultContext) -> None:
        """Look every POLL_S at each candidate (`target`, else every live worker of the role, in an
        order drawn from ctx.rng); the first seen holding a read's entries (module docstring) is
        stopped, looked at again and SIGKILLed (or SIGCONTed, and the looks go on)."""
        redis, held_ms = ctx.cluster.direct_redis("primary"), ctx.scale(self.held_ms) * 1000
        if self.target:
            candidates = [pick_worker(ctx, self.role, self.target)]
        else:
            candidates = [w for w in ctx.workers(self.role) if w.alive()]
            ctx.rng.shuffle(candidates)
            if not candidates:
                raise FaultError(f"no live {self.role} worker to act on")
        watch, names = GroupWatch(redis), [w.name for w in candidates]
        started = time.monotonic()
        deadline, looks = started + self.wait_ms / 1000, 0
        seen: dict[str, GroupView] = {}       # each candidate's last look
        fresh: dict[str, GroupView] = {}      # the look before the read it now holds
        while time.monotonic() < deadline and not ctx.stop_event.is_set():
            views, looked = watch.look(names) or {}, time.monotonic()
            for worker in [w for w in candidates if w.alive() and w.name in views]:
                view = views[worker.name]
                before = seen.get(worker.name, _NOTHING_READ)
                if view.delivered >= self.delivered and _read_since(before, view):
                    fresh[worker.name] = before
                seen[worker.name] = view
                state = _holding(fresh[worker.name], view, held_ms) if worker.name in fresh else WAIT
                if state == STALE:
                    del fresh[worker.name]    # acked long ago: it may be done with them; its next read is awaited
                if state != HOLDS:
                    continue
                looks += 1
                worker.kill(signal.SIGSTOP)
                stopped = time.monotonic()
                at_stop = view.idle_ms + (stopped - looked) * 1000   # the read's age when it stopped (at most)
                try:
                    wait_until(lambda: process_stopped(worker.pid) or not worker.alive(), 1.0)
                    again = (watch.look([worker.name]) or {}).get(worker.name)
                    # stopped, it runs no more code: what it holds is what it held at the stop, when
                    # an acked read was at most at_stop old (this thread may lag behind its look)
                    acked = _acked(fresh[worker.name], view)
                    if (again is not None and not _read_since(view, again) and _acked(fresh[worker.name], again) == acked
                            and (at_stop < held_ms if acked else True)):
                        worker.kill(signal.SIGKILL)
                        self.killed.append(worker.name)
                        ctx.record("start", name=self.name, spec=self.spec, worker=worker.name, pid=worker.pid,
                                   signal="SIGKILL", holding={"read_ms_ago": view.idle_ms, "pending": again.pending,
                                                              "stopped_ms_after_read": round(at_stop),
                                                              "pending_before_read": fresh[worker.name].pending,
                                                              "undelivered": again.undelivered,
                                                              "delivered": again.delivered},
                                   looks=looks, waited_s=round(stopped - started, 3))
                        return
                finally:
                    if not self.killed:
                        worker.kill(signal.SIGCONT)
            if not any(w.alive() for w in candidates):
                raise FaultError(f"fault {self.name!r}: {', '.join(w.name for w in candidates)} died before "
                                 f"one was seen holding work")
            time.sleep(POLL_S)
        if ctx.stop_event.is_set():
            return
        raise FaultError(f"fault {self.name!r}: {', '.join(w.name for w in candidates)} never seen holding "
                         f"entries read (a read that handed entries, then acked within {self.held_ms} ms or "
                         f"pending {self.held_ms} ms) in {time.monotonic() - started:.0f} s; the workload "
                         f"needs more entries, or lower held_ms")


def _read_since(before: GroupView, now: GroupView) -> bool:
    """A read (or claim) handed the consumer entries between the two looks (2 ms: the clock's grain)."""
    return now.read_ms is not None and (before.read_ms is None or now.read_ms > before.read_ms + 2)


def _holding(before: GroupView, now: GroupView, held_ms: float) -> str:
    """Whether the consumer holds the entries of its last read, as `now` shows it (`before`: the
    look before that read; the caller checks no read came since): HOLDS when it acked them within
    `held_ms` of the read (its PEL is back to what it was: an ack-first consumer, right after its
    read) or has had them in its PEL for `held_ms` (ack-after, at work on them); STALE when it
    acked them and the read is older than that (it may be done: its next read is awaited)."""
    acked = _acked(before, now)
    if now.idle_ms < held_ms:
        return HOLDS if acked else WAIT
    return STALE if acked else HOLDS


def _acked(before: GroupView, now: GroupView) -> bool:
    """The consumer's PEL is back to what it was before its last read: it acked what it read."""
    return now.pending <= before.pending
