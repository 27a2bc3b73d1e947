"""Display tables: the numeric result columns turned into the text a reader sees (HTML and markdown alike)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from benchmarks.stats import Estimate

NA = "n/a"


def missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def seconds(value: Any) -> str:
    return NA if missing(value) else f"{value:,.1f}"


def ratio(value: Any) -> str:
    return NA if missing(value) else f"{value:.2f}x"


def usd(value: Any) -> str:
    if missing(value):
        return NA
    return f"${value:,.4f}" if value < 10 else f"${value:,.2f}"


def accuracy(value: Any, metric: Any = "") -> str:
    if missing(value):
        return NA
    return f"{value:.4f} ({metric})" if metric else f"{value:.4f}"


def interval(row: pd.Series, prefix: str, value_key: str, n_key: str = "n_runs") -> str:
    """ "118.0–130.2 (94% order-statistic, n=5)" or "n=1, no interval"."""
    if missing(row.get(value_key)):
        return NA
    low, high = row.get(f"{prefix}_low"), row.get(f"{prefix}_high")
    estimate = Estimate(
        value=float(row[value_key]),
        n=int(row[n_key]),
        low=None if missing(low) else float(low),
        high=None if missing(high) else float(high),
        coverage=None if missing(row.get(f"{prefix}_coverage")) else float(row[f"{prefix}_coverage"]),
        method="order-statistic",
    )
    return estimate.interval_text("{:,.1f}")


def relative_interval(row: pd.Series) -> str:
    low, high = row.get("rel_time_low"), row.get("rel_time_high")
    if missing(low) or missing(high):
        return ""
    return f"{low:.2f}–{high:.2f}"


def _notes_without_prices(notes: str) -> str:
    """Row notes minus the missing-price reasons, which the page lists once."""
    return "; ".join(n for n in str(notes or "").split("; ") if n and not n.startswith("no price"))


def results_display(results: pd.DataFrame) -> pd.DataFrame:
    """One workload's results as the reader sees them."""
    rows = []
    for _, r in results.iterrows():
        rel_ci = relative_interval(r)
        rows.append(
            {
                "configuration": r["config"] + (" (base)" if r["is_base"] else ""),
                "data": r["data_source"],
                "repeats": int(r["n_runs"]),
                "epochs": int(r["epochs"]),
                "total time (s)": seconds(r["total_s"]),
                "interval over repeats": interval(r, "total", "total_s"),
                "steady epoch (s, median)": seconds(r["steady_epoch_s"]),
                "first epoch (s)": seconds(r["first_epoch_s"]),
                "final accuracy": accuracy(r["final_acc"], r["final_acc_metric"]),
                "GPU util": NA if missing(r["gpu_util_pct"]) else f"{r['gpu_util_pct']:.0f}%",
                "time vs base": ratio(r["rel_time"]) + (f" [{rel_ci}]" if rel_ci else ""),
                "cost": usd(r["cost_usd"]),
                "cost vs base": ratio(r["rel_cost"]),
                "notes": _notes_without_prices(r["notes"]),
            }
        )
    return _without_empty(pd.DataFrame(rows), ["GPU util"])


def comparison_display(comparison: pd.DataFrame) -> pd.DataFrame:
    """One workload's published and measured rows, relative to the published base."""
    rows = []
    for _, r in comparison.iterrows():
        measured = r["source"] == "measured"
        rows.append(
            {
                "source": r["source"],
                "configuration": r["config"],
                "data": r["data_source"] + (f" ({r['dataset']})" if r["dataset"] else ""),
                "repeats": int(r["n_runs"]),
                "epochs": int(r["epochs"]),
                "total time (s)": seconds(r["total_s"]),
                "interval": interval(r, "total", "total_s") if measured else "",
                "final accuracy": accuracy(r["final_acc"], r["final_acc_metric"]),
                "GPU util": NA if missing(r["gpu_util_pct"]) else f"{r['gpu_util_pct']:.0f}%",
                "time vs published base": ratio(r["rel_time_vs_published_base"])
                + (f" ({r['basis']})" if measured and r["basis"] else ""),
                "time vs same published config": (
                    f"{ratio(r['time_vs_match'])} of {r['matches']}" if not missing(r["time_vs_match"]) else ""
                ),
                "cost": usd(r["cost_usd"]),
                "cost vs published base": ratio(r["rel_cost_vs_published_base"]),
                "notes": _notes_without_prices(r["notes"]),
            }
        )
    return _without_empty(pd.DataFrame(rows), ["GPU util", "time vs same published config"])


def _without_empty(table: pd.DataFrame, optional: list[str]) -> pd.DataFrame:
    """Drop optional columns no row has a value in (e.g. GPU utilisation of CPU-only runs)."""
    empty = [c for c in optional if c in table and table[c].isin([NA, ""]).all()]
    return table.drop(columns=empty)


def setups_display(setups: pd.DataFrame) -> pd.DataFrame:
    return setups.assign(usd_per_hour=[usd(v) for v in setups["usd_per_hour"]]).rename(
        columns={"config": "configuration", "usd_per_hour": "price per hour"}
    )


def machines_display(machines: pd.DataFrame) -> pd.DataFrame:
    if machines.empty:
        return machines
    return pd.DataFrame(
        {
            "platform": machines["platform"],
            "run": machines["run_id"],
            "runs": machines["runs"],
            "training (s)": [seconds(v) for v in machines["training_s"]],
            "billed (s)": [seconds(v) for v in machines["billed_s"]],
            "beyond training (s)": [seconds(v) for v in machines["overhead_s"]],
            "cost": [usd(v) for v in machines["cost_usd"]],
            "from": machines["source"],
        }
    )


def partial_display(partial: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "workload": partial["workload"],
            "configuration": partial["config"],
            "run": partial["run_id"],
            "status": partial["status"],
            "epochs done": [
                f"{done}/{planned}" if not missing(planned) else f"{done}"
                for done, planned in zip(partial["epochs_completed"], partial["epochs_planned"], strict=True)
            ],
            "time so far (s)": [seconds(v) for v in partial["elapsed_s"]],
            "error": partial["error"],
            "file": partial["path"],
        }
    )
