"""Delivery parts; a new one is one module plus one line here."""
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

__all__ = ["DELIVERIES", "Delivery", "GROUP", "STREAM"]
