"""Statistics over repeats: medians with distribution-free intervals, and ratios of aggregates.

Timings are skewed (a slow neighbour, a cold cache), so we summarise repeats by their median and give the
order-statistic confidence interval for it, which assumes nothing about the distribution. With few repeats
that interval is wide or its coverage is below 95 %; we say so rather than show a tight interval we cannot
back.
Relative figures are ratios of aggregates (median time of a configuration / median time of the base), never
averages of per-repeat ratios.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
MIN_REPEATS_FOR_INTERVAL = 3  # below this no interval is shown: "n=2, no interval"
BOOTSTRAP_RESAMPLES = 4000
BOOTSTRAP_SEED = 20170705  # fixed so a report is reproducible byte for byte


@dataclass(frozen=True)
class Estimate:
    """A median over `n` repeats and, when there are enough of them, an interval with its actual coverage."""

    value: float
    n: int
    low: float | None = None
    high: float | None = None
    coverage: float | None = None  # exact coverage of [low, high]; may be below CONFIDENCE for small n
    method: str = ""

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    def interval_text(self, fmt: str = "{:.1f}") -> str:
        if not self.has_interval:
            return f"n={self.n}, no interval"
        assert self.low is not None and self.high is not None and self.coverage is not None
        return f"{fmt.format(self.low)}–{fmt.format(self.high)} ({self.coverage:.0%} {self.method}, n={self.n})"


def _binomial_half_cdf(k: int, n: int) -> float:
    """P(B <= k) for B ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2**n


def median_interval_ranks(n: int, confidence: float = CONFIDENCE) -> tuple[int, float]:
    """The rank k (1-based) of the narrowest interval [x(k), x(n+1-k)] covering the median with probability
    >= confidence, and that probability.

    When even the full range covers less than `confidence` (n <= 5 at 95 %), returns k=1 and the full range's
    coverage, which the caller reports as it is.
    """
    best_k, best_coverage = 1, 1 - 2 * _binomial_half_cdf(0, n)
    for k in range(2, n // 2 + 1):
        coverage = 1 - 2 * _binomial_half_cdf(k - 1, n)
        if coverage < confidence:
            break
        best_k, best_coverage = k, coverage
    return best_k, best_coverage


def median_estimate(values: Sequence[float]) -> Estimate:
    """Median of `values` with its order-statistic (distribution-free) confidence interval."""
    if not values:
        raise ValueError("median of no values")
    ordered = sorted(values)
    n = len(ordered)
    median = float(np.median(ordered))
    if n < MIN_REPEATS_FOR_INTERVAL:
        return Estimate(value=median, n=n)
    k, coverage = median_interval_ranks(n)
    return Estimate(
        value=median,
        n=n,
        low=ordered[k - 1],
        high=ordered[n - k],
        coverage=coverage,
        method="order-statistic",
    )


def ratio_of_medians(numerator: Sequence[float], denominator: Sequence[float]) -> Estimate:
    """median(numerator) / median(denominator), with a seeded percentile-bootstrap interval when both sides
    have enough repeats. The ratio is of the aggregates, not an average of per-repeat ratios."""
    value = float(np.median(numerator)) / float(np.median(denominator))
    n = min(len(numerator), len(denominator))
    if n < MIN_REPEATS_FOR_INTERVAL:
        return Estimate(value=value, n=n)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    top = np.median(rng.choice(np.asarray(numerator, float), (BOOTSTRAP_RESAMPLES, len(numerator))), axis=1)
    bottom = np.median(rng.choice(np.asarray(denominator, float), (BOOTSTRAP_RESAMPLES, len(denominator))), axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(top / bottom, [tail, 100 - tail])
    return Estimate(value=value, n=n, low=float(low), high=float(high), coverage=CONFIDENCE, method="bootstrap")
