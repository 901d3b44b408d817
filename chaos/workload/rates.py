"""Rates of statistical cells (the S4 lock races): a confidence interval and a run count.

A race decided in the first millisecond has a machine-dependent rate, so a test must
(a) run enough times that a correct framework sees zero wrong runs with probability
below a bound (the run count comes from a conservative lower rate) and (b) report the
measured rate with its Wilson score interval, which behaves at 0 and at small n.

A row that asks for a break in a fraction of its runs (`each_run(ge(1), min_fraction=f)`)
gets its run count the same way: `runs_for_fraction(rate, f)` is the smallest n for which a
correct framework, whose runs each break with probability `rate` (a conservative lower
rate), shows fewer than ceil(f n) breaking runs with probability below the bound
(`short_of`, the binomial tail); `fraction_for(rate, runs)` is the largest fraction of a
given run count that keeps that bound.
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


def short_of(rate: float, runs: int, need: int) -> float:
    """P(fewer than `need` of `runs` independent runs break), each breaking with probability `rate`."""
    if not 0 <= rate <= 1 or runs < 0:
        raise ValueError(f"short_of needs 0 <= rate <= 1 and runs >= 0, got rate={rate}, runs={runs}")
    return sum(math.comb(runs, k) * rate ** k * (1 - rate) ** (runs - k) for k in range(min(need, runs + 1)))


def runs_for_fraction(rate: float, min_fraction: float, probability: float = 1e-3, most: int = 200) -> int:
    """The fewest runs n for which P(fewer than ceil(min_fraction * n) runs break | a per-run
    break rate of `rate`) is at most `probability` (the false-zero bound of a fraction row)."""
    if not 0 < rate < 1 or not 0 < min_fraction <= 1:
        raise ValueError(f"rate must be in (0, 1) and min_fraction in (0, 1], got {rate}, {min_fraction}")
    for n in range(1, most + 1):
        if short_of(rate, n, math.ceil(min_fraction * n - 1e-9)) <= probability:
            return n
    raise ValueError(f"no run count up to {most} bounds a false zero by {probability:g} at rate {rate:g} "
                     f"with min_fraction {min_fraction:g}: lower min_fraction below the rate")


def fraction_for(rate: float, runs: int, probability: float = 1e-3) -> float:
    """The largest k/runs such that P(fewer than k of `runs` runs break | per-run rate `rate`) is
    at most `probability`: the min_fraction a row of that many runs can ask for."""
    best = 0
    for k in range(1, runs + 1):
        if short_of(rate, runs, k) <= probability:
            best = k
    if not best:
        raise ValueError(f"{runs} runs at a break rate of {rate:g} bound a false zero only by "
                         f"{short_of(rate, runs, 1):.2g} > {probability:g}: give the cell "
                         f"runs_for_false_zero(rate, probability) = {runs_for_false_zero(rate, probability)} runs")
    return best / runs


FALSE_ZERO = 1e-3   # the chance a row asking for a break may miss it on a correct framework


@dataclass(frozen=True)
class BreakRate:
    """A row's measured per-run break: `k` of `n` measured runs broke. Its run count and
    min_fraction follow from the 99 % Wilson lower rate, so that a correct framework fails the
    row (too few breaking runs) with probability at most `probability`; never fewer runs than
    `floor` (the cell's other bounds)."""

    k: int
    n: int
    floor: int = 2
    probability: float = FALSE_ZERO

    @property
    def low(self) -> float:
        return wilson(self.k, self.n).low

    @property
    def runs(self) -> int:
        return max(self.floor, runs_for_false_zero(self.low, self.probability))

    @property
    def min_fraction(self) -> float:
        return fraction_for(self.low, self.runs, self.probability)

    @property
    def false_zero(self) -> float:
        return short_of(self.low, self.runs, math.ceil(self.min_fraction * self.runs - 1e-9))

    def __str__(self) -> str:
        w = wilson(self.k, self.n)
        return (f"{self.k} of {self.n} measured runs broke (99% Wilson CI {w.low:.0%}..{w.high:.0%}); "
                f"{self.runs} runs, a break in >= {self.min_fraction:.0%} of them: a false zero at the "
                f"lower rate {self.false_zero:.1e}")
