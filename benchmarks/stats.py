"""Statistics over repeats: medians with distribution-free intervals, ratios of aggregates, and the test that
decides whether two configurations differ beyond noise.

Shared by the repeat scheduler (adaptive repeats stop on an interval's width), the GPU configuration check and the
report, so every figure and every verdict is computed one way. Needs numpy only (no framework).

Timings are skewed (a slow neighbour, a cold cache), so we summarise repeats by their median and give the
order-statistic confidence interval for it, which assumes nothing about the distribution. With few repeats
that interval is wide or its coverage is below 95 %; we say so rather than show a tight interval we cannot
back.
Relative figures are ratios of aggregates (median time of a configuration / median time of the base), never
averages of per-repeat ratios.

Runs from several machines are not independent repeats: two separately started machines of one kind differ by more
than two processes on one machine. Where the machines are known, intervals and verdicts resample machines, then runs
within each (a hierarchical bootstrap), and the interval for the next machine widens that by the spread between
machines pooled over many configurations (`between_machine_sd`, `next_machine_interval`), which
`leave_one_machine_out` checks against the machines' own medians.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
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
    machines: int = 1  # how many machines the n runs came from

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def half_width_pct(self) -> float | None:
        """The larger distance from the median to an interval end, in % of the median (None: no interval)."""
        if self.low is None or self.high is None or self.value == 0:
            return None
        return max(self.value - self.low, self.high - self.value) / abs(self.value) * 100

    def interval_text(self, fmt: str = "{:.1f}") -> str:
        if not self.has_interval:
            return f"n={self.n}, no interval"
        assert self.low is not None and self.high is not None and self.coverage is not None
        where = f" on {self.machines} machines" if self.machines > 1 else ""
        return f"{fmt.format(self.low)}–{fmt.format(self.high)} ({self.coverage:.0%} {self.method}, n={self.n}{where})"


def _binomial_half_cdf(k: int, n: int) -> float:
    """P(B <= k) for B ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / (1 << n)


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


Machines = Sequence[str] | None  # which machine ran each value; None: one machine (or unknown)
MACHINE_BOOTSTRAP = "machine bootstrap"


def _clusters(values: Sequence[float], machines: Machines) -> list[np.ndarray]:
    """The values grouped by machine, in first-seen order. One group without machines, and where every value is
    its own machine's: then runs are machines, and resampling them is resampling machines."""
    if machines is None or len(set(machines)) == len(values):
        return [np.asarray(values, float)]
    if len(machines) != len(values):
        raise ValueError(f"{len(values)} values but {len(machines)} machines")
    groups: dict[str, list[float]] = {}
    for value, machine in zip(values, machines, strict=True):
        groups.setdefault(machine, []).append(value)
    return [np.asarray(g, float) for g in groups.values()]


def _bootstrap_medians(clusters: Sequence[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """BOOTSTRAP_RESAMPLES medians of resampled runs (_resampled)."""
    return np.asarray(np.nanmedian(_resampled(clusters, rng), axis=1))


def _resampled(clusters: Sequence[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """BOOTSTRAP_RESAMPLES rows of resampled runs, NaN where a row has fewer. With several machines: draw machines
    with replacement, then each drawn machine's runs with replacement (a hierarchical bootstrap), so that a
    machine that ran many repeats cannot pass for many machines."""
    if len(clusters) == 1:
        return np.asarray(rng.choice(clusters[0], (BOOTSTRAP_RESAMPLES, len(clusters[0]))))
    sizes = np.array([len(c) for c in clusters])
    widest = int(sizes.max())
    padded = np.full((len(clusters), widest), np.nan)  # NaN pads machines with fewer runs
    for k, cluster in enumerate(clusters):
        padded[k, : len(cluster)] = cluster
    drawn = rng.integers(0, len(clusters), (BOOTSTRAP_RESAMPLES, len(clusters)))
    runs = sizes[drawn][..., None]  # each drawn machine's run count
    # Each drawn machine, even one drawn twice, gets its own draw of its runs.
    picks = (rng.random((BOOTSTRAP_RESAMPLES, len(clusters), widest)) * runs).astype(int)
    values = padded[drawn[..., None], picks]
    values[np.arange(widest) >= runs] = np.nan
    return np.asarray(values.reshape(BOOTSTRAP_RESAMPLES, -1))


def mean_interval(values: Sequence[float], machines: Machines = None) -> tuple[float, float]:
    """The CONFIDENCE bootstrap interval of the mean of `values`; where they come from several machines,
    hierarchical (machines, then values within each), as every interval here is: values from one machine share
    its host and its hour, and are not independent of each other."""
    clusters = _clusters(values, machines)
    return _percentiles(np.nanmean(_resampled(clusters, np.random.default_rng(BOOTSTRAP_SEED)), axis=1))


def _percentiles(draws: np.ndarray) -> tuple[float, float]:
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return float(low), float(high)


def median_estimate(values: Sequence[float], machines: Machines = None) -> Estimate:
    """Median of `values` with its order-statistic (distribution-free) confidence interval; where the values come
    from several machines, with the hierarchical bootstrap's interval instead (machines, then runs)."""
    if not values:
        raise ValueError("median of no values")
    ordered = sorted(values)
    n = len(ordered)
    median = float(np.median(ordered))
    if n < MIN_REPEATS_FOR_INTERVAL:
        return Estimate(value=median, n=n, machines=len(set(machines or [""])))
    clusters = _clusters(values, machines)
    if len(clusters) > 1:
        low, high = _percentiles(_bootstrap_medians(clusters, np.random.default_rng(BOOTSTRAP_SEED)))
        return Estimate(median, n, low, high, CONFIDENCE, MACHINE_BOOTSTRAP, machines=len(clusters))
    k, coverage = median_interval_ranks(n)
    return Estimate(
        value=median,
        n=n,
        low=ordered[k - 1],
        high=ordered[n - k],
        coverage=coverage,
        method="order-statistic",
    )


def ratio_of_medians(
    numerator: Sequence[float],
    denominator: Sequence[float],
    numerator_machines: Machines = None,
    denominator_machines: Machines = None,
) -> Estimate:
    """median(numerator) / median(denominator), with a seeded percentile-bootstrap interval when both sides
    have enough repeats (hierarchical on a side whose runs come from several machines). The ratio is of the
    aggregates, not an average of per-repeat ratios."""
    value = float(np.median(numerator)) / float(np.median(denominator))
    n = min(len(numerator), len(denominator))
    if n < MIN_REPEATS_FOR_INTERVAL:
        return Estimate(value=value, n=n)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    top_clusters = _clusters(numerator, numerator_machines)
    bottom_clusters = _clusters(denominator, denominator_machines)
    top = _bootstrap_medians(top_clusters, rng)
    bottom = _bootstrap_medians(bottom_clusters, rng)
    low, high = _percentiles(top / bottom)
    machines = max(len(top_clusters), len(bottom_clusters))
    method = MACHINE_BOOTSTRAP if machines > 1 else "bootstrap"
    return Estimate(value, n, low, high, CONFIDENCE, method, machines=machines)


def between_machine_sd(configurations: Sequence[Mapping[str, Sequence[float]]]) -> float | None:
    """How far one machine's median strays from another's, in log units (0.05 is about 5 %): the pooled standard
    deviation of the log machine medians around each configuration's mean, over every configuration measured on
    two or more machines (degrees of freedom: machines - 1 per configuration). None: no such configuration.

    A configuration seldom ran on more than three machines, too few to estimate its own spread; configurations of
    one kind (e.g. every host-bound one) share theirs."""
    squares, freedom = 0.0, 0
    for by_machine in configurations:
        logs = np.log([float(np.median(v)) for v in by_machine.values() if len(v)])
        if len(logs) < 2:
            continue
        squares += float(((logs - logs.mean()) ** 2).sum())
        freedom += len(logs) - 1
    return math.sqrt(squares / freedom) if freedom else None


def within_machine_sd(configurations: Sequence[Mapping[str, Sequence[float]]]) -> float | None:
    """How far one process's value strays from another's on the same machine, in log units: the pooled standard
    deviation of the log values around their machine's mean, over every machine with two or more values
    (degrees of freedom: values - 1 per machine). None: no machine ran a configuration twice."""
    squares, freedom = 0.0, 0
    for by_machine in configurations:
        for values in by_machine.values():
            if len(values) < 2:
                continue
            logs = np.log(np.asarray(values, float))
            squares += float(((logs - logs.mean()) ** 2).sum())
            freedom += len(logs) - 1
    return math.sqrt(squares / freedom) if freedom else None


def machine_component_sd(configurations: Sequence[Mapping[str, Sequence[float]]]) -> float | None:
    """The spread machines add beyond the processes' own, in log units: a machine's median over n processes
    strays from another's by both, so the method of moments takes the processes' share (within_machine_sd squared
    over n, averaged over the machines) out of between_machine_sd's square; 0 where nothing is left."""
    between, within = between_machine_sd(configurations), within_machine_sd(configurations)
    if between is None or within is None:
        return None
    counts = [len(v) for by_machine in configurations if sum(1 for v in by_machine.values() if v) >= 2
              for v in by_machine.values() if v]  # fmt: skip
    share = within**2 * float(np.mean([1 / n for n in counts]))
    return math.sqrt(max(0.0, between**2 - share))


def next_machine_interval(by_machine: Mapping[str, Sequence[float]], between_sd: float) -> Estimate:
    """Where the median of the next separately started machine should fall, as a random-effects prediction: the
    median of the k measured machines' runs (each machine's runs resampled, the machines kept) times the next
    machine's offset from them, drawn log-normal with sd `between_sd` * sqrt(1 + 1/k). The 1/k is how far the k
    measured machines' centre may itself stray from that of all machines: one measured machine is no better a
    guide to the next than the next is to it. Needs MIN_REPEATS_FOR_INTERVAL runs in all."""
    clusters = [np.asarray(v, float) for v in by_machine.values() if len(v)]
    pooled = np.concatenate(clusters)
    median = float(np.median(pooled))
    if len(pooled) < MIN_REPEATS_FOR_INTERVAL:
        return Estimate(value=median, n=len(pooled), machines=len(clusters))
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    within = np.median(np.hstack([rng.choice(c, (BOOTSTRAP_RESAMPLES, len(c))) for c in clusters]), axis=1)
    offset_sd = between_sd * math.sqrt(1 + 1 / len(clusters))
    draws = within * np.exp(offset_sd * rng.standard_normal(BOOTSTRAP_RESAMPLES))
    low, high = _percentiles(draws)
    return Estimate(median, len(pooled), low, high, CONFIDENCE, "next-machine bootstrap", machines=len(clusters))


@dataclass(frozen=True)
class HeldOut:
    """One machine left out of one configuration: its median, and the interval the other machines predicted."""

    configuration: int  # index into the configurations checked
    machine: str
    median: float
    predicted: Estimate

    @property
    def inside(self) -> bool:
        assert self.predicted.low is not None and self.predicted.high is not None
        return self.predicted.low <= self.median <= self.predicted.high


def leave_one_machine_out(configurations: Sequence[Mapping[str, Sequence[float]]]) -> list[HeldOut]:
    """Each machine of each configuration with two or more machines, held out in turn: the interval for the next
    machine built from the other machines alone (the pooled spread between machines too is estimated without the
    held-out machine), against the held-out machine's median. Held-out cases whose other machines have too few
    runs for an interval are not counted."""
    checks = []
    for index, by_machine in enumerate(configurations):
        if len(by_machine) < 2:
            continue
        for machine, values in by_machine.items():
            others = {m: v for m, v in by_machine.items() if m != machine}
            if sum(len(v) for v in others.values()) < MIN_REPEATS_FOR_INTERVAL or not len(values):
                continue
            spread = between_machine_sd([{m: v for m, v in c.items() if m != machine} for c in configurations])
            predicted = next_machine_interval(others, spread or 0.0)
            checks.append(HeldOut(index, machine, float(np.median(values)), predicted))
    return checks


# A change smaller than this is not called a change even when the test finds it (Criterion.rs's default noise
# threshold is 2 %). Timings of one GPU machine drift by more than that between processes, which the repeats
# capture; the threshold guards against calling a real but negligible difference a win.
NOISE_THRESHOLD = 0.02
SIGNIFICANCE = 0.05
EXACT_TEST_MAX_ARRANGEMENTS = 50_000  # beyond this the rank-sum test uses its normal approximation


def _midranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U (Wilcoxon rank-sum) test that `a` and `b` come from one
    distribution. Exact (every arrangement of the pooled midranks enumerated, ties included) for small samples,
    which is where benchmarks live; normal approximation with tie correction beyond that."""
    n, m = len(a), len(b)
    if n == 0 or m == 0:
        raise ValueError("the rank-sum test needs values on both sides")
    ranks = _midranks([*a, *b])
    observed = sum(ranks[:n])
    expected = n * (n + m + 1) / 2
    if math.comb(n + m, n) <= EXACT_TEST_MAX_ARRANGEMENTS:
        distance = abs(observed - expected) - 1e-9
        extreme = sum(1 for chosen in itertools.combinations(ranks, n) if abs(sum(chosen) - expected) >= distance)
        return extreme / math.comb(n + m, n)
    ties = sum(count**3 - count for count in Counter(ranks).values())
    variance = n * m / 12 * ((n + m + 1) - ties / ((n + m) * (n + m - 1)))
    if variance == 0:
        return 1.0
    z = (abs(observed - expected) - 0.5) / math.sqrt(variance)
    return math.erfc(max(z, 0.0) / math.sqrt(2))


def smallest_possible_p(n: int, m: int) -> float:
    """The smallest two-sided p the exact rank-sum test can give with n and m repeats (no ties)."""
    return min(1.0, 2 / math.comb(n + m, n))


@dataclass(frozen=True)
class Comparison:
    """`candidate` against `base`: the ratio of median times with its bootstrap interval, the rank-sum test's
    p-value, and the verdict those two decide together."""

    ratio: Estimate  # median(candidate) / median(base): below 1 means the candidate is faster
    p_value: float | None
    verdict: str  # FASTER, SLOWER, SAME or TOO_FEW

    @property
    def beyond_noise(self) -> bool:
        return self.verdict in (FASTER, SLOWER)

    def text(self, candidate: str = "it", base: str = "the base") -> str:
        """E.g. "it is 1.80x faster than the base (95% CI 1.70-1.90, p=0.008)"."""
        if self.verdict == TOO_FEW:
            return f"{candidate} vs {base}: too few repeats to tell ({self.ratio.n} on the smaller side)"
        if self.verdict == SAME:
            return f"{candidate} vs {base}: no difference beyond noise ({self._numbers(self.ratio.value)})"
        speedup = 1 / self.ratio.value if self.verdict == FASTER else self.ratio.value
        word = "faster" if self.verdict == FASTER else "slower"
        return f"{candidate} is {speedup:.2f}x {word} than {base} ({self._numbers(speedup)})"

    def _numbers(self, shown: float) -> str:
        ratio = self.ratio
        parts = []
        if ratio.low is not None and ratio.high is not None:
            low, high = sorted((ratio.low, ratio.high))
            if shown != ratio.value:  # a speed-up is the inverse ratio: so is its interval
                low, high = 1 / high, 1 / low
            parts.append(f"95% CI {low:.2f}-{high:.2f}")
        if self.p_value is not None:
            parts.append(f"p={self.p_value:.3f}")
        return ", ".join(parts) or f"n={ratio.n}"


FASTER, SLOWER, SAME, TOO_FEW = "faster", "slower", "no difference beyond noise", "too few repeats"


def compare(
    candidate: Sequence[float],
    base: Sequence[float],
    noise: float = NOISE_THRESHOLD,
    alpha: float = SIGNIFICANCE,
    candidate_machines: Machines = None,
    base_machines: Machines = None,
) -> Comparison:
    """Decide whether `candidate` times differ from `base` times beyond noise, as Criterion.rs reports changes:
    the rank-sum test must reject "same distribution" at `alpha`, and the whole bootstrap interval of the ratio
    of medians must lie outside 1 +- `noise`. With so few repeats that the exact test cannot reach `alpha`
    (3 against 3 gives p >= 0.1), or too few for an interval on one side, the verdict says so instead of guessing.
    Where a side's runs come from several machines, its share of the ratio's interval is the hierarchical bootstrap's
    (machines, then runs), so the spread between machines must be cleared as well."""
    ratio = ratio_of_medians(candidate, base, candidate_machines, base_machines)
    if not ratio.has_interval or smallest_possible_p(len(candidate), len(base)) >= alpha:
        return Comparison(ratio=ratio, p_value=None, verdict=TOO_FEW)
    p_value = mann_whitney_p(candidate, base)
    assert ratio.low is not None and ratio.high is not None  # both sides have >= 3 repeats here
    if p_value < alpha and ratio.high < 1 - noise:
        return Comparison(ratio=ratio, p_value=p_value, verdict=FASTER)
    if p_value < alpha and ratio.low > 1 + noise:
        return Comparison(ratio=ratio, p_value=p_value, verdict=SLOWER)
    return Comparison(ratio=ratio, p_value=p_value, verdict=SAME)
