"""`noop`: passes data through; the API accepts it (useful to test the chain itself)."""
from __future__ import annotations

from chaos.proxy.toxics.base import Stage, ToxicType

NOOP = ToxicType(name="noop", go_name="NoopToxic", attributes={}, stage=Stage)
