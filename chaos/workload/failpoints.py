"""Named failpoints inside worker processes (docs/INTERFACES.md section 8).

A worker's spec lists `{name: {"action": "kill"|"pause"|"signal"|"fail", "after": n,
"count": 1, "pause_ms": ..., "etype"/"key"/"event_id": ...}}`. The hits after the first
`after` fire, `count` times (with `every` = k: every k-th hit after those). The selectors limit a failpoint to matching events, which is
how a test makes the `created` consumer reach the lock last (S4a wrong every run)
without touching the guard's code. Actions: `kill` = SIGKILL itself (a marker file tells
the orchestrator the death was intended); `pause` = sleep pause_ms (scaled); `signal` =
write `<run_dir>/failpoints/<process>.<name>` (the failpoint op as JSON) and SIGSTOP
itself until the orchestrator SIGCONTs it; `fail` = raise FailpointFailure, which the
caller treats as the operation failing.
"""
from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from chaos.strategies.plan import PRODUCER

NAMES = ("after_read", "mid_batch", "after_apply_before_ack", "before_apply", "in_work", "before_lock",
         "before_commit", "after_commit", "after_xadd_before_mark", "before_publish", "after_publish_fail",
         "before_ack")   # before_ack: the S3 acker, a worker's entry done, its XACK not yet sent
ACTIONS = ("kill", "pause", "signal", "fail")
NO_FAIL = {"after_commit": "the effect has committed"}   # places where nothing is left to fail
SELECTORS = ("etype", "key", "event_id")
_KEYS = {"action", "after", "count", "every", "pause_ms", *SELECTORS}


# Which failpoints a role's processes reach (a fault's check asks before anything starts).
CONSUMER_FAILPOINTS = {"after_read", "mid_batch", "before_apply", "in_work", "before_lock", "before_commit",
                       "after_commit", "after_apply_before_ack"}
PRODUCER_FAILPOINTS = {"before_publish"}
ROLE_FAILPOINTS = {"dispatcher": {"before_publish", "after_xadd_before_mark", "after_publish_fail"},
                   "outbox-producer": {"before_publish"},
                   # the S3 fan-out reader runs its workers' jobs and the acker (before_ack) in one process
                   "reader": CONSUMER_FAILPOINTS | {"before_ack"}}


def role_failpoints(role: str) -> set[str]:
    """The failpoints the processes of `role` (a plan's role or kind) pass through."""
    return ROLE_FAILPOINTS.get(role) or (PRODUCER_FAILPOINTS if role == PRODUCER else CONSUMER_FAILPOINTS)


class FailpointFailure(Exception):
    """Raised by a failpoint with action `fail`: the operation at that place fails."""


def failpoint_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "failpoints"


@dataclass
class Failpoint:
    name: str
    action: str
    after: int = 0
    count: int = 1
    every: int = 0
    pause_ms: float = 100.0
    etype: str | None = None
    key: str | None = None
    event_id: str | None = None
    hits: int = 0
    fired: int = 0

    def due(self, etype: str | None, key: str | None, event_id: str | None) -> bool:
        for want, got in ((self.etype, etype), (self.key, key), (self.event_id, event_id)):
            if want is not None and str(want) != str(got):
                return False
        self.hits += 1
        if self.hits <= self.after or self.fired >= self.count:
            return False
        if self.every > 1 and (self.hits - self.after) % self.every:   # the k-th, 2k-th... hit
            return False
        self.fired += 1
        return True


@dataclass
class Failpoints:
    """The failpoints armed in one process; `hit()` is called at each named place."""

    process: str
    run_dir: Path
    record: Callable[..., dict]          # HistoryWriter.op
    sleep_ms: Callable[[float], None]    # scaled sleep
    armed: dict[str, Failpoint] = field(default_factory=dict)
    # run before a failpoint acts (the consumer reads the replies its XACKs are owed, so a kill
    # or stop there finds every XACK sent before it confirmed and recorded, as when each was waited for)
    before_action: list[Callable[[], None]] = field(default_factory=list)

    @classmethod
    def from_spec(cls, spec: dict[str, dict], **kw: Any) -> Failpoints:
        fps = cls(**kw)
        for name, conf in (spec or {}).items():
            fps.armed[name] = Failpoint(name=name, **conf)
        return fps

    def hit(self, name: str, etype: str | None = None, *, key: str | None = None,
            event_id: str | None = None, **context: Any) -> None:
        fp = self.armed.get(name)
        if fp is None or not fp.due(etype, key, event_id):
            return
        for settle in self.before_action:
            settle()
        fields = {k: v for k, v in (("etype", etype), ("key", key), ("event_id", event_id)) if v is not None}
        op = self.record("info", "failpoint", **fields, **context,
                         value={"name": name, "action": fp.action, "hit": fp.hits})
        directory = failpoint_dir(self.run_dir)
        if fp.action == "kill":
            directory.mkdir(parents=True, exist_ok=True)
            (directory / f"{self.process}.{name}.kill").touch()
            os.kill(os.getpid(), signal.SIGKILL)
        elif fp.action == "pause":
            self.sleep_ms(fp.pause_ms)
        elif fp.action == "signal":
            directory.mkdir(parents=True, exist_ok=True)
            tmp = directory / f".{self.process}.{name}.tmp"
            tmp.write_text(json.dumps({**op, "pid": os.getpid()}))
            tmp.rename(directory / f"{self.process}.{name}")
            os.kill(os.getpid(), signal.SIGSTOP)   # the orchestrator acts, then SIGCONTs
        elif fp.action == "fail":
            raise FailpointFailure(f"failpoint {name} (action fail) in {self.process}")


def validate(spec: dict[str, dict]) -> None:
    """Reject unknown names, actions and keys before anything starts (raises ValueError)."""
    for name, conf in (spec or {}).items():
        if name not in NAMES:
            raise ValueError(f"unknown failpoint {name!r}; failpoints are: {', '.join(NAMES)}")
        if conf.get("action") not in ACTIONS:
            raise ValueError(f"failpoint {name}: action {conf.get('action')!r} is not one of {', '.join(ACTIONS)}")
        if name in NO_FAIL and conf.get("action") == "fail":
            raise ValueError(f"failpoint {name}: action fail is not possible there ({NO_FAIL[name]}); "
                             "use kill, pause or signal")
        extra = set(conf) - _KEYS
        if extra:
            raise ValueError(f"failpoint {name}: unknown keys {sorted(extra)}; allowed: {', '.join(sorted(_KEYS))}")
