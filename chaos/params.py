"""One parameter model and one `name:k=v` parser for presets, parts, faults, expectation rows, topologies.

`--preset s2:shards=8`, `--fault promote-replica:hold_ms=300` and an expectation row's
cell share one spelling, so they share one parser; a part or a fault declares its
parameters once as `Param`s (type, default, bounds, help) and bad input is refused,
before anything starts, with a message that names the parameter, what was given and
the fix. Names ending in `_ms` are durations in milliseconds: never negative, and
scaled by `--time-scale` where they act, never here.

A list-valued parameter (`kind=tuple`, e.g. nemesis's `faults`) writes its items joined by
`/`: `nemesis:faults=latency/pause`. Not `,` (it separates pairs), not `+` (it joins the
faults of a cell: `matrix --faults kill-consumer+nemesis`), so a spec holding a list stays
one spec everywhere a cell's faults are written. `choices` apply to each item.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from chaos.errors import BadArguments

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_KINDS = (bool, int, float, str, tuple)
LIST_SEP = "/"          # joins a list-valued parameter's items: faults=latency/pause
_KIND_NAMES = {tuple: "list"}


@dataclass(frozen=True)
class Param:
    """One declared parameter: its name, default, a one-line help, and the values it accepts.

    `kind` is the default's type unless given; a `_ms` name is a duration (an int when
    its default says nothing more precise) with a minimum of 0.
    """

    name: str
    default: Any
    help: str
    kind: type | None = None
    choices: tuple[Any, ...] = ()
    minimum: float | None = None
    maximum: float | None = None

    def __post_init__(self) -> None:
        kind = self.kind
        if kind is None:
            kind = type(self.default) if isinstance(self.default, _KINDS) else str
            if self.is_duration and kind is str:
                kind = int
        if kind not in _KINDS:
            raise TypeError(f"parameter {self.name}: kind {kind!r} is not one of bool, int, float, str, tuple (a list)")
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "choices", tuple(self.choices or ()))
        if self.is_duration and self.minimum is None:
            object.__setattr__(self, "minimum", 0)

    @property
    def is_duration(self) -> bool:
        return self.name.endswith("_ms")

    def convert(self, owner: str, raw: Any) -> Any:
        """The typed value of `raw` (text from the command line, or a Python value), checked.

        `owner` opens the error message: `fault 'pause'`, `delivery sharded`.
        """
        try:
            value = self._typed(raw)
        except (TypeError, ValueError):
            unit = " (milliseconds)" if self.is_duration else ""
            raise BadArguments(
                f"{owner}: parameter {self.name}={raw!r} is not a valid {self.kind_name}{unit}; "
                f"give e.g. {self.name}={format_value(self.default)}") from None
        if self.kind is tuple:
            return self._checked_items(owner, raw, value)
        if self.choices and value not in self.choices:
            raise BadArguments(f"{owner}: parameter {self.name}={value!r} is not one of "
                               f"{', '.join(map(str, self.choices))}")
        if self.minimum is not None and value < self.minimum:
            raise BadArguments(f"{owner}: parameter {self.name}={value} is below its minimum {self.minimum:g}; "
                               f"give {self.name} >= {self.minimum:g}")
        if self.maximum is not None and value > self.maximum:
            raise BadArguments(f"{owner}: parameter {self.name}={value} is above its maximum {self.maximum:g}; "
                               f"give {self.name} <= {self.maximum:g}")
        return value

    @property
    def kind_name(self) -> str:
        return _KIND_NAMES.get(self.kind, self.kind.__name__)

    def _checked_items(self, owner: str, raw: Any, items: tuple[str, ...]) -> tuple[str, ...]:
        example = format_value(self.default) or "a/b"
        if isinstance(raw, str) and "+" in raw:   # the spelling before one grammar: refused, naming the fix
            raise BadArguments(f"{owner}: parameter {self.name}={raw!r}: a list's items are joined by "
                               f"'{LIST_SEP}', not '+' ('+' joins a cell's faults); write "
                               f"{self.name}={raw.replace('+', LIST_SEP)}")
        bad = [item for item in items if self.choices and item not in self.choices]
        if bad:
            raise BadArguments(f"{owner}: parameter {self.name}={format_value(raw)!r}: {', '.join(bad)} "
                               f"{'is' if len(bad) == 1 else 'are'} not one of {', '.join(map(str, self.choices))}; "
                               f"join items by '{LIST_SEP}', e.g. {self.name}={example}")
        return items

    def _typed(self, raw: Any) -> Any:
        if self.kind is tuple:
            given = raw if isinstance(raw, (list, tuple)) else str(raw).split(LIST_SEP)
            return tuple(item for item in (str(i).strip() for i in given) if item)
        if self.kind is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
            raise ValueError(raw)
        if self.kind is int:
            if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
                raise ValueError(raw)
            return int(raw) if isinstance(raw, (int, float)) else int(str(raw).strip())
        if self.kind is float:
            if isinstance(raw, bool):
                raise ValueError(raw)
            return float(raw)
        return str(raw).strip()

    def describe(self) -> str:
        """One line for `python -m chaos describe`: `name=default  help (bounds)`."""
        bounds = []
        if self.choices:
            bounds.append(f"one of {'|'.join(map(str, self.choices))}")
        else:
            if self.minimum is not None:
                bounds.append(f">= {self.minimum:g}")
            if self.maximum is not None:
                bounds.append(f"<= {self.maximum:g}")
        shown = f" ({', '.join(bounds)})" if bounds else ""
        return f"{self.name + '=' + format_value(self.default):<26} {self.help}{shown}"

    def summary(self) -> dict[str, Any]:
        """A JSON-able description (`list --json`)."""
        default = list(self.default) if self.kind is tuple else self.default
        out: dict[str, Any] = {"default": default, "help": self.help, "type": self.kind_name}
        if self.choices:
            out["choices"] = list(self.choices)
        if self.minimum is not None:
            out["minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        return out


def format_value(value: Any) -> str:
    """A value as it is written in a spec (`true`, not `True`; a list's items joined by `/`)."""
    if isinstance(value, (list, tuple)):
        return LIST_SEP.join(map(str, value))
    return str(value).lower() if isinstance(value, bool) else str(value)


def declared(params: Iterable[Param], owner: str = "") -> dict[str, Param]:
    """Name -> Param; a name declared twice is a programming error, raised at import."""
    out: dict[str, Param] = {}
    for p in params:
        if p.name in out:
            raise TypeError(f"{owner or 'parameters'}: {p.name} is declared twice")
        out[p.name] = p
    return out


def parse_params(owner: str, params: Iterable[Param], given: Mapping[str, Any], *,
                 see: str = "") -> dict[str, Any]:
    """Every declared parameter's value: its default overlaid with `given`, each value checked.

    An unknown name lists the known ones; `see` is a hint appended to that message.
    """
    known = declared(params, owner)
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise BadArguments(f"{owner} has no parameter {', '.join(unknown)}; its parameters are: "
                           f"{', '.join(known) or 'none'}{see}")
    return {name: p.convert(owner, given[name]) if name in given else p.default for name, p in known.items()}


def parse_spec(spec: str, what: str = "spec") -> tuple[str, dict[str, str]]:
    """`"name:k=v,k2=v2"` -> `("name", {"k": "v", "k2": "v2"})`, values left as text.

    Only the syntax is checked here (a name, `k=v` pairs, no key twice); the owner of
    the name checks the names and values. `what` names the spec in messages
    (`fault spec`, `preset`).
    """
    if not isinstance(spec, str) or not spec.strip():
        raise BadArguments(f"empty {what}; write NAME or NAME:key=value,key2=value2")
    name, _, rest = spec.strip().partition(":")
    name = name.strip()
    if not name:
        raise BadArguments(f"{what} {spec!r} has no name; write NAME:key=value,key2=value2")
    pairs: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise BadArguments(f"{what} {spec!r}: {item!r} is not k=v; write e.g. "
                               f"{name}:{key or 'key'}=VALUE (pairs joined by commas)")
        if key in pairs:
            raise BadArguments(f"{what} {spec!r}: {key} is given twice; keep one {key}=...")
        pairs[key] = value.strip()
    return name, pairs


def format_spec(name: str, values: Mapping[str, Any]) -> str:
    """The inverse of `parse_spec`: `name:k=v,...`, or `name` alone."""
    given = ",".join(f"{k}={format_value(v)}" for k, v in values.items())
    return name + (":" + given if given else "")


def extend(base: Iterable[Param], *more: Param) -> tuple[Param, ...]:
    """`base` with `more` added; a Param of `more` that `base` has by name replaces it in place
    (a part that shares a group's parameters but not one of their defaults)."""
    extra = {p.name: p for p in more}
    kept = tuple(extra.pop(p.name, p) for p in base)
    return kept + tuple(extra.values())
