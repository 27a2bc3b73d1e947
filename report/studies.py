"""The published studies, from the project's bundled copy of their logs and tables (report/data/), and the
comparison of measured runs with them.

A study's published figures go through the same pipeline as measured runs (group, median, ratio to the base,
cost = training seconds x the study's hourly price / 3600), so the published relative figures are reproduced,
not copied. The provider table of 2018 has totals only; its relative figures are computed from those totals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from benchmarks.logs import EpochLog
from estimator.published import (
    PUBLISHED_DIR,
    PUBLISHED_RUN_ID,
    PublishedConfig,
    Study,
    StudyDataError,
    epoch_log,
    load_studies,
    provider_label,
    table_epoch_logs,
)
from records.loading import Configuration, Run
from report.costs import TRAINING_TIME, Pricing, Unpriced
from report.tables import RESULT_COLUMNS, BadArgumentError, group_runs, resolve_base, summarize


@dataclass
class Published:
    """A study's published figures in the report's result columns, and each configuration's setup."""

    study: Study
    results: pd.DataFrame
    setups: pd.DataFrame  # config, hardware, software, price


def published_results(study: Study, root: Path = PUBLISHED_DIR) -> Published:
    if study.kind == "provider-table":
        return Published(study, _provider_results(study, root), _provider_setups(study, root))
    runs = _epoch_log_runs(study, root) if study.kind == "epoch-logs" else _epoch_table_runs(study, root)
    groups = group_runs(runs)
    base = resolve_base(study.base, groups)
    results = summarize(groups, base, lambda platform: _published_pricing(study, platform))
    results = _with_wall_times(study, results)
    labels = [c.label(b) for c in study.configs for b in c.backends]
    order = {label: i for i, label in enumerate(labels)}
    results = results.sort_values(
        ["workload", "config"], key=lambda s: s.map(order) if s.name == "config" else s, kind="stable"
    ).reset_index(drop=True)
    return Published(study, results, _setups(study))


def _with_wall_times(study: Study, results: pd.DataFrame) -> pd.DataFrame:
    """Where a study published whole-run times, they are the totals (and costs): summing epochs printed in whole
    seconds leaves out data loading and rounding (the home server's 1,084 s of epochs against 1,382 s of `time`)."""
    walls = {c.name: c.wall_seconds for c in study.configs if c.wall_seconds is not None}
    if not walls:
        return results
    results = results.copy()
    for index, row in results.iterrows():
        wall = walls.get(row["platform"])
        if wall is None:
            continue
        epochs = f"{row['total_s']:,.0f} s"
        note = f"total = the published whole-run time (`time`, data loading included); its epochs sum to {epochs}"
        results.loc[index, ["total_s", "billed_s"]] = [wall, wall]
        results.loc[index, ["total_low", "total_high", "total_coverage"]] = float("nan")
        if pd.notna(row["usd_per_hour"]):
            results.loc[index, "cost_usd"] = wall * row["usd_per_hour"] / 3600
        results.loc[index, "notes"] = "; ".join(filter(None, [row["notes"], note]))
    for _, rows in results.groupby("workload"):
        base = rows[rows["is_base"].astype(bool)].iloc[0]
        for index, row in rows.iterrows():
            results.loc[index, "rel_time"] = row["total_s"] / base["total_s"]
            if pd.notna(row["cost_usd"]) and pd.notna(base["cost_usd"]):
                results.loc[index, "rel_cost"] = row["cost_usd"] / base["cost_usd"]
    return results


def _published_pricing(study: Study, platform: str) -> Pricing | Unpriced:
    config = next(c for c in study.configs if c.name == platform)
    if config.usd_per_hour is None:
        return Unpriced("no hourly price published")
    return Pricing(config.usd_per_hour, f"published ({study.price_note})", TRAINING_TIME)


def _published_run(workload: str, config: PublishedConfig, backend: str, log: EpochLog) -> Run:
    return Run(
        workload=workload,
        config=Configuration(config.name, backend),
        run_id=PUBLISHED_RUN_ID,
        log=log,
        data_source="real",
        epochs_planned=len(log.epochs),
    )


def _epoch_log_runs(study: Study, root: Path) -> list[Run]:
    return [
        _published_run(workload, config, backend, epoch_log(study, config, workload, backend, root))
        for config in study.configs
        for backend in config.backends
        for workload in study.workloads
    ]


def _epoch_table_runs(study: Study, root: Path) -> list[Run]:
    """The transcribed per-epoch table (several configurations in one CSV) as one run per configuration."""
    (workload,) = study.workloads
    logs = table_epoch_logs(study, root)
    return [_published_run(workload, c, backend, logs[c.name]) for c in study.configs for backend in c.backends]


def _setups(study: Study) -> pd.DataFrame:
    rows = [
        {
            "config": config.label(backend),
            "hardware": config.hardware,
            "software": config.software.get(backend, ""),
            "usd_per_hour": config.usd_per_hour,
        }
        for config in study.configs
        for backend in config.backends
    ]
    return pd.DataFrame(rows, columns=["config", "hardware", "software", "usd_per_hour"])


def _provider_table(study: Study, root: Path) -> pd.DataFrame:
    table = pd.read_csv(root / str(study.table), keep_default_na=False)
    return table.assign(config=[provider_label(r.provider, r.gpu, int(r.gpus_used)) for r in table.itertuples()])


def _provider_results(study: Study, root: Path) -> pd.DataFrame:
    table = _provider_table(study, root)
    (workload,) = study.workloads
    base_rows = table[table["config"] == study.base]
    if len(base_rows) != 1:
        raise StudyDataError(f"study {study.name!r}: base {study.base!r} is not exactly one row of {study.table}")
    base = base_rows.iloc[0]
    rows = []
    for r in table.itertuples():
        hours, cost = float(r.train_time_h), float(r.cost_usd)
        rows.append(
            {
                "workload": workload,
                "config": r.config,
                "platform": r.config,
                "backend": study.raw["backend"],
                "variant": "",
                "data_source": "real",
                "is_base": r.config == study.base,
                "n_runs": 1,
                "run_ids": PUBLISHED_RUN_ID,
                "epochs": study.workloads[workload],
                "total_s": hours * 3600,
                "final_acc": float(r.final_accuracy_pct) / 100,
                "final_acc_metric": "held-out acc",
                "rel_time": hours / float(base.train_time_h),
                "usd_per_hour": cost / hours,
                "billed_s": hours * 3600,
                "cost_usd": cost,
                "cost_rule": "cost of one run as published",
                # The post gives a cost per run, not an hourly price: the hourly figure is worked back from it.
                "price_source": "derived: the published cost of one run / its published training time",
                "rel_cost": cost / float(base.cost_usd),
                "gpu_util_pct": float(r.avg_gpu_util_pct),
                "cut_down": False,
                "notes": r.note,
            }
        )
    return pd.DataFrame(rows, columns=list(RESULT_COLUMNS))


def _provider_setups(study: Study, root: Path) -> pd.DataFrame:
    table = _provider_table(study, root)
    columns = study.raw["hardware_columns"]
    rows = [
        {
            "config": r["config"],
            "hardware": ", ".join(f"{c}: {r[c]}" for c in columns),
            "software": study.raw["software"],
            "usd_per_hour": float(r["cost_usd"]) / float(r["train_time_h"]),
        }
        for _, r in table.iterrows()
    ]
    return pd.DataFrame(rows, columns=["config", "hardware", "software", "usd_per_hour"])


def get_study(name: str) -> Study:
    studies = load_studies()
    if name not in studies:
        raise BadArgumentError(f"--study {name!r} is not a published study; choose from {', '.join(studies)}")
    return studies[name]


# fmt: off
COMPARISON_COLUMNS = (
    "workload", "source", "config", "is_base", "backend", "data_source", "dataset", "cut_down",
    "n_runs", "epochs", "train_samples", "total_s", "total_low", "total_high", "total_coverage",
    "steady_epoch_s",
    "final_acc", "final_acc_metric", "gpu_util_pct", "basis", "rel_time_vs_published_base", "matches",
    "time_vs_match", "usd_per_hour", "cost_usd", "rel_cost_vs_published_base", "cost_rule", "notes",
)
# fmt: on


def compare(published: Published, measured: pd.DataFrame, datasets: Mapping[tuple[str, str], str]) -> pd.DataFrame:
    """Published rows, then measured rows of the study's workloads, both relative to the published base.

    Measured runs with the published number of epochs compare on total time; others on the median steady-epoch
    time (flagged as such). Cut-down runs (a slice of the data) are shown but not compared.
    """
    study = published.study
    rows: list[dict[str, Any]] = []
    for workload, epochs in study.workloads.items():
        pub = published.results[published.results["workload"] == workload]
        base = pub[pub["is_base"]]
        if base.empty:
            continue
        base_row = base.iloc[0]
        mine = measured[measured["workload"] == workload]
        if mine.empty:
            continue
        rows.extend(_published_row(r) for _, r in pub.iterrows())
        for _, r in mine.iterrows():
            rows.append(_measured_row(study, r, base_row, pub, epochs, datasets.get((workload, r["config"]), "")))
    return pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS))


def _published_row(r: pd.Series) -> dict[str, Any]:
    return {
        **{k: r.get(k) for k in COMPARISON_COLUMNS if k in r.index},
        "source": "published",
        "basis": "total",
        "rel_time_vs_published_base": r["rel_time"],
        "rel_cost_vs_published_base": r["rel_cost"],
        "dataset": "",
    }


def _measured_row(
    study: Study, r: pd.Series, base: pd.Series, pub: pd.DataFrame, epochs: int, dataset: str
) -> dict[str, Any]:
    row = {k: r.get(k) for k in COMPARISON_COLUMNS if k in r.index}
    row |= {"source": "measured", "dataset": dataset, "is_base": False}
    notes = [str(r["notes"])] if r["notes"] else []
    match = study.matching_label(r["platform"], r["backend"])
    match_row = pub[pub["config"] == match].iloc[0] if match in set(pub["config"]) else None
    if r["cut_down"]:
        basis, column = "", ""
        notes.append("cut-down run (a slice of the data): not compared with the published full-data figures")
    elif r["epochs"] == epochs:
        basis, column = "total", "total_s"
    elif pd.notna(r["steady_epoch_s"]) and pd.notna(base["steady_epoch_s"]):
        basis, column = "steady epoch", "steady_epoch_s"
        notes.append(f"{int(r['epochs'])} epochs vs {epochs} published: compared per steady epoch")
    else:
        basis, column = "", ""
        notes.append(f"{int(r['epochs'])} epochs vs {epochs} published and no per-epoch figures: not compared")
    row["basis"] = basis
    if column:
        row["rel_time_vs_published_base"] = r[column] / base[column]
        if match_row is not None and pd.notna(match_row[column]):
            row["matches"] = match
            row["time_vs_match"] = r[column] / match_row[column]
    if basis == "total" and pd.notna(r["cost_usd"]) and pd.notna(base["cost_usd"]):
        row["rel_cost_vs_published_base"] = r["cost_usd"] / base["cost_usd"]
    row["notes"] = "; ".join(notes)
    return row


def measured_setups(runs: Sequence[Run]) -> pd.DataFrame:
    """Hardware and software of the measured configurations, from their metadata (first run of each)."""
    seen: dict[str, Run] = {}
    for run in runs:
        seen.setdefault(run.config.label, run)
    rows = [{"config": label, **describe_setup(run)} for label, run in sorted(seen.items())]
    return pd.DataFrame(rows, columns=["config", "hardware", "software", "usd_per_hour"])


def describe_setup(run: Run) -> dict[str, str]:
    meta = run.metadata
    hardware, software = meta.hardware, meta.software
    gpus = ", ".join(str(g.get("name")) for g in hardware.get("gpus") or [] if isinstance(g, dict))
    cores = hardware.get("cpu_cores_logical")
    cpu = f"{hardware.get('cpu_model') or 'unknown CPU'}" + (f" ({cores} logical cores)" if cores else "")
    parts = [
        f"{software.get('framework') or run.config.backend} {software.get('framework_version') or '(unrecorded)'}",
        f"Keras {software.get('keras') or 'not recorded'}",
        f"Python {software.get('python') or 'not recorded'}",
    ]
    if software.get("cuda"):
        parts.append(f"CUDA {software['cuda']}, cuDNN {software.get('cudnn') or 'not recorded'}")
    if meta.container and meta.container.image:
        parts.append(f"image {meta.container.image}")
    return {"hardware": f"{gpus} + {cpu}" if gpus else cpu, "software": ", ".join(parts)}
