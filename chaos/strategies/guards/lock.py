"""`lock` (S4): a per-key Redis lock around work + write.

Acquire with `SET lock:<key> <token> NX PX ttl`, retrying every `retry_ms`; release by
compare-and-delete (a Lua script on Redis 7, DELEX IFEQ where the server has it), so a
holder whose TTL ran out does not delete the next holder's lock; the release answer
(1 or 0) is in the `unlock` op. A lock serializes the two events of a key but does not
order them: whichever consumer reaches the lock first writes first (S4a, S4b), and a
TTL shorter than the job lets the second in while the first still works (S4c).
"""
from __future__ import annotations

import uuid
from typing import Callable

import redis

from chaos.strategies.guards.base import APPLIED, Guard, Outcome
from chaos.params import Param
from chaos.events import Event

_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end"


def _has_delex(r: redis.Redis) -> bool:
    """DELEX (compare-and-delete in one command) exists only on newer servers (not on 7.0)."""
    try:
        r.execute_command("DELEX", "chaos:probe:delex", "IFEQ", "-")
    except redis.ResponseError as exc:
        return "unknown command" not in str(exc).lower()
    return True


class Lock(Guard):
    name = "lock"
    summary = "per-key lock SET NX PX ttl, retry every retry_ms, compare-and-delete release"
    params = (
        Param("ttl_ms", 5000.0, "lock TTL", minimum=1),
        Param("retry_ms", 20.0, "time between two acquire attempts", minimum=0),
        Param("jitter_ms", 0.0, "random delay in [0, jitter_ms] before locking (S4b)", minimum=0),
    )

    def bind(self, env):  # type: ignore[override]
        super().bind(env)
        r = env.redis()
        self._delex = _has_delex(r)
        self._release = None if self._delex else r.register_script(_RELEASE)
        return self

    def apply(self, ev: Event, entry_id: str, work: Callable[[], None]) -> Outcome:
        env, r = self.env, self.env.redis()
        if self.jitter_ms:
            env.sleep_ms(env.rng.uniform(0, self.jitter_ms))
        env.failpoints.hit("before_lock", **ev.op_fields())
        name, token = f"lock:{ev.key}", uuid.uuid4().hex
        ttl = max(1, round(env.scaled_ms(self.ttl_ms)))
        env.op("invoke", "lock", key=ev.key, event_id=ev.event_id, value=token)
        tries = 1
        while not r.set(name, token, nx=True, px=ttl):
            env.sleep_ms(self.retry_ms)
            tries += 1
        env.op("ok", "lock", key=ev.key, event_id=ev.event_id, value={"token": token, "tries": tries})
        self._held = (name, token, ev)
        work()
        rows = self.write_in_tx(ev)
        return Outcome(rows, APPLIED, {"status": ev.etype})

    def after_apply(self) -> None:
        held, self._held = getattr(self, "_held", None), None
        if held is not None:
            name, token, ev = held
            released = self.release(name, token)
            self.env.op("ok", "unlock", key=ev.key, event_id=ev.event_id, value=released)

    def release(self, name: str, token: str) -> int:
        if self._delex:
            return int(self.env.redis().execute_command("DELEX", name, "IFEQ", token))
        return int(self._release(keys=[name], args=[token]))
