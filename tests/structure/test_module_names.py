"""Test modules outside packages share one namespace under pytest's default import mode:
two `test_x.py` in such dirs make the second fail to collect ("import file mismatch"),
which a targeted run of one dir never shows."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_two_test_modules_outside_packages_share_a_name():
    seen: dict[str, list[str]] = defaultdict(list)
    for top in ("tests", "suites"):
        for path in (ROOT / top).rglob("test_*.py"):
            if not (path.parent / "__init__.py").exists():
                seen[path.name].append(str(path.relative_to(ROOT)))
    clashes = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not clashes, f"rename one of each: {clashes}"
