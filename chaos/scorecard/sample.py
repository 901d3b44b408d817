"""What Redis says while the consumer runs: stream length, the group's lag, each consumer's
pending entries, sampled from outside every ``interval_s`` on the current primary.

A person reads these curves first: a lag that returns to 0 after the fault window is a
consumer that kept consuming; a PEL that stays up is work nobody will claim. The sampler
is a thread with its own connection (re-resolved when the primary moves or a fault cuts
it); a sample it cannot take is recorded as a gap, never invented.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import redis


@dataclass
class Sample:
    """One look at the stream and its group (``None``: Redis did not answer)."""

    t: float                                  # time.monotonic(), as the run's history
    length: int | None = None                 # XLEN
    lag: int | None = None                    # XINFO GROUPS lag (entries not yet delivered)
    pending: int | None = None                # the group's PEL size
    per_consumer: dict[str, int] = field(default_factory=dict)   # consumer -> its PEL size


def take(r: redis.Redis, stream: str, group: str) -> Sample:
    """One sample through ``r`` (raises on a Redis error)."""
    now = time.monotonic()
    pipe = r.pipeline(transaction=False)
    pipe.xlen(stream)
    pipe.execute_command("XINFO", "GROUPS", stream)
    length, groups = pipe.execute()
    info = next((_pairs(g) for g in groups if _pairs(g).get("name") == group), None)
    if info is None:
        return Sample(now, length=length)
    consumers = r.execute_command("XINFO", "CONSUMERS", stream, group)
    per = {str(_pairs(c)["name"]): int(_pairs(c)["pending"]) for c in consumers}
    lag = info.get("lag")
    return Sample(now, length=length, lag=None if lag is None else int(lag), pending=int(info["pending"]),
                  per_consumer=per)


def _pairs(reply: Any) -> dict[str, Any]:
    """A RESP2 flat [k, v, k, v] reply (or a RESP3 map) as a dict with str keys and values."""
    items = reply.items() if isinstance(reply, dict) else zip(reply[::2], reply[1::2])
    return {_text(k): _text(v) for k, v in items}


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


class Sampler:
    """Samples the cluster's current primary in a thread until ``stop()``."""

    def __init__(self, cluster: Any, stream: str, group: str, interval_s: float = 0.1) -> None:
        self.cluster, self.stream, self.group, self.interval_s = cluster, stream, group, interval_s
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="scorecard-sampler", daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> list[Sample]:
        self._stop.set()
        self._thread.join(timeout=10)
        return self.samples

    def _connect(self) -> redis.Redis:
        ep = self.cluster.primary
        return redis.Redis(host=ep.host, port=ep.port, protocol=2, socket_timeout=0.5, socket_connect_timeout=0.5)

    def _loop(self) -> None:
        r: redis.Redis | None = None
        while not self._stop.is_set():
            try:
                r = r or self._connect()
                self.samples.append(take(r, self.stream, self.group))
            except Exception:  # noqa: BLE001 - a fault cut or moved the primary: a gap, then reconnect
                self.samples.append(Sample(time.monotonic()))
                if r is not None:
                    r.close()
                r = None
            self._stop.wait(self.interval_s)
        if r is not None:
            r.close()
