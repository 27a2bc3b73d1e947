"""The summary at the top of the report: per workload, the fastest and the cheapest configuration, and one sentence
each saying by how much they lead, decided by `benchmarks.stats.compare` (a lead within noise, or with too few
repeats to tell, is said to be one).

Measured runs are ranked on what compares across experiments of any size: throughput (training samples per second
of a steady epoch) for speed, and the price of a million training samples at that throughput for cost. So every run
given, the reference runs included, is ranked, whatever its epochs or sample count. Published figures, which give
whole runs only, are ranked on total time and cost among runs of one experiment (the base's epochs and samples).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from benchmarks.stats import FASTER, SAME, compare
from report import format as fmt

# (workload, config) -> the compared figure of each repeat (seconds, lower is better) and its machine (None: unknown)
Samples = Callable[[str, str], tuple[Sequence[float], Sequence[str] | None]]

SUMMARY_COLUMNS = (
    "workload",
    "compared on",
    "fastest",
    "speed",
    "time per run",
    "fastest: verdict",
    "cheapest",
    "price",
    "cost",
    "cost per run",
    "cheapest: verdict",
)
PER_SAMPLE_BASIS = "throughput: training samples per second of a steady epoch (any epochs and sample count)"
MILLION = 1_000_000


@dataclass(frozen=True)
class Leader:
    """The fastest or the cheapest configuration of one workload, as the first screen names it."""

    workload: str
    config: str
    figure: str  # "41,200 samples/s" or "$0.0236 per 1M samples"
    price: str  # "$3.59/h" or "" (no price)


def summary_table(results: pd.DataFrame, samples: Samples) -> pd.DataFrame:
    rows = [_workload_row(str(w), rows, samples) for w, rows in results.groupby("workload", sort=True)]
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def per_sample(results: pd.DataFrame) -> bool:
    """Whether the rows rank on throughput (measured, sample counts known) rather than on whole runs."""
    return "samples_per_s" in results and bool(results["samples_per_s"].notna().any())


def _workload_row(workload: str, rows: pd.DataFrame, samples: Samples) -> dict[str, str]:
    if per_sample(rows):
        ranked = rows[rows["samples_per_s"].notna()].sort_values(["samples_per_s", "config"], ascending=[False, True])
        left_out = sorted(set(rows["config"]) - set(ranked["config"]))
        basis = PER_SAMPLE_BASIS + (f"; no throughput recorded: {', '.join(left_out)}" if left_out else "")
        speed = f"{_throughput(ranked.iloc[0])}"
        priced = ranked[ranked["usd_per_hour"].notna()]
        priced = priced.assign(_per_million=priced["usd_per_hour"] / 3600 / priced["samples_per_s"] * MILLION)
        priced = priced.sort_values(["_per_million", "config"])
    else:
        ranked = _comparable(rows).sort_values(["total_s", "config"])
        basis = "total training time of runs of one experiment" + _run_shape(ranked.iloc[0])
        speed = f"{fmt.seconds(ranked.iloc[0]['total_s'])} s a run"
        priced = ranked[ranked["cost_usd"].notna()].sort_values(["cost_usd", "config"])
    fastest = ranked.iloc[0]
    row = {
        "workload": workload,
        "compared on": basis,
        "fastest": str(fastest["config"]),
        "speed": speed,
        "time per run": f"{fmt.seconds(fastest['total_s'])} s ({fmt.interval(fastest, 'total', 'total_s')})"
        + _run_shape(fastest),
        "fastest: verdict": _lead(ranked, samples, "faster", lambda r: 1.0),
    }
    if priced.empty:
        unpriced = "no configuration of this workload has a price: add one with --price PLATFORM=USD_PER_HOUR"
        return row | {"cheapest": unpriced, "price": "", "cost": "", "cost per run": "", "cheapest: verdict": ""}
    cheapest = priced.iloc[0]
    verdict = _lead(priced, samples, "cheaper", lambda r: float(r["usd_per_hour"]) / 3600)
    unpriced_configs = sorted(set(ranked["config"]) - set(priced["config"]))
    if unpriced_configs:  # an owned machine has no hourly price: "Own or rent" weighs it
        verdict += f"; without an hourly price: {', '.join(unpriced_configs)}"
    cost = (
        f"{fmt.usd(cheapest['_per_million'])} per 1M training samples"
        if "_per_million" in cheapest
        else f"{fmt.usd(cheapest['cost_usd'])} a run"
    )
    return row | {
        "cheapest": str(cheapest["config"]),
        "price": price(cheapest),
        "cost": cost,
        "cost per run": fmt.usd(cheapest["cost_usd"]) + _run_shape(cheapest),
        "cheapest: verdict": verdict,
    }


def leaders(summary: pd.DataFrame) -> list[tuple[Leader, Leader | None]]:
    """Per workload: the fastest, and the cheapest where some configuration has a price."""
    found = []
    for _, row in summary.iterrows():
        fastest = Leader(str(row["workload"]), str(row["fastest"]), str(row["speed"]).split(" (")[0], "")
        cheapest = (
            Leader(str(row["workload"]), str(row["cheapest"]), str(row["cost"]), str(row["price"]))
            if row["price"]
            else None
        )
        found.append((fastest, cheapest))
    return found


def price(row: pd.Series) -> str:
    return f"{fmt.usd(row['usd_per_hour'])}/h" if not fmt.missing(row.get("usd_per_hour")) else ""


def _throughput(row: pd.Series) -> str:
    interval = fmt.interval(row, "steady", "steady_epoch_s")
    return f"{row['samples_per_s']:,.0f} samples/s (steady epoch {fmt.seconds(row['steady_epoch_s'])} s, {interval})"


def _comparable(rows: pd.DataFrame) -> pd.DataFrame:
    base = rows[rows["is_base"].astype(bool)]
    shapes = rows[["epochs", "train_samples"]].fillna(0).apply(tuple, axis=1)
    # Without a base row: the most common experiment, ties going to the longer one.
    most_common = shapes.value_counts().sort_index(ascending=False).idxmax()
    return rows[shapes == (shapes[base.index[0]] if not base.empty else most_common)]


def _run_shape(row: pd.Series) -> str:
    """What "a run" was: the first (compiling) epoch weighs heavily in a short run, so a run's time holds for runs
    of this length only."""
    epochs, samples = row.get("epochs"), row.get("train_samples")
    if fmt.missing(epochs) or fmt.missing(samples):
        return ""
    return f"; a run of {int(epochs)} epochs x {int(samples):,} samples, the first compiling"


def _lead(ranked: pd.DataFrame, samples: Samples, word: str, scale: Callable[[pd.Series], float]) -> str:
    """One sentence: the leader against the runner-up, on per-repeat figures (x price per second for cost)."""
    leader = ranked.iloc[0]
    if len(ranked) < 2:
        priced = "priced " if word == "cheaper" else ""
        return f"{leader['config']} is the only {priced}configuration compared"
    runner = ranked.iloc[1]
    ours, our_machines = samples(str(leader["workload"]), str(leader["config"]))
    theirs, their_machines = samples(str(runner["workload"]), str(runner["config"]))
    comparison = compare(
        [v * scale(leader) for v in ours],
        [v * scale(runner) for v in theirs],
        candidate_machines=our_machines,
        base_machines=their_machines,
    )
    text = comparison.text("it", f"the runner-up {runner['config']}")  # the leader is named beside it
    if comparison.verdict == FASTER:
        return text.replace(" faster than ", f" {word} than ")
    # The leader has the best median, so the other verdicts are "same" (a tie) and "too few repeats".
    return f"{text}: a tie, not a lead" if comparison.verdict == SAME else text
