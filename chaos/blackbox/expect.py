"""The user's expectations for their consumer, as bounds of the shared expectation mechanism.

In the config's ``[expect]`` table (or the pytest API's ``expect=``): a number means
``==``; a string is ``"<op> number"`` with op one of == >= <= > <. Names are the
checker's counts (lost, duplicated, reordered, wrong_final_state_runs, pending_left...)
or the black-box ones (duplicated_side_effects, missing_side_effects, ...).

Liveness is always promised: ``stopped_consuming == 0`` holds unless ``[expect]`` bounds
``stopped_consuming`` itself (a consumer that stops for good after a fault is never what a
team wants, so ``run`` exits 1 and the pytest fixture fails even without an ``[expect]``).
"""
from __future__ import annotations

from typing import Any

from chaos.blackbox.errors import ConfigError
from chaos.blackbox.counts import BlackBoxCounts
from chaos.results import CellResult
from chaos.expectations.table import CELL_FIELDS, Compare, Expectation, satisfies

OPS = ("==", ">=", "<=", ">", "<")
BLACKBOX_FIELDS = frozenset(BlackBoxCounts.__dataclass_fields__)


def parse_bound(name: str, value: Any, where: str = "") -> tuple[str, float]:
    """``0`` -> ("==", 0); ``"> 0"`` -> (">", 0); anything else is a ConfigError."""
    if name not in CELL_FIELDS and name not in BLACKBOX_FIELDS:
        raise ConfigError(f"{where}[expect] {name}: no such count; counts are "
                          f"{', '.join(sorted(CELL_FIELDS | BLACKBOX_FIELDS))}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "==", value
    if isinstance(value, str):
        text = value.strip()
        for op in sorted(OPS, key=len, reverse=True):
            if text.startswith(op):
                try:
                    return op, float(text[len(op):])
                except ValueError:
                    break
    raise ConfigError(f"{where}[expect] {name} = {value!r}: give a number (means ==) or a string such as "
                      f"\"> 0\" or \"<= 3\"")


ALWAYS = {"stopped_consuming": ("==", 0)}   # promised by every consumer (see the module doc)


def expectation(bounds: dict[str, tuple[str, float]], extra: BlackBoxCounts) -> Expectation:
    """An Expectation over the cell (the declared bounds over ALWAYS); black-box counts are
    checked against ``extra``."""
    note = "declared in the worker config" if bounds else "no [expect]: liveness only, always promised"
    bounds = {**ALWAYS, **bounds}
    out: dict[str, Any] = {}
    for name, (op, number) in bounds.items():
        if name in CELL_FIELDS:
            out[name] = Compare(op, number)
        else:
            measured = getattr(extra, name)
            test = Compare(op, number)
            out[name] = satisfies(lambda _cell, m=measured, t=test: t.holds(m, _cell), f"{op} {number:g}",
                                  measured=f"{measured:g}" if isinstance(measured, float) else str(measured))
    return Expectation.of(note, **out)


def check(bounds: dict[str, tuple[str, float]], cell: CellResult, extra: BlackBoxCounts) -> list[str]:
    """Mismatch texts (empty when every bound holds)."""
    return expectation(bounds, extra).mismatches(cell)
