"""Typed `k=v` parameters for strategy parts, checked before any process starts.

`--preset s2:shards=8` and `--fault kill-consumer:after=250` share one spelling; a part
declares its parameters once (type, default, bounds, help) and bad input is rejected
with a message naming the parameter, what was given and what is allowed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chaos.errors import BadArguments

_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Param:
    """One parameter of a part: its type, default and the values it accepts."""

    kind: type
    default: Any
    help: str
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] | None = None

    def parse(self, owner: str, name: str, value: Any) -> Any:
        """The typed value of `value` (text from the command line or a Python value)."""
        try:
            typed = self._convert(value)
        except ValueError:
            raise BadArguments(f"{owner}: parameter {name}={value!r} is not a {self.kind.__name__} "
                               f"({self.help})") from None
        if self.choices is not None and typed not in self.choices:
            raise BadArguments(f"{owner}: {name}={typed!r} is not one of {', '.join(self.choices)}")
        if self.min is not None and typed < self.min:
            raise BadArguments(f"{owner}: {name}={typed} is below its minimum {self.min:g} ({self.help})")
        if self.max is not None and typed > self.max:
            raise BadArguments(f"{owner}: {name}={typed} is above its maximum {self.max:g} ({self.help})")
        return typed

    def _convert(self, value: Any) -> Any:
        if self.kind is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
            raise ValueError(value)
        if self.kind is int and isinstance(value, str):
            return int(value.strip())
        if self.kind is int and isinstance(value, float) and not value.is_integer():
            raise ValueError(value)
        return self.kind(value)

    def describe(self, name: str) -> str:
        bounds = ""
        if self.choices:
            bounds = f" one of {'|'.join(self.choices)}"
        elif self.min is not None:
            bounds = f" >= {self.min:g}"
        return f"{name}={self.default!r} ({self.kind.__name__}{bounds}): {self.help}"


def split_spec(spec: str, what: str = "spec") -> tuple[str, dict[str, str]]:
    """`name:k=v,k=v` -> (name, {k: v}); malformed text names the expected shape."""
    if not isinstance(spec, str) or not spec.strip():
        raise BadArguments(f"empty {what}; write NAME or NAME:key=value,key=value")
    name, _, rest = spec.strip().partition(":")
    pairs: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise BadArguments(f"{what} {spec!r}: {item!r} is not key=value "
                               f"(write {name}:key=value,key=value)")
        if key.strip() in pairs:
            raise BadArguments(f"{what} {spec!r}: {key.strip()} is given twice")
        pairs[key.strip()] = value.strip()
    return name.strip(), pairs


def parse_params(owner: str, declared: dict[str, Param], given: dict[str, Any]) -> dict[str, Any]:
    """Defaults overlaid with `given`, each value checked; unknown names list the known ones."""
    unknown = sorted(set(given) - set(declared))
    if unknown:
        known = ", ".join(sorted(declared)) or "none"
        raise BadArguments(f"{owner}: unknown parameter(s) {', '.join(unknown)}; its parameters are: {known}")
    values = {name: p.default for name, p in declared.items()}
    values.update({name: declared[name].parse(owner, name, v) for name, v in given.items()})
    return values
