"""`python -m report backtest`: how far the estimator's figures fall from runs it did not see.

Every committed reference run (logs/reference) and every published study run is predicted from all the others,
with its whole group left out (a group: one workload, backend, machine and configuration, so its repeats do not
predict each other). The errors per basis give the range every estimate states: from the 5th to the 95th
percentile of actual / predicted. The range's coverage is checked the same way: each run against the range made
from the other groups' errors.
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from estimator import physics
from estimator.bands import Band, band
from estimator.basis import folder_observations, reference_basis
from estimator.model import (
    BASES,
    Observation,
    Prediction,
    Target,
    fits,
    predict,
    published_observations,
)

FIGURES = {"gpu": "FP32 TFLOP/s", "cpu": "vCPUs"}


@dataclass(frozen=True)
class Outcome:
    observation: Observation
    prediction: Prediction | None

    @property
    def log_error(self) -> float:
        """ln(actual / predicted): 0 is exact, +0.1 the run took 10.5 % longer than predicted."""
        assert self.prediction is not None
        return math.log(self.observation.total_s / self.prediction.seconds)


def target_of(o: Observation) -> Target:
    return Target(o.workload, o.backend, o.machine, o.batch, o.samples, o.epochs, o.variant)


def backtest(observations: Sequence[Observation]) -> list[Outcome]:
    """The runs a dry run estimates (the runner's default settings, each in a fresh process that compiles its first
    epoch), each predicted from all the others with its group left out; sweeps' variants, shared-process repeats and
    runs whose first epoch loaded a compile cache are predicted from, not judged."""
    groups: dict[str, list[Observation]] = defaultdict(list)
    for o in observations:
        if o.defaults and not o.cached_first:
            groups[o.group].append(o)
    outcomes = []
    for group, members in groups.items():
        pool = [o for o in observations if o.group != group]
        fitted = fits(pool)
        outcomes += [Outcome(o, predict(target_of(o), pool, fitted)) for o in members]
    return outcomes


def bands(outcomes: Sequence[Outcome]) -> dict[str, Band]:
    by_basis: dict[str, list[float]] = defaultdict(list)
    for o in outcomes:
        if o.prediction is not None:
            by_basis[o.prediction.basis].append(o.log_error)
    return {basis: b for basis, errors in by_basis.items() if (b := band(errors)) is not None}


def covered(
    outcomes: Sequence[Outcome], left_out: Callable[[Observation], str] = lambda o: o.group
) -> list[bool | None]:
    """For each outcome, whether its run lies in the range made from the other groups' errors of its basis (None:
    no prediction, or too few other errors to make a range). `left_out`: what a run's range is made without (its
    group; for the physics basis, its workload)."""
    flags: list[bool | None] = []
    for o in outcomes:
        if o.prediction is None:
            flags.append(None)
            continue
        others = [
            x.log_error
            for x in outcomes
            if x.prediction is not None
            and x.prediction.basis == o.prediction.basis
            and left_out(x.observation) != left_out(o.observation)
        ]
        found = band(others)
        ratio = o.observation.total_s / o.prediction.seconds
        flags.append(None if found is None else found.low <= ratio <= found.high)
    return flags


@cache
def committed_outcomes(reference: Path | None = None) -> tuple[Outcome, ...]:
    """The backtest of the committed reference runs (the shipped basis), or of the runs in a `reference` folder."""
    observed = reference_basis() if reference is None else folder_observations(reference.resolve())
    return tuple(backtest(observed + published_observations()))


@cache
def committed_physics(reference: Path | None = None) -> tuple[Outcome, ...]:
    """The physics basis's backtest (estimator.physics.outcomes): each workload left out in turn."""
    observed = reference_basis() if reference is None else folder_observations(reference.resolve())
    found = physics.outcomes(observed, physics.builtin_costs())
    return tuple(Outcome(o, p) for _, o, p in found if p is not None)


def committed_bands(reference: Path | None = None) -> dict[str, Band]:
    """Each basis's range: the chain's from its backtest, the physics basis's as shipped with the estimator
    (estimator/data/gpu_rates.json, written with the reference basis), or from a `reference` folder's backtest."""
    physical = physics.shipped().bands if reference is None else bands(committed_physics(reference))
    return {**bands(committed_outcomes(reference)), **physical}


# ---- the report -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    label: str
    runs: int
    groups: int
    median_abs_pct: float
    p75_abs_pct: float
    p90_abs_pct: float
    coverage: float | None
    band: Band | None


def physics_summaries(outcomes: Sequence[Outcome]) -> list[Summary]:
    """The physics basis's rows: per basis (physics, datasheet) and GPU, then per basis; coverage judged on ranges
    made from the other workloads' errors."""
    flags = covered(outcomes, left_out=lambda o: o.workload)
    rows = []
    for basis in (physics.PHYSICS, physics.DATASHEET):
        mine = [(o, f) for o, f in zip(outcomes, flags, strict=True) if o.prediction and o.prediction.basis == basis]
        labels = [f"{basis} {gpu}" for gpu in sorted({o.observation.machine for o, _ in mine})]
        for label in [*labels, basis]:
            chosen = [(o, f) for o, f in mine if label in (basis, f"{basis} {o.observation.machine}")]
            row = summarize(label, [o for o, _ in chosen], [f for _, f in chosen])
            rows.append(row) if row else None
    return rows


def summarize(label: str, outcomes: Sequence[Outcome], flags: Sequence[bool | None]) -> Summary | None:
    pairs = [(o, f) for o, f in zip(outcomes, flags, strict=True) if o.prediction is not None]
    if not pairs:
        return None
    errors = sorted(abs(math.expm1(-o.log_error)) * 100 for o, _ in pairs)  # |predicted / actual - 1|
    judged = [f for _, f in pairs if f is not None]
    quartiles = statistics.quantiles(errors, n=20, method="inclusive") if len(errors) > 1 else [errors[0]] * 19
    return Summary(
        label=label,
        runs=len(pairs),
        groups=len({o.observation.group for o, _ in pairs}),
        median_abs_pct=statistics.median(errors),
        p75_abs_pct=quartiles[14],
        p90_abs_pct=quartiles[17],
        coverage=sum(judged) / len(judged) if judged else None,
        band=band([o.log_error for o, _ in pairs]),
    )


def summaries(outcomes: Sequence[Outcome]) -> list[Summary]:
    flags = covered(outcomes)
    rows = []
    for basis in BASES:
        chosen = [(o, f) for o, f in zip(outcomes, flags, strict=True) if o.prediction and o.prediction.basis == basis]
        row = summarize(basis, [o for o, _ in chosen], [f for _, f in chosen])
        rows.append(row) if row else None
    overall = summarize("all", outcomes, flags)
    return [*rows, overall] if overall else rows


def _row(s: Summary, width: int = 10) -> str:
    span = "-" if s.band is None else f"x{s.band.low:.2f} to x{s.band.high:.2f}"
    coverage = "-" if s.coverage is None else f"{s.coverage:.0%}"
    return (
        f"  {s.label:<{width}} {s.runs:>5} {s.groups:>6}  {s.median_abs_pct:>13.1f}% {s.p75_abs_pct:>5.0f}% "
        f"{s.p90_abs_pct:>5.0f}%  {span:<34} {coverage:>8}"
    )


def physics_lines(outcomes: Sequence[Outcome]) -> list[str]:
    """The physics basis's table: one row per basis and GPU, then per basis."""
    workloads = len({o.observation.workload for o in outcomes})
    return [
        f"physics: {len({o.observation for o in outcomes})} runs of {workloads} workloads on the measured GPUs, each "
        "predicted from its step costs (measured on the CPU) with its workload left out",
        "  physics: the GPU's rates fitted on the other workloads' runs; datasheet: the other GPUs' rates, each kind "
        "of arithmetic scaled by the datasheet peaks",
        f"  {'basis, GPU':<16} {'runs':>5} {'groups':>6}  {'median |error|':>14} {'75%':>6} {'90%':>6}  "
        f"{'range (5-95% of actual/predicted)':<34} {'coverage':>8}",
        *(_row(s, 16) for s in physics_summaries(outcomes)),
        "  coverage: share of runs inside the range made from the other workloads' errors of their basis",
    ]


def report_lines(outcomes: Sequence[Outcome]) -> list[str]:
    observations = [o.observation for o in outcomes]
    origins = {origin: sum(o.origin == origin for o in observations) for origin in ("measured", "published")}
    missing = [o for o in outcomes if o.prediction is None]
    lines = [
        f"backtest: {len(outcomes)} runs in {len({o.group for o in observations})} groups "
        f"({origins['measured']} committed reference runs, {origins['published']} published), each predicted "
        "from the others with its group left out",
        f"  {'basis':<10} {'runs':>5} {'groups':>6}  {'median |error|':>14} {'75%':>6} {'90%':>6}  "
        f"{'range (5-95% of actual/predicted)':<34} {'coverage':>8}",
    ]
    lines += [_row(s) for s in summaries(outcomes)]
    if missing:
        lines.append(
            f"  not estimated: {len(missing)} runs in {len({o.observation.group for o in missing})} groups "
            "(nothing comparable once their group is left out)"
        )
    lines.append("  coverage: share of runs inside the range made from the other groups' errors of their basis")
    lines += worst_lines(outcomes)
    for kind, fit in sorted(fits(observations).items()):
        figure = FIGURES[kind]
        lines.append(
            f"  hardware relation, {kind}: throughput ~ {figure} ^ {fit.exponent:.2f} (median of {fit.pairs} pairs "
            f"of machines, at most {fit.widest:.1f}x apart)"
        )
    return lines


WORST = 10


def worst_lines(outcomes: Sequence[Outcome], count: int = WORST) -> list[str]:
    """The runs predicted worst (by |ln(actual / predicted)|), each with the basis its figure came from."""
    predicted = sorted((o for o in outcomes if o.prediction is not None), key=lambda o: -abs(o.log_error))
    lines = [f"  the {min(count, len(predicted))} runs predicted worst (actual / predicted, the run, its basis):"]
    for o in predicted[:count]:
        run, prediction = o.observation, o.prediction
        assert prediction is not None
        lines.append(
            f"    x{run.total_s / prediction.seconds:.2f}  {run.where} {run.workload} on {run.machine}, "
            f"{run.epochs} epochs of {run.samples:,} samples: {run.total_s:,.1f} s, "
            f"predicted {prediction.seconds:,.1f} s from {prediction.basis}: {prediction.where}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m report backtest",
        description="Predict every committed reference run and published study run from the others (its group "
        "left out) and print the error distribution and the coverage of the stated range.",
    )
    parser.add_argument(
        "--reference",
        type=Path,
        help="folder of reference runs (default: the committed logs/reference/, as the estimator ships them)",
    )
    args = parser.parse_args(argv)
    if args.reference is not None and not args.reference.is_dir():
        parser.exit(2, f"error: --reference {args.reference}: no such folder\n")
    print("\n".join(report_lines(committed_outcomes(args.reference))))
    print("\n".join(physics_lines(committed_physics(args.reference))))
    return 0
