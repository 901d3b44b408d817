"""Hand-made histories for the checker's tests: a clock that ticks 1 ms per op."""
from __future__ import annotations

from dataclasses import dataclass

from chaos.checker import FinalState


@dataclass(frozen=True)
class Ev:
    """An intended event, as the workload creates it."""

    event_id: str
    key: str
    version: int
    etype: str

    @property
    def fields(self) -> dict:
        return {"event_id": self.event_id, "key": self.key, "version": self.version, "etype": self.etype}


CREATED_42 = Ev("e42-1", "42", 1, "created")
PAID_42 = Ev("e42-2", "42", 2, "paid")
CREATED_43 = Ev("e43-1", "43", 1, "created")
PAID_43 = Ev("e43-2", "43", 2, "paid")


class History:
    """Builds ops in time order, the way workers would write them."""

    def __init__(self, start: float = 1000.0) -> None:
        self.time = start
        self.ops: list[dict] = []

    def op(self, process: str, type: str, f: str, **fields) -> History:
        self.time += 0.001
        self.ops.append({"time": self.time, "process": process, "type": type, "f": f, **fields})
        return self

    def publish(self, ev: Ev, outcome: str = "ok", *, entry_id: str | None = None,
                stream: str = "orders", process: str = "P-order") -> History:
        self.op(process, "invoke", "publish", **ev.fields)
        if outcome == "dangling":
            return self
        extra = {"entry_id": entry_id, "stream": stream} if entry_id else {}
        return self.op(process, outcome, "publish", **ev.fields, **extra)

    def deliver(self, ev: Ev, entry_id: str, *, via: str = "read", count: int = 1,
                process: str = "C1", stream: str = "orders") -> History:
        return self.op(process, "ok", "deliver", **ev.fields, entry_id=entry_id, stream=stream,
                       via=via, delivery_count=count)

    def apply(self, ev: Ev, effect: str = "applied", *, process: str = "C1", **value) -> History:
        """Invoke + ok; `value` extras such as locked_at=... or inbox="seen" go into `value`."""
        rows = 1 if effect == "applied" else 0
        self.op(process, "invoke", "apply", **ev.fields)
        return self.op(process, "ok", "apply", **ev.fields, rows=rows, effect=effect,
                       value={"status": ev.etype, **value})

    def apply_unknown(self, ev: Ev, *, process: str = "C1", dangling: bool = False) -> History:
        """An apply whose COMMIT reply was lost (`info`), or whose process died (`dangling`)."""
        self.op(process, "invoke", "apply", **ev.fields)
        if dangling:
            return self
        return self.op(process, "info", "apply", **ev.fields, value="server closed the connection")

    def ack(self, ev: Ev, entry_id: str, *, process: str = "C1") -> History:
        return self.op(process, "ok", "ack", **ev.fields, entry_id=entry_id)

    def handle(self, ev: Ev, entry_id: str, *, process: str = "C1", effect: str = "applied",
               via: str = "read", count: int = 1) -> History:
        """Deliver, apply, ack: the normal life of an entry."""
        self.deliver(ev, entry_id, via=via, count=count, process=process)
        self.apply(ev, effect, process=process)
        return self.ack(ev, entry_id, process=process)

    def fault(self, name: str, phase: str) -> History:
        return self.op("nemesis", "info", "fault", value={"name": name, "phase": phase})


def final(rows: dict[str, tuple[str, int]] | None = None, **lists) -> FinalState:
    """A FinalState from `{key: (status, version)}` plus any FinalState list fields."""
    state_rows = {k: {"status": s, "version": v} for k, (s, v) in (rows or {}).items()}
    return FinalState(rows=state_rows, **lists)
