"""The summary at the top of the report: per workload, the fastest and the cheapest configuration, their time and
cost per run and per steady epoch, and one sentence each saying by how much they lead, decided by
`benchmarks.stats.compare` (a lead within noise, or with too few repeats to tell, is said to be one).

Only runs of one experiment are ranked together: the base's (epochs, training samples), else the most common
among the workload's rows, so a 3-epoch slice never "wins" against a full run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd

from benchmarks.stats import FASTER, SAME, compare
from report import format as fmt

Samples = Callable[[str, str], Sequence[float]]  # (workload, config) -> each repeat's total seconds

SUMMARY_COLUMNS = (
    "workload",
    "fastest",
    "time per run",
    "time per epoch",
    "fastest: verdict",
    "cheapest",
    "cost per run",
    "cost per epoch",
    "cheapest: verdict",
)


def summary_table(results: pd.DataFrame, samples: Samples) -> pd.DataFrame:
    rows = [_workload_row(str(w), rows, samples) for w, rows in results.groupby("workload", sort=True)]
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def _comparable(rows: pd.DataFrame) -> pd.DataFrame:
    base = rows[rows["is_base"].astype(bool)]
    shapes = rows[["epochs", "train_samples"]].fillna(0).apply(tuple, axis=1)
    # Without a base row: the most common experiment, ties going to the longer one.
    most_common = shapes.value_counts().sort_index(ascending=False).idxmax()
    return rows[shapes == (shapes[base.index[0]] if not base.empty else most_common)]


def _workload_row(workload: str, rows: pd.DataFrame, samples: Samples) -> dict[str, str]:
    ranked = _comparable(rows).sort_values(["total_s", "config"])
    fastest = ranked.iloc[0]
    row = {
        "workload": workload,
        "fastest": str(fastest["config"]),
        "time per run": f"{fmt.seconds(fastest['total_s'])} s ({fmt.interval(fastest, 'total', 'total_s')})"
        + _run_shape(fastest),
        "time per epoch": _per_epoch(fastest),
        "fastest: verdict": _lead(ranked, samples, "faster", lambda r: 1.0),
    }
    priced = ranked[ranked["cost_usd"].notna()].sort_values(["cost_usd", "config"])
    if priced.empty:
        unpriced = "no configuration of this workload has a price (see the prices above)"
        return row | {"cheapest": unpriced, "cost per run": "", "cost per epoch": "", "cheapest: verdict": ""}
    cheapest = priced.iloc[0]
    verdict = _lead(priced, samples, "cheaper", lambda r: float(r["usd_per_hour"]) / 3600)
    unpriced = sorted(set(ranked["config"]) - set(priced["config"]))
    if unpriced:  # an owned machine has no hourly price: "Own or rent" weighs it
        verdict += f"; without an hourly price: {', '.join(unpriced)}"
    return row | {
        "cheapest": str(cheapest["config"]),
        "cost per run": fmt.usd(cheapest["cost_usd"]),
        "cost per epoch": fmt.usd(cheapest["cost_per_epoch_usd"]),
        "cheapest: verdict": verdict,
    }


def _run_shape(row: pd.Series) -> str:
    """What "a run" was: the first (compiling) epoch weighs heavily in a short run, so the ranking holds for runs
    of this length only."""
    epochs, samples = row.get("epochs"), row.get("train_samples")
    if fmt.missing(epochs) or fmt.missing(samples):
        return ""
    return f"; a run of {int(epochs)} epochs x {int(samples):,} samples, the first compiling"


def _per_epoch(row: pd.Series) -> str:
    if fmt.missing(row["steady_epoch_s"]):
        return "not published" if row.get("run_ids") == "published" else fmt.NA
    return f"{fmt.seconds(row['steady_epoch_s'])} s, steady median ({fmt.interval(row, 'steady', 'steady_epoch_s')})"


def _lead(ranked: pd.DataFrame, samples: Samples, word: str, scale: Callable[[pd.Series], float]) -> str:
    """One sentence: the leader against the runner-up, on per-repeat times (x price per second for cost)."""
    leader = ranked.iloc[0]
    if len(ranked) < 2:
        priced = "priced " if word == "cheaper" else ""
        return f"{leader['config']} is the only {priced}configuration of this experiment"
    runner = ranked.iloc[1]
    ours = [v * scale(leader) for v in samples(str(leader["workload"]), str(leader["config"]))]
    theirs = [v * scale(runner) for v in samples(str(runner["workload"]), str(runner["config"]))]
    comparison = compare(ours, theirs)
    text = comparison.text("it", f"the runner-up {runner['config']}")  # the leader is named beside it
    if comparison.verdict == FASTER:
        return text.replace(" faster than ", f" {word} than ")
    # The leader has the smallest median, so the other verdicts are "same" (a tie) and "too few repeats".
    return f"{text}: a tie, not a lead" if comparison.verdict == SAME else text
