"""`python -m chaos list [--json]` and `python -m chaos describe NAME`.

`list` prints every preset and fault on one line; `describe` shows a preset's parts with
their parameters (the values this preset uses), a fault's parameters, or one part.
"""
from __future__ import annotations

import argparse
import json
from typing import Any

from chaos.errors import BadArguments


def _presets() -> list[dict[str, Any]]:
    from chaos.strategies.presets import PRESETS, resolve
    out = []
    for name, preset in PRESETS.items():
        strategy = resolve(name)
        out.append({"name": name, "summary": preset.summary,
                    "parts": {slot: part.label() for slot, part in strategy.parts().items()}})
    return out


def _faults() -> list[dict[str, Any]]:
    from faults.registry import fault_class, fault_names
    return [fault_class(n).summary() for n in fault_names()]


def cmd_list(args: argparse.Namespace) -> int:
    presets, faults = _presets(), _faults()
    if args.json:
        print(json.dumps({"presets": presets, "faults": faults}, indent=2))
        return 0
    width = max(len(p["name"]) for p in presets + faults) + 2
    print("presets:")
    for p in presets:
        parts = " ".join(f"{k}={v}" for k, v in p["parts"].items())
        print(f"  {p['name']:<{width}}{p['summary']}  [{parts}]")
    print("faults:")
    for f in faults:
        print(f"  {f['name']:<{width}}{f['description']}")
    return 0


def _part_lines(part: Any) -> list[str]:
    lines = [f"  {part.slot}: {part.name} - {part.summary}"]
    for param in part.params:
        value = part.values[param.name]
        mark = "" if value == param.default else f"  (this preset: {value!r})"
        lines.append(f"      {param.describe()}{mark}")
    return lines


def describe(name: str) -> str:
    """The text `describe NAME` prints; unknown names list what can be described."""
    from chaos.strategies.presets import _REGISTRIES, PRESETS, resolve
    from faults.registry import FAULTS, describe_fault
    if name in PRESETS:
        preset, strategy = PRESETS[name], resolve(name)
        lines = [f"{name}: {preset.summary}"]
        if preset.notes:
            lines.append(f"  why: {preset.notes}")
        for part in strategy.parts().values():
            lines += _part_lines(part)
        lines.append(f"  parameters are set as --preset {name}:key=value,... (slot.key when two parts share a name)")
        return "\n".join(lines)
    if name in FAULTS:
        return describe_fault(name)
    for registry in _REGISTRIES.values():
        if name in registry:
            return "\n".join(_part_lines(registry[name]()))
    parts = sorted({n for r in _REGISTRIES.values() for n in r})
    raise BadArguments(f"nothing named {name!r}; presets: {', '.join(PRESETS)}; faults: {', '.join(FAULTS)}; "
                       f"parts: {', '.join(parts)}")


def cmd_describe(args: argparse.Namespace) -> int:
    print(describe(args.name))
    return 0


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("list", help="presets and faults, one line each")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.set_defaults(func=cmd_list)
    d = subparsers.add_parser("describe", help="a preset's or fault's parts and parameters")
    d.add_argument("name", help="a preset, fault or part name (see `list`)")
    d.set_defaults(func=cmd_describe)
