"""Medians, their distribution-free intervals, ratios of aggregates, and the rank-sum test behind verdicts."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from benchmarks.stats import (
    CONFIDENCE,
    FASTER,
    MIN_REPEATS_FOR_INTERVAL,
    SAME,
    SIGNIFICANCE,
    SLOWER,
    TOO_FEW,
    between_machine_sd,
    compare,
    leave_one_machine_out,
    machine_component_sd,
    mann_whitney_p,
    mean_interval,
    median_estimate,
    median_interval_ranks,
    next_machine_interval,
    ratio_of_medians,
    smallest_possible_p,
    within_machine_sd,
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


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]),
        ([1.0, 5.0, 3.0, 7.0, 2.0], [4.0, 6.0, 8.0, 9.0, 10.0]),
        ([3.1, 2.9, 3.0], [3.05, 2.95, 3.2, 2.8]),
    ],
)
def test_rank_sum_p_value_matches_scipys_exact_test(a: list[float], b: list[float]) -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    expected = scipy_stats.mannwhitneyu(a, b, alternative="two-sided", method="exact").pvalue
    assert mann_whitney_p(a, b) == pytest.approx(expected)


def test_rank_sum_with_ties_is_exact_over_midranks() -> None:
    # Every one of the C(4,2)=6 arrangements of midranks [1.5, 1.5, 3.5, 3.5] enumerated by hand: rank sums
    # 3, 5, 5, 5, 5, 7 around the expected 5; the observed 3 is as extreme as 2 of 6.
    assert mann_whitney_p([1.0, 1.0], [2.0, 2.0]) == pytest.approx(2 / 6)


def test_rank_sum_large_samples_use_the_normal_approximation() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.normal(0, 1, 40), rng.normal(0, 1, 40)
    scipy_stats = pytest.importorskip("scipy.stats")
    expected = scipy_stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic").pvalue
    assert mann_whitney_p(list(a), list(b)) == pytest.approx(expected, rel=1e-6)


def test_false_positive_rate_of_compare_is_at_most_alpha() -> None:
    """Same distribution on both sides: 'faster' or 'slower' at most 5 % of the time (it is rarer still, as the
    interval must also clear the noise threshold)."""
    rng = np.random.default_rng(7)
    trials = 300
    called = sum(
        compare(list(rng.lognormal(0, 0.1, 6)), list(rng.lognormal(0, 0.1, 6))).beyond_noise for _ in range(trials)
    )
    assert called / trials <= SIGNIFICANCE


def test_compare_finds_a_real_speedup_and_states_it() -> None:
    rng = np.random.default_rng(11)
    fast, slow = list(rng.normal(1.0, 0.02, 6)), list(rng.normal(1.8, 0.036, 6))
    result = compare(fast, slow)
    assert result.verdict == FASTER and result.p_value is not None and result.p_value < 0.01
    text = result.text("A", "B")
    assert text.startswith("A is 1.8") and "x faster than B (95% CI" in text
    assert compare(slow, fast).verdict == SLOWER


def test_a_difference_inside_the_noise_threshold_is_no_difference() -> None:
    base = [1.000, 1.001, 1.002, 1.003, 1.004, 1.005]
    candidate = [v * 0.99 for v in base]  # 1 % faster, perfectly separated: real, but below the 2 % threshold
    assert compare(candidate, base).verdict == SAME
    assert "no difference beyond noise" in compare(candidate, base).text()


@pytest.mark.parametrize(("n", "m"), [(1, 1), (3, 3), (2, 9)])
def test_too_few_repeats_are_said_not_guessed(n: int, m: int) -> None:
    result = compare([1.0 + i for i in range(n)], [10.0 + i for i in range(m)])
    assert result.verdict == TOO_FEW and result.p_value is None
    assert smallest_possible_p(n, m) >= SIGNIFICANCE or min(n, m) < MIN_REPEATS_FOR_INTERVAL


def test_half_width_in_percent_of_the_median() -> None:
    estimate = median_estimate([9.0, 10.0, 10.0, 10.0, 10.0, 12.0])
    assert estimate.half_width_pct == pytest.approx(20.0)
    assert median_estimate([1.0]).half_width_pct is None


# One machine ran fifteen repeats near 1.0 s; two other machines ran one each, 30 % slower.
ONE_MACHINE_MANY_RUNS = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0, 1.01, 0.99, 1.02, 0.98, 1.0, 1.3, 1.32]
THEIR_MACHINES = ["a"] * 15 + ["b", "c"]


def test_runs_of_one_machine_do_not_pass_for_machines() -> None:
    pooled = median_estimate(ONE_MACHINE_MANY_RUNS)
    by_machine = median_estimate(ONE_MACHINE_MANY_RUNS, THEIR_MACHINES)
    assert pooled.high is not None and pooled.high < 1.05  # seventeen "independent" repeats: a tight interval
    assert by_machine.method == "machine bootstrap" and by_machine.machines == 3
    assert by_machine.high is not None and by_machine.high >= 1.3  # two of three machines ran 30 % slower
    assert "n=17 on 3 machines" in by_machine.interval_text()


def test_one_machine_keeps_the_order_statistic_interval() -> None:
    values = [1.0, 1.1, 1.2, 1.3, 1.4]
    assert median_estimate(values, ["a"] * 5) == median_estimate(values)
    assert ratio_of_medians(values, values[::-1], ["a"] * 5, ["b"] * 5) == ratio_of_medians(values, values[::-1])


def test_a_mean_of_one_machines_pairs_does_not_pass_for_many_machines() -> None:
    """Eight log ratios from one machine near +0.09, one from another at -0.02: drawn alike they exclude 0; drawn
    by machine, the second machine alone is a quarter of the draws, and the interval reaches it."""
    values = [0.08, 0.1, 0.09, 0.07, 0.11, 0.09, 0.1, 0.08, -0.02]
    machines = ["l"] * 8 + ["m"]
    alike_low, _ = mean_interval(values)
    low, high = mean_interval(values, machines)
    assert alike_low > 0.04
    assert low == pytest.approx(-0.02, abs=0.005) and 0.09 < high < 0.11
    assert mean_interval(values, ["l"] * 9) == mean_interval(values)  # one machine: values drawn alike


def test_a_verdict_must_clear_the_spread_between_machines() -> None:
    base = [1.1, 1.12, 1.09, 1.11, 1.1, 1.13, 1.08, 1.1, 1.11, 1.12, 1.1, 1.09, 1.11]
    assert compare(ONE_MACHINE_MANY_RUNS, base).verdict == FASTER  # as if every run were its own machine
    machines = compare(ONE_MACHINE_MANY_RUNS, base, candidate_machines=THEIR_MACHINES)
    assert machines.verdict == SAME and machines.ratio.method == "machine bootstrap"


def test_between_machine_sd_pools_log_medians_over_configurations() -> None:
    spread = between_machine_sd([{"a": [1.0], "b": [float(np.exp(0.1))]}, {"a": [2.0, 2.0], "c": [2.0]}, {"a": [5.0]}])
    # squares (0.05^2 + 0.05^2) + 0, over (2 - 1) + (2 - 1) degrees of freedom; one machine alone adds nothing
    assert spread == pytest.approx(np.sqrt(0.005 / 2))
    assert between_machine_sd([{"a": [1.0, 2.0]}]) is None


def test_within_machine_sd_pools_each_machines_processes_and_machines_add_what_is_left() -> None:
    e = float(np.exp(0.1))
    same_machines = [{"a": [1.0, e], "b": [1.0, e]}]  # processes spread, the machines' medians agree
    assert within_machine_sd(same_machines) == pytest.approx(np.sqrt(4 * 0.05**2 / 2))
    assert machine_component_sd(same_machines) == 0.0
    apart = [{"a": [1.0, 1.0], "b": [e**3, e**3]}]  # processes agree, the machines are 30 % apart
    assert within_machine_sd(apart) == 0.0
    assert machine_component_sd(apart) == pytest.approx(between_machine_sd(apart)) == pytest.approx(0.3 / np.sqrt(2))
    # the processes' share of the machines' medians is taken out: machines a and b differ by more than it
    both = [{"a": [1.0, e], "b": [e**3, e**4]}]
    within = np.sqrt(4 * 0.05**2 / 2)
    assert machine_component_sd(both) == pytest.approx(np.sqrt(between_machine_sd(both) ** 2 - within**2 / 2))
    assert within_machine_sd([{"a": [1.0], "b": [2.0]}]) is None and machine_component_sd([{"a": [1.0]}]) is None


def test_next_machine_interval_is_wider_than_the_median_interval() -> None:
    by_machine = {"a": [1.0, 1.02, 0.98], "b": [1.05, 1.04]}
    values = [v for runs in by_machine.values() for v in runs]
    median = median_estimate(values, [m for m, runs in by_machine.items() for _ in runs])
    spread = next_machine_interval(by_machine, 0.08)
    assert spread.low is not None and median.low is not None and spread.high is not None and median.high is not None
    assert spread.low < median.low * 0.95 and spread.high > median.high * 1.05
    assert next_machine_interval({"a": [1.0], "b": [1.1]}, 0.08).has_interval is False  # two runs: no interval


def _machines_drawn(configurations: int, machines: int, between: float, seed: int) -> list[dict[str, list[float]]]:
    """Configurations whose machines are each offset log-normally by `between`, with 5 % noise between runs."""
    rng = np.random.default_rng(seed)
    drawn = []
    for _ in range(configurations):
        centre = rng.uniform(0.5, 5.0)
        drawn.append(
            {
                f"m{k}": list(centre * np.exp(between * rng.standard_normal() + 0.05 * rng.standard_normal(2)))
                for k in range(machines)
            }
        )
    return drawn


def test_one_measured_machine_predicts_the_next_with_both_machines_offsets() -> None:
    """Two machines per configuration: held out in turn, one machine predicts the other, whose offset from it is
    the difference of two machines' offsets (sd sqrt(2) x the spread), not of one: the interval covers it."""
    rng = np.random.default_rng(5)
    configurations = [
        {f"{i}{m}": list(np.exp(0.15 * rng.standard_normal() + 0.05 * rng.standard_normal(4))) for m in "ab"}
        for i in range(80)  # each configuration on its own two machines: the others give the spread
    ]
    checks = leave_one_machine_out(configurations)
    assert len(checks) == 80 * 2
    assert sum(c.inside for c in checks) / len(checks) >= 0.9


def test_leave_one_machine_out_covers_the_held_out_machines() -> None:
    configurations = _machines_drawn(40, 3, between=0.15, seed=3)
    checks = leave_one_machine_out(configurations)
    assert len(checks) == 40 * 3
    assert sum(c.inside for c in checks) / len(checks) >= 0.9
    # Without the spread between machines, the runs of two machines predict the third badly.
    naive = [
        next_machine_interval({m: v for m, v in configurations[c.configuration].items() if m != c.machine}, 0.0)
        for c in checks
    ]
    inside = [n.low <= c.median <= n.high for n, c in zip(naive, checks, strict=True) if n.low and n.high]
    assert sum(inside) / len(inside) < 0.7
