"""The fixtures' short names of earlier versions (``cluster``, ``postgres``, ...), each the
``chaos_*`` fixture of the same meaning.

Not loaded by the plugin: a team's own ``cluster`` or ``postgres`` fixture is its own
business. This repository's conftest loads it (``pytest_plugins``), and a project written
against the short names can do the same while it moves to the ``chaos_*`` names.
"""
from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def cluster(chaos_reset_cluster: Any) -> Any:
    return chaos_reset_cluster


@pytest.fixture
def redis_primary(chaos_redis_primary: Any) -> Any:
    return chaos_redis_primary


@pytest.fixture
def redis_replica(chaos_redis_replica: Any) -> Any:
    return chaos_redis_replica


@pytest.fixture
def postgres(chaos_postgres: Any) -> Any:
    return chaos_postgres


@pytest.fixture
def toxiproxy(chaos_toxiproxy: Any) -> Any:
    return chaos_toxiproxy


@pytest.fixture
def redis_proxy(chaos_redis_proxy: Any) -> Any:
    return chaos_redis_proxy


@pytest.fixture
def replica_proxy(chaos_replica_proxy: Any) -> Any:
    return chaos_replica_proxy


@pytest.fixture
def postgres_proxy(chaos_postgres_proxy: Any) -> Any:
    return chaos_postgres_proxy


@pytest.fixture
def replication_proxy(chaos_replication_proxy: Any) -> Any:
    return chaos_replication_proxy


@pytest.fixture
def worker_links(chaos_worker_links: Any) -> Any:
    return chaos_worker_links
