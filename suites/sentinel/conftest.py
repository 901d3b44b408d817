"""The sentinel suite stands on its own topology: a primary, a replica and three Sentinels.

It starts one per xdist worker whatever ``--chaos-topology`` says (other suites keep
theirs), and the plugin's ``chaos_reset_cluster`` fixture resets it before each test.
"""
from __future__ import annotations

from typing import Iterator

import pytest

from chaos.cluster import start_cluster
from chaos.cluster.sentinel import parse_topology
from chaos.pytest_plugin.core import cluster_name


@pytest.fixture(scope="session")
def chaos_cluster(pytestconfig: pytest.Config, chaos_options) -> Iterator:
    if chaos_options.backend != "native":
        pytest.skip(f"the sentinel topology runs on the native backend only (this session: {chaos_options.backend})")
    chosen = chaos_options.topology     # --chaos-topology, else $CHAOS_TOPOLOGY (the plugin's edge)
    topology = chosen if parse_topology(chosen)[0] == "sentinel" else "sentinel"
    cluster = start_cluster(chaos_options.backend, f"{cluster_name(pytestconfig)}-sentinel", topology=topology,
                            server=chaos_options.server)
    try:
        yield cluster
    finally:
        cluster.close()
