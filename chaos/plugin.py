"""The plugin's earlier import path: installs whose ``pytest11`` entry point still names
``chaos.plugin`` load the plugin package through it. Use ``chaos.pytest_plugin``."""
from __future__ import annotations

from typing import Any

pytest_plugins = ["chaos.pytest_plugin"]
_MOVED = ("ChaosOptions", "cluster_name", "ready_topology")


def __getattr__(name: str) -> Any:
    """The names that lived here, from chaos.pytest_plugin.core (imported on first use, so that
    pytest imports the plugin package itself first and rewrites its asserts)."""
    if name in _MOVED:
        from chaos.pytest_plugin import core
        return getattr(core, name)
    raise AttributeError(f"module 'chaos.plugin' has no attribute {name!r}")
