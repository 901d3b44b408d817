"""The ``blackbox`` fixture and marker: your own consumer under faults (chaos/blackbox/pytest_api.py).

The runner and everything it needs are imported when a test first asks for the fixture.
"""
from __future__ import annotations

from typing import Any, Callable

import pytest

MARKER = "blackbox(command, config): the consumer command and worker config the `blackbox` fixture runs"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)


@pytest.fixture
def blackbox(request: pytest.FixtureRequest, chaos_reset_cluster: Any, chaos_options: Any) -> Callable[..., Any]:
    """Run your consumer under faults on this test's freshly reset topology and check it
    (``blackbox(fault=..., runs=..., expect=...)``; see chaos/blackbox/pytest_api.py)."""
    from chaos.blackbox.pytest_api import blackbox_runner
    from chaos.pytest_plugin.cells import ROW_PROPERTY, suite_area
    return blackbox_runner(request, chaos_reset_cluster, chaos_options, area=suite_area(request.node),
                           row_property=ROW_PROPERTY)   # its cells in the summary, like chaos_cell's
