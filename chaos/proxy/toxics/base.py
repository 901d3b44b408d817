"""What every toxic shares: its attribute schema, and the per-connection stage that runs it.

A toxic is declared once (`ToxicType`: name, Go struct name, attributes with their Go
types) and instantiated per connection and direction as a `Stage`. Stages form a chain
between the reading side and the writing side of one direction of one connection, like
the real Toxiproxy's ToxicStubs, but driven by callbacks on the event loop instead of one
goroutine per toxic, so an idle toxic costs nothing and a zero-delay one costs a call.
"""
from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Protocol

INT64 = "int64"
INT = "int"
_INT64_RANGE = (-(2**63), 2**63 - 1)


class AttributeError_(ValueError):
    """An attribute value Go's JSON decoder would refuse; the text is Go's."""


class Sink(Protocol):
    """Where a stage sends its output: the next stage, or the destination socket."""

    def push(self, data: bytes, ts: float) -> None: ...
    def push_eof(self) -> None: ...


class LinkControl(Protocol):
    """What a stage may ask of the connection it runs in."""

    loop: asyncio.AbstractEventLoop

    def hold(self, nbytes: int) -> None: ...
    def release(self, nbytes: int) -> None: ...


def go_type_name(value: Any) -> str:
    """The JSON kind Go names in 'cannot unmarshal <kind> into ...'."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, list):
        return "array"
    return "object"


def decode_int(value: Any, where: str, go_type: str) -> int:
    """Decode a JSON value into a Go integer field, with Go's error text."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AttributeError_(
            f"json: cannot unmarshal {go_type_name(value)} into Go struct field {where} of type {go_type}"
        )
    literal = getattr(value, "text", None) or repr(value)
    if isinstance(value, float) or not (_INT64_RANGE[0] <= value <= _INT64_RANGE[1]):
        raise AttributeError_(
            f"json: cannot unmarshal number {literal} into Go struct field {where} of type {go_type}"
        )
    return int(value)


@dataclass
class Deadline:
    """A timer that never fires before `due` on time.monotonic().

    The event loop's own clock (libuv's under uvloop) is cached per iteration at
    millisecond precision, so a plain call_at can fire a little early; toxics promise
    "at least the delay", so an early wake-up just re-arms for the rest.
    """

    __slots__ = ("loop", "due", "callback", "handle")

    def __init__(self, loop: asyncio.AbstractEventLoop, due: float, callback: "Callable[[], None]") -> None:
        self.loop, self.due, self.callback = loop, due, callback
        self.handle = loop.call_later(max(0.0, due - time.monotonic()), self._fire)

    def _fire(self) -> None:
        left = self.due - time.monotonic()
        if left > 0:
            self.handle = self.loop.call_later(left, self._fire)
        else:
            self.callback()

    def cancel(self) -> None:
        self.handle.cancel()


def later(loop: asyncio.AbstractEventLoop, delay_s: float, callback: "Callable[[], None]") -> Deadline:
    return Deadline(loop, time.monotonic() + delay_s, callback)


@dataclass
class ToxicType:
    """A toxic kind as the API knows it: name, Go struct name, attributes and their order."""

    name: str
    go_name: str
    attributes: dict[str, str]
    stage: type["Stage"]

    def defaults(self) -> dict[str, int]:
        return {attr: 0 for attr in self.attributes}

    def decode(self, current: dict[str, int], body: Any) -> dict[str, int]:
        """Decode `attributes` over `current` as Go does: unknown keys ignored, null keeps.

        Go matches JSON keys to fields case-insensitively, preferring an exact match.
        """
        values = dict(current)
        if body is None:
            return values
        if not isinstance(body, dict):
            raise AttributeError_(
                f"json: cannot unmarshal {go_type_name(body)} into Go struct field "
                f".attributes of type toxics.{self.go_name}"
            )
        for key, raw in body.items():
            attr = key if key in self.attributes else next(
                (a for a in self.attributes if a.lower() == key.lower()), None
            )
            if attr is None or raw is None:
                continue
            values[attr] = decode_int(raw, f"{self.go_name}.attributes.{attr}", self.attributes[attr])
        return values


@dataclass
class ToxicSettings:
    """One toxic's current settings; shared by every connection's stage of it."""

    kind: ToxicType
    name: str
    stream: str          # verbatim, as the client sent it
    direction: str       # "upstream" | "downstream"
    toxicity: float
    attributes: dict[str, int] = field(default_factory=dict)


class Stage:
    """One toxic in one direction of one connection: a pass-through by default.

    `rerun` is called when the chain changes around it (Toxiproxy re-runs the stub,
    drawing toxicity again); `active` is the result of that draw.
    """

    kind: ClassVar[str] = "noop"
    state_survives_rerun: ClassVar[bool] = False

    def __init__(self, settings: ToxicSettings, link: LinkControl, out: Sink, rng: random.Random) -> None:
        self.settings = settings
        self.link = link
        self.out = out
        self.rng = rng
        self.closed = False
        self.active = rng.random() < settings.toxicity
        self.start()

    # -- life cycle -------------------------------------------------------------------
    def start(self) -> None:
        """Called when the stage (re)starts running with its current settings."""

    def stop(self) -> None:
        """Cancel timers; called before a rerun and when the connection goes away."""

    def rerun(self) -> None:
        """Interrupt and run again: flush what is in flight, redraw toxicity, restart."""
        self.stop()
        pending = self.drain_pending()
        self.active = self.rng.random() < self.settings.toxicity
        self.start()
        for item in pending:
            if item is None:
                self.push_eof()
            else:
                self.push(*item)

    def drain_pending(self) -> list[tuple[bytes, float] | None]:
        """Chunks accepted but not yet passed on, handed back for re-processing."""
        return []

    def cleanup(self) -> bool:
        """Called when the toxic is removed; True if that closed this direction."""
        return False

    def close_output(self) -> None:
        """End this direction here (Toxiproxy's stub.Close): later stages see EOF."""
        if not self.closed:
            self.closed = True
            self.stop()
            self.out.push_eof()

    # -- data -------------------------------------------------------------------------
    def push(self, data: bytes, ts: float) -> None:
        if not self.closed:
            self.out.push(data, ts)

    def push_eof(self) -> None:
        if not self.closed:
            self.closed = True
            self.out.push_eof()


class SequentialStage(Stage):
    """A stage that handles chunks one at a time, each split into timed pieces.

    This is the shape of Toxiproxy's latency, bandwidth, slicer and slow_close goroutines:
    the head chunk is planned as `(due, data, ts)` pieces; later chunks wait their turn.
    Pieces already due go out synchronously, so zero-delay settings add no timer.
    """

    def start(self) -> None:
        self.waiting: deque[tuple[bytes, float] | None] = getattr(self, "waiting", deque())
        self.pieces: deque[tuple[float, bytes | None, float]] = deque()
        self.timer: Deadline | None = None

    def stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def drain_pending(self) -> list[tuple[bytes, float] | None]:
        # An interrupted toxic sends its in-flight chunk on at once ("don't drop data"),
        # and the chunks still queued are handled again by the new run.
        while self.pieces:
            _, data, ts = self.pieces.popleft()
            if data is None:
                self.out.push_eof()
                self.closed = True
            else:
                self.link.release(len(data))
                if data:
                    self.out.push(data, ts)
        pending = list(self.waiting)
        for item in pending:
            if item is not None:
                self.link.release(len(item[0]))
        self.waiting.clear()
        return pending

    def plan(self, data: bytes, ts: float, now: float) -> list[tuple[float, bytes, float]]:
        """The pieces of one chunk with their due times (loop clock)."""
        return [(now, data, ts)]

    def plan_eof(self, now: float) -> float:
        """When the end of stream may pass on."""
        return now

    def push(self, data: bytes, ts: float) -> None:
        if self.closed:
            return
        if not self.active:
            self.out.push(data, ts)
            return
        if self.pieces or self.waiting:
            self.link.hold(len(data))
            self.waiting.append((data, ts))
            return
        self._begin((data, ts))

    def push_eof(self) -> None:
        if self.closed:
            return
        if not self.active:
            self.closed = True
            self.out.push_eof()
            return
        if self.pieces or self.waiting:
            self.waiting.append(None)
            return
        self._begin(None)

    def _begin(self, item: tuple[bytes, float] | None) -> None:
        now = time.monotonic()
        if item is None:
            due = self.plan_eof(now)
            if due <= now:
                self.closed = True
                self.out.push_eof()
                return
            self.pieces.append((due, None, now))
        else:
            data, ts = item
            planned = self.plan(data, ts, now)
            while planned and planned[0][0] <= now:
                _, piece, pts = planned.pop(0)
                if piece:   # an empty piece only marks a pause (slicer)
                    self.out.push(piece, pts)
            if not planned:
                return
            for due, piece, pts in planned:
                self.link.hold(len(piece))
                self.pieces.append((due, piece, pts))
        self._arm()

    def _arm(self) -> None:
        if self.pieces and self.timer is None:
            self.timer = Deadline(self.link.loop, self.pieces[0][0], self._due)

    def _due(self) -> None:
        self.timer = None
        now = time.monotonic()
        while self.pieces and self.pieces[0][0] <= now:
            _, data, ts = self.pieces.popleft()
            if data is None:
                self.closed = True
                self.waiting.clear()
                self.out.push_eof()
                return
            self.link.release(len(data))
            if data:
                self.out.push(data, ts)
            if self.closed:
                return
        while not self.pieces and self.waiting and not self.closed:
            item = self.waiting.popleft()
            if item is not None:
                self.link.release(len(item[0]))
            self._begin(item)
            if self.timer is not None:
                return
        self._arm()
