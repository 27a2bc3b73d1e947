"""The range an estimate states for a basis: from the 5th to the 95th percentile of actual / predicted over the runs
its backtest predicted (estimator.backtest, and estimator.physics for the physics basis)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

RANGE_QUANTILES = (0.05, 0.95)


@dataclass(frozen=True)
class Band:
    """What actual / predicted ranged over for one basis: the stated range is predicted x low to x high."""

    low: float
    high: float
    runs: int


def band(errors: Sequence[float]) -> Band | None:
    """The band of log errors (ln(actual / predicted)); None with fewer than two."""
    if len(errors) < 2:
        return None
    cuts = statistics.quantiles(errors, n=100, method="inclusive")
    low, high = (cuts[round(q * 100) - 1] for q in RANGE_QUANTILES)
    return Band(math.exp(low), math.exp(high), len(errors))
