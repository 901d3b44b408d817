"""The expectation table as Markdown, so the documented table is generated, not retyped.

`python -m chaos.expectations.markdown --write docs/expectations.md` rewrites the block
between that page's `expectation-table` markers; tests/docs/test_readme.py fails when they drift.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from chaos.expectations import table
from chaos.expectations.table import Row

START, END = "<!-- expectation-table:start -->", "<!-- expectation-table:end -->"
_AREA_ORDER = ("ordering", "producer", "delivery", "redelivery", "failover", "outbox")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _bounds(r: Row) -> str:
    return ", ".join(f"`{name} {bound.describe(None)}`" for name, bound in r.expectation.bounds.items())


def render_markdown() -> str:
    """One row per cell, grouped by area, in registration order within an area."""
    rows = table().rows()
    order = {a: i for i, a in enumerate(_AREA_ORDER)}
    rows.sort(key=lambda r: order.get(r.area, len(order)))
    lines = ["| area | preset | fault | parameters | expected | why |", "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        params = ", ".join(f"{k}={v}" for k, v in sorted(r.params.items())) or "defaults"
        lines.append(f"| {r.area} | `{r.preset}` | `{r.fault}` | {_cell(params)} | {_bounds(r)} | "
                     f"{_cell(r.expectation.note)} |")
    return "\n".join(lines)


def replace_block(text: str, block: str, start: str = START, end: str = END) -> str:
    """`text` with what stands between the `start` and `end` markers replaced by `block`
    (the generated parts of docs/expectations.md and docs/faults.md)."""
    if start not in text or end not in text:
        raise SystemExit(f"no {start} ... {end} block found; add the two markers where the generated text goes")
    head, rest = text.split(start, 1)
    body = block if block.endswith("\n") else block + "\n"
    return f"{head}{start}\n{body}{end}{rest.split(end, 1)[1]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="rewrite the marked block of this Markdown file")
    args = parser.parse_args(argv)
    block = render_markdown()
    if args.write:
        args.write.write_text(replace_block(args.write.read_text(), block))
    else:
        print(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
