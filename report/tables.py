"""Per workload and configuration: times over repeats, accuracy, cost, and figures relative to a base.

One row per (workload, configuration). Repeats are the complete runs of that pair that did the same experiment
(same epochs and training samples); the row's time is the median of their totals, and relative figures are
ratios of those medians.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from benchmarks.stats import Estimate, median_estimate, ratio_of_medians
from report.costs import Pricing, Unpriced
from report.loading import Configuration, Run

PricingLookup = Callable[[str], Pricing | Unpriced]

# fmt: off
RESULT_COLUMNS = (
    "workload", "config", "platform", "backend", "variant", "data_source", "is_base", "cut_down",
    "n_runs", "run_ids", "epochs", "train_samples",
    "total_s", "total_low", "total_high", "total_coverage",
    "steady_epoch_s", "steady_low", "steady_high", "steady_coverage",
    "first_epoch_s", "final_acc", "final_acc_metric", "gpu_util_pct",
    "rel_time", "rel_time_low", "rel_time_high",
    "usd_per_hour", "billed_s", "cost_usd", "cost_rule", "price_source", "rel_cost", "notes",
)
# fmt: on
NUMERIC_SUFFIXES = (
    "_s",
    "_low",
    "_high",
    "_coverage",
    "_acc",
    "_pct",
    "rel_time",
    "per_hour",
    "_usd",
    "rel_cost",
)


MINIMUM_NOTE = "billed the profile's minimum"


class ReportError(ValueError):
    """Nothing to report (no readable complete run, ...); the message is one line."""


class BadArgumentError(ReportError):
    """An argument that does not fit the logs (e.g. a --base that names no configuration); one line."""


@dataclass(frozen=True)
class Group:
    """The repeats of one workload x configuration, and the runs left out of them with the reason."""

    workload: str
    config: Configuration
    runs: list[Run]
    left_out: list[tuple[Run, str]]

    @property
    def epochs(self) -> int:
        return self.runs[0].epochs_completed

    @property
    def train_samples(self) -> int | None:
        return _train_samples(self.runs[0])

    def totals(self) -> list[float]:
        return [r.total_s for r in self.runs]


def _train_samples(run: Run) -> int | None:
    data = run.metadata.get("data") or {}
    value = data.get("train_samples") if isinstance(data, dict) else None
    return value if isinstance(value, int) else None


def group_runs(runs: Sequence[Run]) -> list[Group]:
    """Complete runs by (workload, configuration). Repeats that differ in epochs or samples are left out,
    keeping the most common experiment (ties: the longer one): pooling different experiments means nothing."""
    by_key: dict[tuple[str, Configuration], list[Run]] = defaultdict(list)
    for run in runs:
        if run.complete:
            by_key[(run.workload, run.config)].append(run)
    groups = []
    for (workload, config), members in by_key.items():
        shapes = Counter((r.epochs_completed, _train_samples(r) or 0) for r in members)
        chosen = max(shapes, key=lambda shape: (shapes[shape], shape))
        kept = [r for r in members if (r.epochs_completed, _train_samples(r) or 0) == chosen]
        left_out = [
            (r, f"{r.epochs_completed} epochs / {_train_samples(r)} samples, unlike the other repeats")
            for r in members
            if (r.epochs_completed, _train_samples(r) or 0) != chosen
        ]
        groups.append(Group(workload, config, sorted(kept, key=lambda r: r.run_id), left_out))
    return groups


def resolve_base(spec: str | None, configs: Sequence[Configuration]) -> Configuration:
    """The base configuration named by `--base` (label, name, or a platform with one real configuration); by
    default the first real-data TensorFlow configuration (the published studies' base backend)."""
    if not configs:
        raise ReportError("no complete runs to report")
    ordered = sorted(set(configs), key=lambda c: (c.synthetic, c.label))
    if spec is None:
        tensorflow = [c for c in ordered if c.backend == "tensorflow" and not c.synthetic]
        return (tensorflow or ordered)[0]
    for matches in (
        [c for c in ordered if c.label == spec],
        [c for c in ordered if c.name == spec and not c.synthetic],
        [c for c in ordered if c.platform == spec and not c.synthetic],
    ):
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            names = ", ".join(c.label for c in matches)
            raise BadArgumentError(f"--base {spec!r} is ambiguous: it matches {names}")
    raise BadArgumentError(
        f"--base {spec!r} matches no configuration; configurations: {', '.join(c.label for c in ordered)}"
    )


def summarize(groups: Sequence[Group], base: Configuration, pricing: PricingLookup) -> pd.DataFrame:
    """The results table: one row per workload x configuration, in RESULT_COLUMNS."""
    rows = [_row(group, pricing(group.config.platform)) for group in groups]
    table = pd.DataFrame(rows, columns=list(RESULT_COLUMNS))
    numeric = [c for c in RESULT_COLUMNS if c.endswith(NUMERIC_SUFFIXES)]
    table[numeric] = table[numeric].astype(float)
    table = _add_relative(table, {(g.workload, g.config.label): g for g in groups}, base)
    return order_rows(table, base.label)


def order_rows(table: pd.DataFrame, base_label: str) -> pd.DataFrame:
    """Workloads alphabetically, the base first within each, then configurations by label."""
    key = table["config"].map(lambda label: (label != base_label, label))
    return (table.assign(_key=key).sort_values(["workload", "_key"], kind="stable").drop(columns="_key")).reset_index(
        drop=True
    )


def _row(group: Group, pricing: Pricing | Unpriced) -> dict[str, object]:
    total = median_estimate(group.totals())
    steady_values = [v for v in (r.steady_median_s for r in group.runs) if v is not None]
    steady = median_estimate(steady_values) if steady_values else None
    firsts = [v for v in (r.first_epoch_s for r in group.runs) if v is not None]
    accuracy = [acc for acc, _ in (r.final_accuracy for r in group.runs) if acc is not None]
    metrics = {metric for _, metric in (r.final_accuracy for r in group.runs) if metric}
    utilization = [v for v in (r.gpu_utilization_pct for r in group.runs) if v is not None]
    notes = [f"left out {r.run_id}: {why}" for r, why in group.left_out]
    row: dict[str, object] = {
        "workload": group.workload,
        "config": group.config.label,
        "platform": group.config.platform,
        "backend": group.config.backend,
        "variant": group.config.variant,
        "data_source": "/".join(sorted({r.data_source for r in group.runs})),
        "n_runs": len(group.runs),
        "run_ids": " ".join(r.run_id for r in group.runs),
        "epochs": group.epochs,
        "train_samples": group.train_samples,
        **_estimate_columns("total", total, value_key="total_s"),
        **_estimate_columns("steady", steady, value_key="steady_epoch_s"),
        "first_epoch_s": float(np.median(firsts)) if firsts else None,
        "final_acc": float(np.median(accuracy)) if accuracy else None,
        "final_acc_metric": "/".join(sorted(metrics)),
        "gpu_util_pct": float(np.median(utilization)) if utilization else None,
        "cut_down": any(r.metadata.get("cut_down") for r in group.runs),
    }
    if isinstance(pricing, Pricing):
        if pricing.billed_seconds(total.value) > total.value + pricing.increment_s:
            notes.append(f"{MINIMUM_NOTE} ({pricing.billed_seconds(total.value):.0f} s)")
        row |= {
            "usd_per_hour": pricing.usd_per_hour,
            "billed_s": pricing.billed_seconds(total.value),
            "cost_usd": pricing.cost_usd(total.value),
            "cost_rule": f"{pricing.rule}, applied to each workload's training time",
            "price_source": pricing.source,
        }
    else:
        notes.append(pricing.reason)
    row["notes"] = "; ".join(notes)
    return row


def _estimate_columns(prefix: str, estimate: Estimate | None, value_key: str) -> dict[str, float | None]:
    if estimate is None:
        return {value_key: None, f"{prefix}_low": None, f"{prefix}_high": None, f"{prefix}_coverage": None}
    return {
        value_key: estimate.value,
        f"{prefix}_low": estimate.low,
        f"{prefix}_high": estimate.high,
        f"{prefix}_coverage": estimate.coverage,
    }


def _add_relative(table: pd.DataFrame, groups: dict[tuple[str, str], Group], base: Configuration) -> pd.DataFrame:
    """Ratios against the base, on the same data source: synthetic rows against the base's synthetic runs."""
    table = table.copy()
    table["is_base"] = False
    for index, row in table.iterrows():
        group = groups[(row["workload"], row["config"])]
        twin = replace(base, synthetic=group.config.synthetic)
        table.at[index, "is_base"] = group.config == twin
        base_group = groups.get((row["workload"], twin.label))
        reason = _incomparable(group, base_group, twin)
        if reason:
            table.at[index, "notes"] = "; ".join(filter(None, [row["notes"], reason]))
            continue
        assert base_group is not None
        ratio = ratio_of_medians(group.totals(), base_group.totals())
        table.at[index, "rel_time"] = ratio.value
        if not table.at[index, "is_base"]:  # the base against itself is 1.0 by definition, not an estimate
            table.at[index, "rel_time_low"] = ratio.low
            table.at[index, "rel_time_high"] = ratio.high
        base_cost = table.loc[(table["workload"] == row["workload"]) & (table["config"] == twin.label), "cost_usd"]
        base_cost = base_cost.iloc[0]
        if pd.notna(row["cost_usd"]) and pd.notna(base_cost) and base_cost > 0:
            table.at[index, "rel_cost"] = row["cost_usd"] / base_cost
    return table


def _incomparable(group: Group, base_group: Group | None, base: Configuration) -> str:
    if base_group is None:
        return f"no relative figures: the base {base.label} has no complete run of this workload"
    if (group.epochs, group.train_samples) != (base_group.epochs, base_group.train_samples):
        return (
            f"no relative figures: {group.epochs} epochs / {group.train_samples} samples vs the base's "
            f"{base_group.epochs} / {base_group.train_samples}"
        )
    return ""


def partial_runs_table(runs: Sequence[Run]) -> pd.DataFrame:
    """Runs that did not finish: shown, never counted in results."""
    rows = [
        {
            "workload": r.workload,
            "config": r.config.label,
            "run_id": r.run_id,
            "status": r.status,
            "epochs_completed": r.epochs_completed,
            "epochs_planned": r.epochs_planned,
            "elapsed_s": r.total_s,
            "error": r.error,
            "path": str(r.log.path),
        }
        for r in runs
        if not r.complete
    ]
    columns = [
        "workload",
        "config",
        "run_id",
        "status",
        "epochs_completed",
        "epochs_planned",
        "elapsed_s",
        "error",
        "path",
    ]
    return pd.DataFrame(rows, columns=columns)


def runs_table(runs: Sequence[Run], groups: Sequence[Group]) -> pd.DataFrame:
    """Every run read, with its per-run figures and whether it counts as a repeat in the results."""
    counted = {id(r) for g in groups for r in g.runs}
    left_out = {id(r): why for g in groups for r, why in g.left_out}
    rows = []
    for r in runs:
        accuracy, metric = r.final_accuracy
        rows.append(
            {
                "workload": r.workload,
                "config": r.config.label,
                "run_id": r.run_id,
                "status": r.status,
                "data_source": r.data_source,
                "epochs": r.epochs_completed,
                "total_s": r.total_s,
                "first_epoch_s": r.first_epoch_s,
                "steady_median_s": r.steady_median_s,
                "final_acc": accuracy,
                "final_acc_metric": metric,
                "counted": id(r) in counted,
                "why_not_counted": left_out.get(id(r), "" if r.complete else f"status {r.status}"),
                "path": str(r.log.path),
            }
        )
    return pd.DataFrame(rows)
