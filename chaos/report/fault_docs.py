"""docs/faults.md's "Parameters and defaults" section, generated from the fault registry.

The section is what ``python -m chaos describe <fault>`` says, as tables, so the docs
cannot miss a parameter a fault declares. ``python -m chaos.report.fault_docs --write
docs/faults.md`` rewrites the block between the markers; tests/docs fails when it drifts.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from chaos.expectations.markdown import replace_block

START = "<!-- fault-parameters:start -->"
END = "<!-- fault-parameters:end -->"


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return f"`{text}`" if text else '`""`'


def render_markdown() -> str:
    """One subsection per registered fault: its description, its effect and a parameter table."""
    from faults.effects import EFFECTS
    from faults.registry import fault_class, fault_names

    out: list[str] = []
    for name in fault_names():
        summary = fault_class(name).summary()
        out += [f"### `{name}`", "", f"{summary['description']}.", ""]
        effect = fault_class(name).effect
        if effect:
            out += [f"Must meet the workload: `{effect}` ({EFFECTS[effect]}).", ""]
        params = summary.get("params") or {}
        if params:
            out += ["| parameter | default | meaning |", "| --- | --- | --- |"]
            for pname, p in params.items():
                meaning = str(p.get("help", "")).replace("|", "/")
                choices = p.get("choices") or []
                if choices:
                    meaning += f" ({' / '.join(map(str, choices))})"
                out.append(f"| `{pname}` | {_cell(p.get('default'))} | {meaning} |")
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos.report.fault_docs", description=__doc__.splitlines()[0])
    parser.add_argument("--write", metavar="FILE", help="rewrite the marked section of FILE (docs/faults.md)")
    args = parser.parse_args(argv)
    block = render_markdown()
    if not args.write:
        sys.stdout.write(block)
        return 0
    path = Path(args.write)
    path.write_text(replace_block(path.read_text(), block, START, END))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
