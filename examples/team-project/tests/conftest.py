"""The team's own fixtures. Their names are common ones (`cluster`, `postgres`): the chaos
plugin's fixtures are all `chaos_*`, so these replace nothing of the framework's."""
from __future__ import annotations

import pytest


@pytest.fixture
def cluster() -> dict[str, str]:
    """The team's description of its production cluster (nothing to do with the chaos topology)."""
    return {"name": "orders-prod", "redis": "redis://orders-redis:6379"}


@pytest.fixture
def postgres() -> str:
    """The team's own database URL."""
    return "postgresql://orders@orders-db/orders"
