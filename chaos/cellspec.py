"""One cell's identity, parsed once at the edge: `CellSpec`.

The command line, the pytest fixture, the matrix and the scorecard each turn what they were
given (`--preset s2:shards=8 --fault kill-consumer:at_ms=5 --part workload=...`, a Cell of an
area module, a row of the table) into one frozen `CellSpec` and hand that on. Below the
edge nothing parses or slices a spec string again: the preset, each fault and each replaced
part is a `Spec` (a name and its `k=v` parameters, in the order given), faults are made per
run from them (`faults.registry.make_fault`), and the cell's row key, label, replay command
and JSON form are properties of the one object.

A leaf: it needs only the parameter grammar (chaos.params) and the replay spelling
(chaos.replay).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from chaos.errors import BadArguments
from chaos.params import format_spec, parse_spec
from chaos.replay import reproduce_command

NO_FAULT = "none"


def split_faults(text: str) -> list[str]:
    """`a:k=v+b` (several faults written as one item, as `matrix --faults` and a summary row's
    `fault` take them) -> the fault specs; `none` -> []. The one place `+` is read."""
    return [] if text in ("", NO_FAULT) else [f for f in text.split("+") if f]


def split_specs(text: str | None) -> list[str]:
    """A comma list of specs (`--faults`, `--presets`): `a:k=v,k2=v2,b` -> [`a:k=v,k2=v2`, `b`].
    A comma starts a new spec unless what follows is `k=v` (a name never holds `=`); empty
    items are dropped. The one place such a list's commas are read."""
    items: list[str] = []
    for part in (p.strip() for p in (text or "").split(",")):
        if items and ":" in items[-1] and "=" in part and ":" not in part.split("=", 1)[0]:
            items[-1] += "," + part
        elif part:
            items.append(part)
    return items


@dataclass(frozen=True)
class Spec:
    """A parsed `name:k=v,...` spec; the values stay text, checked by the owner of the name."""

    name: str
    params: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str, what: str = "spec") -> Spec:
        name, params = parse_spec(text, what)
        return cls(name, tuple(params.items()))

    @classmethod
    def of(cls, name: str, values: Mapping[str, Any] | None = None) -> Spec:
        return cls(name, tuple((str(k), str(v)) for k, v in (values or {}).items()))

    @property
    def values(self) -> dict[str, str]:
        return dict(self.params)

    @property
    def text(self) -> str:
        """The spec as written (`kill-consumer:at_ms=5`)."""
        return format_spec(self.name, self.values)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class CellSpec:
    """What a cell is: preset, faults, replaced parts, where and how it runs.

    `key` is the expectation table's row key, `label` the human name, `replay` the command
    that runs it again, `to_json`/`from_json` its JSON form.
    """

    preset: Spec
    faults: tuple[Spec, ...] = ()
    parts: tuple[tuple[str, Spec], ...] = ()
    topology: str | None = None      # as --topology writes it; filled at the edge from the cluster (None: replica)
    server: str | None = None        # None: no --server named
    backend: str | None = None
    time_scale: float = 1.0
    seed: int = 0
    runs: int = 1

    @classmethod
    def parse(cls, preset: str, faults: str | Iterable[str] | None = (), parts: Mapping[str, str] | None = None,
              **how: Any) -> CellSpec:
        """The edge: spec strings in, a CellSpec out (BadArguments naming the fix on bad syntax).
        `faults` may be one spec or several (empty specs are dropped)."""
        given = [faults] if isinstance(faults, str) else list(faults or ())
        fault_specs = tuple(Spec.parse(f, "fault spec") for f in given if f)
        part_specs = []
        for slot, text in (parts or {}).items():
            if not str(text).strip():
                raise BadArguments(f"--part {slot}=: give the part's spec, e.g. --part workload=many-orders:keys=40")
            part_specs.append((str(slot), Spec.parse(str(text), f"part {slot}")))
        return cls(Spec.parse(preset, "preset"), fault_specs, tuple(part_specs), **how)

    # -- the spellings every report shares --------------------------------------------------
    @property
    def preset_text(self) -> str:
        return self.preset.text

    @property
    def fault_texts(self) -> list[str]:
        return [f.text for f in self.faults]

    @property
    def fault_text(self) -> str:
        """`a:k=v+b`, or `none`."""
        return "+".join(self.fault_texts) or NO_FAULT

    @property
    def fault_names(self) -> str:
        """`kill-consumer+promote-replica`, or `none` (the row key's fault)."""
        return "+".join(f.name for f in self.faults) or NO_FAULT

    @property
    def part_texts(self) -> dict[str, str]:
        return {slot: spec.text for slot, spec in self.parts}

    @property
    def params(self) -> dict[str, str]:
        """The row key's parameters: the preset's own, each fault's as `<fault>.<k>`, replaced parts by slot."""
        out = self.preset.values
        for fault in self.faults:
            out.update({f"{fault.name}.{k}": v for k, v in fault.params})
        out.update(self.part_texts)
        return out

    @property
    def key(self) -> tuple[str, str, dict[str, str]]:
        """(preset name, fault names, params): what the expectation table keys a row by."""
        return self.preset.name, self.fault_names, self.params

    @property
    def label(self) -> str:
        """`s1:paid_at_ms=300 x kill-consumer [workload=many-orders]`."""
        return (f"{self.preset_text} x {self.fault_text}"
                + "".join(f" [{slot}={spec}]" for slot, spec in self.part_texts.items()))

    def replay(self, runs: int | None = None, seed: int | None = None) -> str:
        """The command that runs this cell again (`runs`/`seed` for one run of it alone)."""
        return reproduce_command(self.preset_text, self.fault_texts, self.part_texts,
                                 self.runs if runs is None else runs, self.seed if seed is None else seed,
                                 self.time_scale, self.backend, topology=self.topology, server=self.server)

    def but(self, **changes: Any) -> CellSpec:
        """A copy with some fields changed (`spec.but(runs=5)`)."""
        return replace(self, **changes)

    # -- JSON --------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {"preset": self.preset_text, "faults": self.fault_texts, "parts": self.part_texts,
                "topology": self.topology, "server": self.server, "backend": self.backend,
                "time_scale": self.time_scale, "seed": self.seed, "runs": self.runs}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CellSpec:
        how = {k: data[k] for k in ("topology", "server", "backend", "time_scale", "seed", "runs") if k in data}
        return cls.parse(data["preset"], data.get("faults") or (), data.get("parts") or {}, **how)
