"""Order events: the unit every workload publishes and every guard applies.

An event's identity is `event_id`, fixed when the intent is created and stable across
resends (a retried publish or an outbox relay sends the same id again). `version` is the
business version assigned at creation, which is what a correct guard compares; the stream
entry id is only where one copy of the event landed.
"""
from __future__ import annotations

from dataclasses import MISSING, dataclass
from dataclasses import fields as dataclass_fields
from operator import attrgetter
from typing import Any


@dataclass(frozen=True, slots=True)
class Event:
    """One intended event; `at_ms` and `producer` say when and by whom it is published.

    Slotted: a run holds its 10^6 planned events, 112 B each instead of 328 B with a `__dict__`.
    The fast constructors below call the frozen `__init__` on a bare object (`_init`), without
    the class call's own overhead."""

    event_id: str
    key: str
    etype: str
    version: int
    cost_ms: float = 0.0
    at_ms: float = 0.0
    producer: str = "P-order"
    poison: bool = False
    stream: str = ""            # set by the delivery's router
    barrier: str = ""           # streams the producer must see drained before publishing this

    def fields(self) -> dict[str, str]:
        """The stream entry's fields (what a consumer receives)."""
        out = {"event_id": self.event_id, "key": self.key, "type": self.etype,
               "version": str(self.version), "cost_ms": repr(float(self.cost_ms))}
        if self.poison:
            out["poison"] = "1"
        return out

    @classmethod
    def from_fields(cls, fields: dict[str, str], stream: str = "") -> Event:
        """The event a consumer got; malformed entries raise ValueError naming the field.
        (Once per delivered entry: the class call's own overhead is left out.)"""
        try:
            ev = object.__new__(cls)
            _init(ev, fields["event_id"], fields["key"], fields["type"], int(fields["version"]),
                  float(fields.get("cost_ms", 0)), 0.0, "P-order", fields.get("poison") == "1", stream, "")
            return ev
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"stream entry is not an order event ({exc!r}): {fields!r}") from None

    def intended(self) -> dict[str, Any]:
        """The FinalState.events record."""
        return {"event_id": self.event_id, "key": self.key, "version": self.version, "etype": self.etype}

    def op_fields(self) -> dict[str, Any]:
        """The fields every history op about this event carries."""
        return {"event_id": self.event_id, "key": self.key, "version": self.version, "etype": self.etype}

    def to_dict(self) -> dict[str, Any]:
        # every field is a str, number or bool: what asdict() would build, without its
        # recursive deep copy (5 s of the orchestrator's CPU at 10^5 events)
        return dict(zip(_NAMES, _ROW(self)))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Event:
        if not _REQUIRED <= data.keys() <= _FIELDS:     # what __init__ would refuse
            return cls(**data)
        ev = object.__new__(cls)           # (once per event a producer sends)
        _init(ev, **data)
        return ev

    def to_row(self) -> tuple:
        """The event as a plan row: its field values in field order (a producer plan holds 10^6
        of them for the run: a tuple is 136 B, a dict of the same fields about 360 B)."""
        return _ROW(self)

    @classmethod
    def from_plan(cls, data: dict[str, Any] | list | tuple) -> Event:
        """An event of a producer's plan: a row (`to_row`, a list once through JSON) or a dict
        (`to_dict`: plans made elsewhere, such as the black-box session's)."""
        if data.__class__ is dict:
            return cls.from_dict(data)
        if len(data) != len(_NAMES):
            raise ValueError(f"an event row has {len(_NAMES)} fields ({', '.join(_NAMES)}), got {len(data)}: "
                             f"{data!r}; make it with Event.to_row()")
        ev = object.__new__(cls)
        _init(ev, *data)
        return ev

    def routed(self, stream: str, barrier: str = "") -> Event:
        """This event on `stream`: a copy of its fields (without the class call's overhead)."""
        copy = object.__new__(Event)
        _init(copy, *_UNROUTED(self), stream, barrier)
        return copy


_DEFAULTS = {f.name: f.default for f in dataclass_fields(Event) if f.default is not MISSING}
_NAMES = tuple(f.name for f in dataclass_fields(Event))
_ROW = attrgetter(*_NAMES)                 # an event's field values, in field order
_UNROUTED = attrgetter(*_NAMES[:-2])       # ... but its stream and barrier (the last two fields)
_init = Event.__init__
_FIELDS = frozenset(_NAMES)
_REQUIRED = _FIELDS - _DEFAULTS.keys()
