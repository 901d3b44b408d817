"""The options exported to the environment: `--chaos-server`, `--chaos-topology`, `--chaos-load-size`.

Listed in chaos/pytest_plugin/__init__.py's ``pytest_plugins``. The plugin's edge: core.py
reads the server and topology (option, else the environment) into ``ChaosOptions.server`` /
``.topology``, checked, and every fixture passes them on as values (``start_cluster(...,
topology=, server=)``; a cell's CellSpec takes them from the cluster it ran on). Here each
choice is exported in ``pytest_configure``, before pytest-xdist starts its workers, so every
worker's own edge reads the same (and every process a test starts runs the same server,
topology and load size):

* ``--chaos-server redis|valkey`` -> $CHAOS_SERVER (chaos/cluster/servers.py);
* ``--chaos-topology replica|sentinel[:k=v,...]`` -> $CHAOS_TOPOLOGY (chaos/cluster/sentinel.py;
  suites/sentinel starts its own sentinel topology whatever this says). Checked after the
  server, so the Sentinel binary follows the server chosen;
* ``--chaos-load-size ci|full`` -> $CHAOS_LOAD_SIZE (chaos/expectations/load.py): `ci` is
  2,000 events per cell, `full` (the nightly and the benchmark) 10^5 events over 10^3 orders.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import pytest

from chaos.pytest_plugin import settings

SERVERS = ("redis", "valkey")          # chaos.cluster.servers.SERVERS (checked there)
TOPOLOGIES = ("replica", "sentinel")   # chaos.cluster.sentinel.TOPOLOGIES (checked there)
SIZES = ("ci", "full")                 # chaos.expectations.load's sizes
SIZE_ENV = "CHAOS_LOAD_SIZE"


def _export(env: str) -> Callable[[str | None], None]:
    def use(chosen: str | None) -> None:     # checked by core.py's pytest_configure (chaos.cluster.configured)
        if chosen:
            os.environ[env] = chosen
    return use


def _use_size(chosen: str | None) -> None:
    if chosen:
        os.environ[SIZE_ENV] = chosen
    elif os.environ.get(SIZE_ENV, "ci") not in SIZES:
        raise pytest.UsageError(f"{SIZE_ENV}={os.environ[SIZE_ENV]!r}: give one of {', '.join(SIZES)}")


@dataclass(frozen=True)
class Exported:
    """One option whose choice is checked and exported as ``env`` (nothing is done when neither is set)."""

    flag: str
    env: str
    use: Callable[[str | None], None]
    help: str
    choices: tuple[str, ...] = ()
    metavar: str = "NAME"
    always: bool = False      # check the environment's value even when the option is not given

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


OPTIONS = (  # in the order they are applied
    Exported("--chaos-server", "CHAOS_SERVER", _export("CHAOS_SERVER"),
             help=f"Redis-protocol server: {' | '.join(SERVERS)} "
                  f"(default: $CHAOS_SERVER, else $CHAOS_REDIS_SERVER or redis-server on PATH)"),
    Exported("--chaos-topology", "CHAOS_TOPOLOGY", _export("CHAOS_TOPOLOGY"),
             help=f"topology: {' | '.join(TOPOLOGIES)}, e.g. sentinel:quorum=2 (default: $CHAOS_TOPOLOGY, else replica)"),
    Exported("--chaos-load-size", SIZE_ENV, _use_size, choices=SIZES, metavar="SIZE", always=True,
             help=f"size of the load cells: ci (2,000 events) or full (10^5 events over 10^3 orders); "
                  f"default ${SIZE_ENV} or ci"),
)


def pytest_addoption(parser: pytest.Parser) -> None:
    for option in OPTIONS:
        settings.add(parser, option.flag, metavar=option.metavar, help=option.help, choices=option.choices)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    for option in OPTIONS:
        chosen = settings.value(config, option.dest)
        if chosen or option.always or os.environ.get(option.env):
            option.use(chosen)
