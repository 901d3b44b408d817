"""Sizes a reader can hold: no module in chaos/ or faults/ over 600 lines, no class over 250,
no function over 80 (counted from the ``def``/``class`` line to its last line, docstring and
comments included).

A part that grows past one of them is split by what it does (a collaborator it holds, a
module of its own), not by moving methods into a mixin. KNOWN_OVER would name a module over
its limit with the size it may not grow past, until it is split (empty since
chaos/checker.py went under 600).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("chaos", "faults")
MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 250
MAX_FUNCTION_LINES = 80
KNOWN_OVER: dict[str, int] = {}    # module -> the size it may not grow past (none is over today)


def sources() -> list[tuple[str, str]]:
    return [(str(p.relative_to(ROOT)), p.read_text()) for package in PACKAGES
            for p in sorted((ROOT / package).rglob("*.py"))]


def definitions(kinds: tuple[type, ...]) -> list[tuple[int, str]]:
    found = []
    for rel, text in sources():
        for node in ast.walk(ast.parse(text, rel)):
            if isinstance(node, kinds):
                found.append((node.end_lineno - node.lineno + 1, f"{rel}:{node.lineno} {node.name}"))
    return found


def test_no_module_over_600_lines() -> None:
    over = [(len(text.splitlines()), rel) for rel, text in sources()
            if len(text.splitlines()) > KNOWN_OVER.get(rel, MAX_MODULE_LINES)]
    assert not over, (f"modules over {MAX_MODULE_LINES} lines (or grown past their KNOWN_OVER size): {sorted(over)}; "
                      "split them by responsibility")


def test_no_class_over_250_lines() -> None:
    over = [d for d in definitions((ast.ClassDef,)) if d[0] > MAX_CLASS_LINES]
    assert not over, (f"classes over {MAX_CLASS_LINES} lines: {sorted(over, reverse=True)}; give a part of "
                      "what they do to a collaborator they hold")


def test_no_function_over_80_lines() -> None:
    over = [d for d in definitions((ast.FunctionDef, ast.AsyncFunctionDef)) if d[0] > MAX_FUNCTION_LINES]
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines: {sorted(over, reverse=True)}; split them"


@pytest.mark.parametrize("limit, kinds", [(MAX_CLASS_LINES, (ast.ClassDef,)),
                                          (MAX_FUNCTION_LINES, (ast.FunctionDef,))])
def test_the_counts_can_fail(limit: int, kinds: tuple[type, ...]) -> None:
    """The counting sees a definition one line over its limit (so the tests above can fail)."""
    keyword = "class" if kinds == (ast.ClassDef,) else "def"
    text = f"{keyword} big{'()' if keyword == 'def' else ''}:\n" + "    x = 1\n" * limit
    [node] = [n for n in ast.walk(ast.parse(text)) if isinstance(n, kinds)]
    assert node.end_lineno - node.lineno + 1 == limit + 1
