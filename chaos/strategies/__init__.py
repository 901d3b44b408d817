"""Strategies: producer x delivery x guard x ack policy (x workload), and the named presets."""
from chaos.strategies.presets import PRESETS, Preset, Strategy, get_preset, resolve

__all__ = ["PRESETS", "Preset", "Strategy", "get_preset", "resolve"]
