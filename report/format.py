"""Display tables: the numeric result columns turned into the text a reader sees (HTML and markdown alike)."""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

import pandas as pd

from benchmarks.metadata import StabilityLabel
from benchmarks.stats import Estimate

NA = "n/a"


def missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def markdown_table(table: pd.DataFrame, right: Collection[str] = ()) -> str:
    """A GitHub-flavoured markdown table, the columns named in `right` aligned right; pipes in cells are escaped,
    newlines flattened."""

    def cell(value: object) -> str:
        text = NA if missing(value) else str(value)
        return text.replace("|", r"\|").replace("\n", " ")

    lines = [
        "| " + " | ".join(cell(c) for c in table.columns) + " |",
        "|" + "".join("---:|" if c in right else "---|" for c in table.columns),
    ]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join(lines)


def seconds(value: Any) -> str:
    """Tenths of a second from 10 s up, three significant digits below (GPU epochs last a fraction of one)."""
    if missing(value):
        return NA
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.3g}"


def ratio(value: Any) -> str:
    """Two decimals, three significant digits below 0.1 (a GPU against a laptop: 0.0275x, not 0.03x)."""
    if missing(value):
        return NA
    return f"{value:.2f}x" if abs(value) >= 0.1 else f"{value:.3g}x"


def usd(value: Any) -> str:
    """Cents above a dollar, three significant digits below it: "$3.30", "$0.0236", never "$3.3000"."""
    if missing(value):
        return NA
    return f"${value:,.2f}" if value >= 1 else f"${value:.3g}"


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
        method="order-statistic" if missing(row.get(f"{prefix}_method")) else str(row[f"{prefix}_method"]),
        machines=1 if missing(row.get("machines")) else int(row["machines"]),
    )
    return estimate.interval_text("{:,.3g}" if estimate.value < 10 else "{:,.1f}")


def relative_interval(row: pd.Series, column: str = "rel_time") -> str:
    low, high = row.get(f"{column}_low"), row.get(f"{column}_high")
    if missing(low) or missing(high):
        return "no interval" if not missing(row.get(column)) and not row.get("is_base") else ""
    return f"{low:.2f}–{high:.2f}"


def relative(row: pd.Series, column: str) -> str:
    """ "0.62x [0.55–0.70]": a ratio of medians with its bootstrap interval, or why there is none."""
    interval_text = relative_interval(row, column)
    return ratio(row.get(column)) + (f" [{interval_text}]" if interval_text else "")


def marks(row: pd.Series) -> str:
    """Unstable and host-bound rows, named in the table as the charts mark them."""
    found = []
    stability = row.get("stability")
    if isinstance(stability, str) and stability != StabilityLabel.STABLE:
        found.append(f"⚠ {stability}")
    if row.get("host_bound") is True:
        share = row.get("host_share")
        found.append("⚠ host-bound" + ("" if missing(share) else f" (GPU idle {share:.0%} of steady epochs)"))
    return "; ".join(found)


def energy(row: pd.Series) -> str:
    gpu = row.get("gpu_wh")
    if missing(gpu):
        return "not recorded"
    host = row.get("host_wh")
    text = f"{gpu:,.2f} Wh GPU" + ("" if missing(host) else f" + {host:,.2f} Wh host")
    cost = row.get("energy_usd")
    return text + ("" if missing(cost) else f" = {usd(cost)}")


TOO_FEW_TEXT = "too few repeats to tell"
FOLDED = "too few repeats †"
FOLD_NOTE = (
    "† too few repeats to tell a difference beyond noise: a verdict needs an interval on both sides (3 or more "
    "repeats each) and enough of them for the rank-sum test to reach p < 0.05 (4 against 4, or 3 against 5)"
)


def fold_verdicts(table: pd.DataFrame, columns: list[str]) -> tuple[pd.DataFrame, str]:
    """The same "too few repeats to tell" on every row said once: each such cell becomes a mark, and the note
    that explains it is returned ("" where no cell was folded)."""
    folded = table.copy()
    hits = 0
    for column in (c for c in columns if c in folded):
        mask = folded[column].astype(str).str.contains(TOO_FEW_TEXT, regex=False)
        hits += int(mask.sum())
        folded.loc[mask, column] = FOLDED
    return folded, FOLD_NOTE if hits else ""


def fold_uniform(table: pd.DataFrame, column: str) -> tuple[pd.DataFrame, str]:
    """A column with one value on every row, said once ("compared on: ...") instead of on each row."""
    if column not in table or table.empty or table[column].nunique() != 1:
        return table, ""
    return table.drop(columns=column), f"{column[:1].upper()}{column[1:]}: {table[column].iloc[0]}."


def _notes_without_prices(notes: str) -> str:
    """Row notes minus the missing-price reasons, which the page lists once."""
    return "; ".join(n for n in str(notes or "").split("; ") if n and not n.startswith("no price"))


def results_display(results: pd.DataFrame) -> pd.DataFrame:
    """One workload's results as the reader sees them."""
    rows = []
    for _, r in results.iterrows():
        rows.append(
            {
                "configuration": r["config"] + (" (base)" if r["is_base"] else ""),
                "data": r["data_source"],
                "repeats": int(r["n_runs"]),
                "epochs": int(r["epochs"]),
                "total time (s)": seconds(r["total_s"]),
                "interval over repeats": interval(r, "total", "total_s"),
                "steady epoch (s, median)": seconds(r["steady_epoch_s"]),
                "steady interval": interval(r, "steady", "steady_epoch_s"),
                "first epoch (s)": seconds(r["first_epoch_s"]),
                "final accuracy": accuracy(r["final_acc"], r["final_acc_metric"]),
                "GPU util": NA if missing(r["gpu_util_pct"]) else f"{r['gpu_util_pct']:.0f}%",
                "stability": marks(r) or (r.get("stability") if isinstance(r.get("stability"), str) else NA),
                "throughput (samples/s)": NA if missing(r.get("samples_per_s")) else f"{r['samples_per_s']:,.0f}",
                "time vs base": relative(r, "rel_time"),
                "steady vs base": _steady_relative(r),
                "verdict": r.get("verdict") if isinstance(r.get("verdict"), str) else "",
                "cost": usd(r["cost_usd"]),
                "cost per epoch": usd(r.get("cost_per_epoch_usd")),
                "cost vs base": _cost_relative(r),
                "energy per run": energy(r),
                "notes": _notes_without_prices(r["notes"]),
            }
        )
    return _without_empty(pd.DataFrame(rows), ["GPU util", "stability", "verdict", "energy per run"])


def _cost_relative(row: pd.Series) -> str:
    """The cost ratio; where whole runs do not compare, that of a steady epoch or of a sample, said so."""
    text = relative(row, "rel_cost")
    if missing(row.get("rel_cost")) or not missing(row.get("rel_time")):
        return text
    return f"{text} {_per(row)}"


def _per(row: pd.Series) -> str:
    basis = row.get("steady_basis")
    return "per sample" if isinstance(basis, str) and basis.startswith("time per sample") else "per steady epoch"


def _steady_relative(row: pd.Series) -> str:
    """The steady-epoch ratio, saying when it is per training sample (the sample counts differ)."""
    text = relative(row, "rel_steady")
    return f"{text} per sample" if _per(row) == "per sample" and not row.get("is_base") else text


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
    empty = [c for c in optional if c in table and table[c].isin([NA, "", "not recorded"]).all()]
    return table.drop(columns=empty)


def setups_display(setups: pd.DataFrame, derived_prices: bool = False) -> pd.DataFrame:
    """`derived_prices`: the hourly prices were worked back from published costs per run, and say so."""
    price = "price per hour (derived: cost of a run / its time)" if derived_prices else "price per hour"
    return setups.assign(usd_per_hour=[usd(v) for v in setups["usd_per_hour"]]).rename(
        columns={"config": "configuration", "usd_per_hour": price}
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


def energy_display(results: pd.DataFrame) -> pd.DataFrame:
    """Rows with measured energy: per run, per steady epoch's share of it, and its cost."""
    if "gpu_wh" not in results:
        return pd.DataFrame()
    measured = results[results["gpu_wh"].notna()]
    return pd.DataFrame(
        {
            "workload": measured["workload"],
            "configuration": measured["config"],
            "repeats": measured["n_runs"].astype(int),
            "GPU energy per run (Wh)": [f"{v:,.2f}" for v in measured["gpu_wh"]],
            "GPU energy per steady epoch (Wh)": [
                NA if missing(v) else f"{v:,.4f}" for v in measured["gpu_wh_per_epoch"]
            ],
            "host energy per run (Wh)": [NA if missing(v) else f"{v:,.2f}" for v in measured["host_wh"]],
            "method": measured["energy_method"],
            "electricity cost per run": [usd(v) for v in measured.get("energy_usd", pd.Series(index=measured.index))],
        }
    )


def energy_note(report: Any) -> str:
    """Why the report shows no energy table, in words."""
    if not report.measured:
        return (
            "The published studies measured no energy per run; the own-or-rent table above gives what a post's "
            "power figures allow."
        )
    return (
        "Energy was not recorded in these logs: the runner measures it from metadata schema 2 on (NVML energy "
        "counter or power samples on NVIDIA GPUs, RAPL on the host where readable); earlier logs lack it."
    )
