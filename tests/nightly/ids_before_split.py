"""A pytest plugin for the nightly tests' child sessions (``-p tests.nightly.ids_before_split``):
writes the node ids the session collected, before any plugin's ``pytest_collection_modifyitems``
(``--chaos-shard``'s split among them), one a line, to $CHAOS_TEST_IDS_OUT. One whole-suite
collection then gives both the real collection and a shard of it."""
from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_collection_modifyitems(items: list[pytest.Item]):
    Path(os.environ["CHAOS_TEST_IDS_OUT"]).write_text("".join(f"{item.nodeid}\n" for item in items))
    yield
