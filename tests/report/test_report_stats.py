"""Medians, their distribution-free intervals, and ratios of aggregates."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from report.stats import (
    CONFIDENCE,
    MIN_REPEATS_FOR_INTERVAL,
    median_estimate,
    median_interval_ranks,
    ratio_of_medians,
)


def _coverage_by_enumeration(n: int, k: int) -> float:
    """P(x(k) <= median <= x(n+1-k)) counted over all 2^n above/below-median patterns of n samples."""
    covered = 0
    for pattern in itertools.product((0, 1), repeat=n):
        below = sum(pattern)  # samples below the true median
        covered += below >= k and n - below >= k
    return covered / 2**n


@pytest.mark.parametrize("n", range(3, 16))
def test_interval_ranks_are_the_narrowest_with_enough_coverage(n: int) -> None:
    k, coverage = median_interval_ranks(n)
    assert coverage == pytest.approx(_coverage_by_enumeration(n, k))
    if n >= 6:
        assert coverage >= CONFIDENCE
        if k + 1 <= n // 2:
            assert _coverage_by_enumeration(n, k + 1) < CONFIDENCE
    else:  # even the full range covers less than 95 %: reported with its real coverage
        assert k == 1 and coverage < CONFIDENCE


def test_order_statistic_interval_covers_the_true_median_of_skewed_timings() -> None:
    rng = np.random.default_rng(1)
    true_median = 1.0  # median of a lognormal with mu = 0
    trials, covered = 2000, 0
    for _ in range(trials):
        estimate = median_estimate(list(rng.lognormal(0.0, 0.5, size=9)))
        assert estimate.low is not None and estimate.high is not None
        covered += estimate.low <= true_median <= estimate.high
    assert covered / trials >= CONFIDENCE - 0.015  # the exact coverage for n=9 is 96.1 %


@pytest.mark.parametrize("n", range(1, MIN_REPEATS_FOR_INTERVAL))
def test_too_few_repeats_give_no_interval(n: int) -> None:
    estimate = median_estimate([10.0 + i for i in range(n)])
    assert not estimate.has_interval
    assert estimate.interval_text() == f"n={n}, no interval"


def test_three_repeats_show_the_range_with_its_real_coverage() -> None:
    estimate = median_estimate([12.0, 10.0, 11.0])
    assert (estimate.value, estimate.low, estimate.high) == (11.0, 10.0, 12.0)
    assert estimate.coverage == pytest.approx(0.75)
    assert estimate.interval_text() == "10.0–12.0 (75% order-statistic, n=3)"


def test_relative_time_is_a_ratio_of_medians_not_a_mean_of_ratios() -> None:
    config, base = [10.0, 30.0, 11.0], [10.0, 12.0, 20.0]
    ratio = ratio_of_medians(config, base)
    assert ratio.value == pytest.approx(11.0 / 12.0)
    mean_of_ratios = np.mean([c / b for c, b in zip(config, base, strict=True)])
    assert ratio.value != pytest.approx(mean_of_ratios)


def test_ratio_interval_is_seeded_and_contains_the_ratio() -> None:
    config, base = [9.0, 9.5, 10.2, 9.8, 10.1], [20.0, 19.0, 21.5, 20.4, 19.7]
    first, second = ratio_of_medians(config, base), ratio_of_medians(config, base)
    assert (first.low, first.high) == (second.low, second.high)
    assert first.low is not None and first.high is not None
    assert first.low <= first.value <= first.high
    assert first.method == "bootstrap"
    assert not ratio_of_medians([9.0, 10.0], base).has_interval  # two repeats on one side: none
