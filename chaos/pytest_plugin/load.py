"""`--chaos-load-size ci|full`: the size of the load area's cells (chaos/expectations/load.py).

The default test run uses `ci` (2,000 events per cell); the nightly and the benchmark use
`full` (10^5 events over 10^3 orders). The option sets $CHAOS_LOAD_SIZE before the suites
are collected (xdist workers get it too), so the cells and their expectation rows agree.
"""
from __future__ import annotations

import os

import pytest

from chaos.pytest_plugin import settings

SIZE_ENV = "CHAOS_LOAD_SIZE"
SIZES = ("ci", "full")


def pytest_addoption(parser: pytest.Parser) -> None:
    settings.add(parser, "--chaos-load-size", choices=SIZES, metavar="SIZE",
                 help=f"size of the load cells: ci (2,000 events) or full (10^5 events over 10^3 orders); "
                      f"default ${SIZE_ENV} or ci")


def pytest_configure(config: pytest.Config) -> None:
    size = settings.value(config, "chaos_load_size")
    if size:
        os.environ[SIZE_ENV] = size
    elif os.environ.get(SIZE_ENV, "ci") not in SIZES:
        raise pytest.UsageError(f"{SIZE_ENV}={os.environ[SIZE_ENV]!r}: give one of {', '.join(SIZES)}")
