"""Rates of statistical cells (the S4 lock races): a confidence interval and a run count.

A race decided in the first millisecond has a machine-dependent rate, so a test must
(a) run enough times that a correct framework sees zero wrong runs with probability
below a bound (the run count comes from a conservative lower rate) and (b) report the
measured rate with its Wilson score interval, which behaves at 0 and at small n.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

Z_99 = 2.5758  # two-sided 99 %


@dataclass(frozen=True)
class Rate:
    """k of n runs, with a Wilson score interval."""

    k: int
    n: int
    low: float
    high: float

    @property
    def value(self) -> float:
        return self.k / self.n if self.n else 0.0

    def __str__(self) -> str:
        return f"{self.k}/{self.n} = {self.value:.1%} (99% Wilson CI {self.low:.1%}..{self.high:.1%})"


def wilson(k: int, n: int, z: float = Z_99) -> Rate:
    """The Wilson score interval of k successes in n trials."""
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"wilson needs 0 <= k <= n and n > 0, got k={k}, n={n}")
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Rate(k, n, max(0.0, centre - half), min(1.0, centre + half))


def runs_for_false_zero(rate: float, probability: float = 1e-6) -> int:
    """Runs so that P(no wrong run | true rate >= `rate`) = (1 - rate)^n is below `probability`."""
    if not 0 < rate < 1:
        raise ValueError(f"rate must be in (0, 1), got {rate}")
    return math.ceil(math.log(probability) / math.log(1 - rate))
