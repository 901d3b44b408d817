"""The expectation table (preset x fault -> expected figures), collected from area modules.

Each area module (owned by the engineer of that area) defines `ROWS: list[Row]`, usually
written with `row(...)` from chaos.expectations.table. An area module that does not exist
yet is skipped; any other import error is raised, so a broken row is never silently lost.
"""
from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from dataclasses import replace
from functools import lru_cache
from typing import Any

from chaos.cellspec import CellSpec
from chaos.expectations.table import (
    NO_FAULT,
    RUNS,
    Expectation,
    ExpectationError,
    ExpectationTable,
    Mismatch,
    Row,
    UnknownVerdict,
    assert_cell,
    between,
    each_run,
    eq,
    ge,
    gt,
    le,
    lt,
    row,
    satisfies,
)

AREA_MODULES = ("ordering", "delivery", "producer", "redelivery", "failover", "outbox", "production",
                "load", "sentinel", "operations")

__all__ = [
    "AREA_MODULES", "NO_FAULT", "RUNS", "Expectation", "ExpectationError", "ExpectationTable",
    "Mismatch", "Row", "UnknownVerdict", "assert_cell", "between", "each_run", "eq", "expect", "ge", "gt",
    "expect_cell", "le", "load_rows", "lt", "row", "satisfies", "table",
]


def load_rows(areas: Iterable[str] = AREA_MODULES) -> list[Row]:
    """Rows of every area module that exists, each tagged with its area."""
    rows: list[Row] = []
    for area in areas:
        module_name = f"{__name__}.{area}"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue  # that area has no rows yet
            raise
        area_rows = getattr(module, "ROWS", None)
        if not isinstance(area_rows, (list, tuple)):
            raise ExpectationError(f"{module_name} must define ROWS = [row(...), ...] (a list of Row)")
        for item in area_rows:
            if not isinstance(item, Row):
                raise ExpectationError(f"{module_name}.ROWS holds {item!r}; build rows with row(...)")
            rows.append(replace(item, area=area))
    return rows


@lru_cache(maxsize=1)
def table() -> ExpectationTable:
    """The whole table, built once per process."""
    return ExpectationTable(load_rows())


def expect_cell(spec: CellSpec) -> Expectation | None:
    """The expectation of a parsed cell (its key's exact parameters), or None."""
    found = table().row_for(spec.key)
    return found.expectation if found else None


def expect(preset: str, fault: str | Iterable[str] | None = NO_FAULT,
           params: Mapping[str, Any] | None = None) -> Expectation | None:
    """The expectation of a cell, or None when the table lacks it or params are non-default.

    `preset` and `fault` may carry their parameters (`"s2:shards=8"`); `params` adds more.
    Pass only parameters the user set to non-default values.
    """
    return table().lookup(preset, fault, params)
