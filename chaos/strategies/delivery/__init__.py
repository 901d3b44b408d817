"""Delivery parts; a new one is one module plus one line here (or an extension: chaos/extensions.py)."""
from chaos import extensions
from chaos.strategies.delivery.base import GROUP, STREAM, Delivery
from chaos.strategies.delivery.fanout import Fanout
from chaos.strategies.delivery.group import Group, Single
from chaos.strategies.delivery.sharded import Sharded

DELIVERIES: dict[str, type[Delivery]] = {
    "group": Group,
    "single": Single,
    "sharded": Sharded,
    "fanout": Fanout,
}
extensions.attach("deliveries", DELIVERIES)

__all__ = ["DELIVERIES", "Delivery", "GROUP", "STREAM"]
