"""The figures only the black-box view has, beside the checker's Counts.

A leaf of the package: the config checks `[expect]` names against them and the verdict
fills them in, so neither needs the other.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class BlackBoxCounts:
    """Figures only the black-box view has (the rest are the checker's Counts)."""

    effects: int = 0
    superseded_unobserved: int = 0
    unattributed_writes: int = 0
    side_effects: int = 0
    duplicated_side_effects: int = 0
    missing_side_effects: int = 0

    def __add__(self, other: BlackBoxCounts) -> BlackBoxCounts:
        return BlackBoxCounts(**{k: getattr(self, k) + getattr(other, k) for k in self.__dataclass_fields__})

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}
