"""The common shape of a strategy part (producer, delivery, guard, ack policy, workload).

A part is a class with a name, a one-line summary and declared parameters; an instance
holds validated values. Parts travel to worker processes as `{"name", "params"}` dicts,
so an instance can be rebuilt on the other side of the fork server.
"""
from __future__ import annotations

from typing import Any, ClassVar

from chaos.params import Param, declared, format_spec, format_value, parse_params


class Part:
    """A configured strategy component; subclasses declare `slot`, `name`, `summary`, `params`."""

    slot: ClassVar[str] = "part"
    declared: ClassVar[dict[str, Param]] = {}   # params by name, filled in for each subclass
    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    params: ClassVar[tuple[Param, ...]] = ()

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        cls.declared = declared(cls.params, f"{cls.slot} {cls.name}")
        shadowed = sorted(n for n in cls.declared if hasattr(cls, n))
        if shadowed:  # values are read through __getattr__, which a class attribute would hide
            raise TypeError(f"{cls.__name__}: parameter(s) {shadowed} shadow attributes of the class; rename them")

    def __init__(self, **given: Any) -> None:
        self.values = parse_params(f"{self.slot} {self.name}", self.params, given)
        # the parameters a spec named (the rest took their defaults): read by a rule that may
        # change a default only, e.g. chaos.strategies.presets.steady_producer
        self.given = frozenset(given)
        self.validate()

    def validate(self) -> None:
        """Cross-parameter checks; raise BadArguments naming the fix."""

    def __getattr__(self, item: str) -> Any:
        values = self.__dict__.get("values", {})
        if item in values:
            return values[item]
        raise AttributeError(item)

    def to_spec(self) -> dict:
        return {"name": self.name, "params": dict(self.values)}

    def changed(self) -> dict[str, str]:
        """The parameters that differ from the defaults, as a spec writes them."""
        return {k: format_value(v) for k, v in self.values.items() if v != self.declared[k].default}

    def label(self) -> str:
        """`name:k=v` with only the parameters that differ from the defaults."""
        return format_spec(self.name, self.changed())

    def __repr__(self) -> str:
        return f"<{self.slot} {self.label()}>"


def build(registry: dict[str, type[Part]], spec: dict) -> Part:
    """Rebuild a part from its `to_spec()` dict (in a worker process)."""
    return registry[spec["name"]](**spec.get("params", {}))
