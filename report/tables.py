"""Per workload and configuration: times over repeats, accuracy, cost, and figures relative to a base.

One row per (workload, configuration). Repeats are the complete runs of that pair that did the same experiment
(same epochs and training samples); the row's time is the median of their totals, and relative figures are
ratios of those medians. Experiments of different sizes are compared per training sample (steady-epoch seconds per
sample, the inverse of throughput), never epoch time against epoch time. Where the repeats ran on several machines
(`hardware.host_id`), intervals and verdicts resample machines, then runs (`benchmarks.stats`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from benchmarks.metadata import StabilityLabel
from benchmarks.stats import Comparison, Estimate, compare, median_estimate, ratio_of_medians
from records.loading import Configuration, Run
from report.costs import Pricing, Unpriced

PricingLookup = Callable[[str], Pricing | Unpriced]

# fmt: off
RESULT_COLUMNS = (
    "workload", "config", "platform", "backend", "variant", "data_source", "is_base", "cut_down",
    "n_runs", "run_ids", "defaults", "epochs", "train_samples",
    "total_s", "total_low", "total_high", "total_coverage", "total_method",
    "steady_epoch_s", "steady_low", "steady_high", "steady_coverage", "steady_method",
    "first_epoch_s", "final_acc", "final_acc_metric", "gpu_util_pct",
    "rel_time", "rel_time_low", "rel_time_high", "rel_steady", "rel_steady_low", "rel_steady_high", "steady_basis",
    "samples_per_s", "machines",
    "verdict", "verdict_basis", "stability", "host_bound", "host_share", "gpu_wh", "gpu_wh_per_epoch", "host_wh",
    "energy_method",
    "usd_per_hour", "billed_s", "cost_usd", "cost_per_epoch_usd", "cost_rule", "price_source", "rel_cost",
    "rel_cost_low", "rel_cost_high", "reference", "notes",
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
    "rel_steady",
    "_wh",
    "_share",
    "_per_epoch",
)


TEXT_COLUMNS = ("verdict", "verdict_basis", "steady_basis", "notes")
PER_EPOCH, PER_SAMPLE = "steady epoch", "time per sample (steady epochs)"
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

    def machines(self) -> list[str]:
        """The machine of each repeat, in `totals()` order."""
        return [r.machine for r in self.runs]

    def steady(self) -> tuple[list[float], list[str]]:
        """Each repeat's median steady epoch, and its machine: what compares when the experiments differ in
        epochs."""
        kept = [r for r in self.runs if r.steady_median_s is not None]
        return [float(r.steady_median_s or 0) for r in kept], [r.machine for r in kept]

    def per_sample(self) -> tuple[list[float], list[str]]:
        """Each repeat's median steady epoch per training sample, and its machine: what compares when the
        experiments differ in samples. Empty where the sample count was not recorded."""
        values, machines = self.steady()
        if not self.train_samples:
            return [], []
        return [v / self.train_samples for v in values], machines


def _train_samples(run: Run) -> int | None:
    return run.metadata.data.train_samples


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


@dataclass(frozen=True)
class Base:
    """What relative figures divide by: one platform and backend (and variant, when `--base` names one). Its
    configuration for each workload is chosen by `choose`, because variants (compile settings) differ between
    workloads."""

    platform: str
    backend: str
    variant: str | None = None  # None: chosen per workload
    reference: bool = False

    @property
    def label(self) -> str:
        config = Configuration(self.platform, self.backend, self.variant or "", reference=self.reference)
        return config.label

    def admits(self, config: Configuration) -> bool:
        same = (config.platform, config.backend, config.reference) == (self.platform, self.backend, self.reference)
        return same and (self.variant is None or config.variant == self.variant)

    def choose(self, groups: Sequence[Group], synthetic: bool) -> Group | None:
        """The base's group among one workload's groups: complete runs not superseded by a later default
        (`relabelled_from`), then the full experiment (not cut down, most epochs), then most repeats, then the
        latest start, then the label: deterministic, and a 3-epoch sweep never beats the published epochs."""
        candidates = [g for g in groups if self.admits(g.config) and g.config.synthetic == synthetic]
        # min() keeps the first of equals: order them by latest start, then label, before ranking.
        ordered = sorted(sorted(candidates, key=lambda g: g.config.label), key=_latest_start, reverse=True)
        return min(ordered, key=_base_rank, default=None)


def _latest_start(group: Group) -> str:
    return max(r.metadata.started_at or "" for r in group.runs)


def _base_rank(group: Group) -> tuple[bool, bool, bool, int, int]:
    superseded = any(r.metadata.relabelled_from for r in group.runs)
    cut_down = any(r.metadata.cut_down for r in group.runs)
    altered = any(_host_altered(r) for r in group.runs)
    return (superseded, altered, cut_down, -group.epochs, -len(group.runs))  # negated: more epochs and repeats first


def _host_altered(run: Run) -> bool:
    """A diagnostic variant (`--host-gc frozen|off`, or held to fewer cores than the machine has): never the base."""
    settings, hardware = run.metadata.settings, run.metadata.hardware
    usable, logical = hardware.get("cpu_cores_usable"), hardware.get("cpu_cores_logical")
    return settings.host_gc not in (None, "on") or bool(usable and logical and usable < logical)


def resolve_base(spec: str | None, groups: Sequence[Group]) -> Base:
    """The base named by `--base` (a configuration label or name, the label without its variant, or a platform
    with one backend); by default
    the user's (not reference) real-data TensorFlow runs, as the published studies divided by TensorFlow, else
    the platform and backend that ran the most workloads (then on the most machines)."""
    if not groups:
        raise ReportError("no complete runs to report")
    if spec is None:
        return _default_base(groups)
    configs = sorted({g.config for g in groups}, key=lambda c: (c.synthetic, c.label))
    # A name matches its real-data runs first, else its synthetic ones (an offline machine has only those): the
    # base's runs are then chosen per workload, real or synthetic alike.
    for matches in (
        [c for c in configs if c.label == spec],
        [c for c in configs if c.name == spec],
    ):
        if matches:
            c = matches[0]
            return Base(c.platform, c.backend, c.variant if c.variant else None, c.reference)
    plain = _plain_name(spec, configs)
    if plain is not None:
        return plain
    platforms = sorted({(c.platform, c.backend, c.reference) for c in configs if c.platform == spec})
    if len(platforms) > 1:
        names = ", ".join(Base(p, b, reference=r).label for p, b, r in platforms)
        raise BadArgumentError(f"--base {spec!r} is ambiguous: it matches {names}")
    if platforms:
        platform, backend, reference = platforms[0]
        return Base(platform, backend, reference=reference)
    raise BadArgumentError(
        f"--base {spec!r} matches no configuration; configurations: {', '.join(c.label for c in configs)}"
    )


def _plain_name(spec: str, configs: Sequence[Configuration]) -> Base | None:
    """A label without its bracketed variant (`local-tensorflow`, `local-tensorflow (synthetic)`): the platform
    and backend, whichever images, precisions or settings its runs differ in (`make bench` runs without an image,
    `make bench-local` in one); `choose` then takes the base's configuration of each workload. A plain name means
    the user's runs where there are some, else the reference runs; `(reference)` asks for those."""
    name, reference = _without_suffix(spec, " (reference)")
    name = _without_suffix(name, " (synthetic)")[0]
    found = sorted(
        {(c.platform, c.backend, c.reference) for c in configs if f"{c.platform}-{c.backend}" == name},
        key=lambda key: key[2],  # the user's runs first
    )
    found = [key for key in found if key[2] or not reference]
    if not found:
        return None
    platform, backend, is_reference = found[0]
    return Base(platform, backend, reference=is_reference)


def _without_suffix(text: str, suffix: str) -> tuple[str, bool]:
    return (text.removesuffix(suffix), True) if text.endswith(suffix) else (text, False)


def _default_base(groups: Sequence[Group]) -> Base:
    workloads: dict[tuple[str, str, bool], set[str]] = defaultdict(set)
    machines: dict[tuple[str, str, bool], set[str]] = defaultdict(set)
    for g in groups:
        workloads[(g.config.platform, g.config.backend, g.config.reference)].add(g.workload)
        machines[(g.config.platform, g.config.backend, g.config.reference)].update(g.machines())
    real_tf = {(g.config.platform, g.config.backend, g.config.reference) for g in groups if not g.config.synthetic}
    real_tf = {key for key in real_tf if key[1] == "tensorflow"}
    ranked = sorted(
        workloads,
        # Ties in workloads go to the one measured on the most machines: the best established, which a newly
        # measured machine does not displace.
        key=lambda key: (key[2], key not in real_tf, -len(workloads[key]), -len(machines[key]), key[1], key[0]),
    )
    platform, backend, reference = ranked[0]
    return Base(platform, backend, reference=reference)


def summarize(groups: Sequence[Group], base: Base, pricing: PricingLookup) -> pd.DataFrame:
    """The results table: one row per workload x configuration, in RESULT_COLUMNS."""
    rows = [_row(group, pricing(group.config.platform)) for group in groups]
    table = pd.DataFrame(rows, columns=list(RESULT_COLUMNS))
    numeric = [c for c in RESULT_COLUMNS if c.endswith(NUMERIC_SUFFIXES)]
    table[numeric] = table[numeric].astype(float)
    table[list(TEXT_COLUMNS)] = table[list(TEXT_COLUMNS)].astype(object)  # filled in by _add_relative
    table = _add_relative(table, groups, base)
    return order_rows(table)


def order_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Workloads alphabetically, the base first within each, then configurations by label."""
    key = table.apply(lambda r: (not r["is_base"], r["config"]), axis=1) if not table.empty else []
    return (table.assign(_key=key).sort_values(["workload", "_key"], kind="stable").drop(columns="_key")).reset_index(
        drop=True
    )


def _row(group: Group, pricing: Pricing | Unpriced) -> dict[str, object]:
    total = median_estimate(group.totals(), group.machines())
    steady_values, steady_machines = group.steady()
    steady = median_estimate(steady_values, steady_machines) if steady_values else None
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
        "defaults": all(r.default_settings for r in group.runs),
        "epochs": group.epochs,
        "train_samples": group.train_samples,
        "machines": len(set(group.machines())),
        "samples_per_s": group.train_samples / steady.value
        if steady and steady.value and group.train_samples
        else None,
        **_estimate_columns("total", total, value_key="total_s"),
        **_estimate_columns("steady", steady, value_key="steady_epoch_s"),
        "first_epoch_s": float(np.median(firsts)) if firsts else None,
        "final_acc": float(np.median(accuracy)) if accuracy else None,
        "final_acc_metric": "/".join(sorted(metrics)),
        "gpu_util_pct": float(np.median(utilization)) if utilization else None,
        "cut_down": any(r.metadata.cut_down for r in group.runs),
        "reference": group.config.reference,
        **_measured_columns(group.runs),
    }
    if isinstance(pricing, Pricing):
        if pricing.billed_seconds(total.value) > total.value + pricing.increment_s:
            notes.append(f"{MINIMUM_NOTE} ({pricing.billed_seconds(total.value):.0f} s)")
        row |= {
            "usd_per_hour": pricing.usd_per_hour,
            "billed_s": pricing.billed_seconds(total.value),
            "cost_usd": pricing.cost_usd(total.value),
            # An epoch of a suite's machine is billed as training time: the minimum belongs to the session.
            "cost_per_epoch_usd": None if steady is None else steady.value * pricing.usd_per_hour / 3600,
            "cost_rule": f"{pricing.rule}, applied to each workload's training time",
            "price_source": pricing.source,
        }
    else:
        notes.append(pricing.reason)
    row["notes"] = "; ".join(notes)
    return row


def _estimate_columns(prefix: str, estimate: Estimate | None, value_key: str) -> dict[str, float | str | None]:
    if estimate is None:
        return {value_key: None, f"{prefix}_low": None, f"{prefix}_high": None, f"{prefix}_coverage": None}
    return {
        value_key: estimate.value,
        f"{prefix}_low": estimate.low,
        f"{prefix}_high": estimate.high,
        f"{prefix}_coverage": estimate.coverage,
        f"{prefix}_method": estimate.method or None,
    }


def _measured_columns(runs: Sequence[Run]) -> dict[str, object]:
    """Stability, host-bound share and energy over the repeats; None where the logs predate them."""
    labels = [r.measured.stability for r in runs if r.measured.stability]
    unstable = sum(label != StabilityLabel.STABLE for label in labels)
    if not labels:
        stability = None
    elif unstable:
        stability = f"{labels[0] if unstable == len(labels) else 'unstable'} ({unstable} of {len(runs)} repeats)"
    else:
        stability = StabilityLabel.STABLE.value
    flags = [r.measured.host_bound for r in runs if r.measured.host_bound is not None]
    return {
        "stability": stability,
        "host_bound": any(flags) if flags else None,
        "host_share": _median([r.measured.host_share for r in runs]),
        "gpu_wh": _median([r.measured.gpu_wh for r in runs]),
        "gpu_wh_per_epoch": _median([r.measured.gpu_wh_per_steady_epoch for r in runs]),
        "host_wh": _median([r.measured.host_wh for r in runs]),
        "energy_method": "/".join(sorted({r.measured.energy_method for r in runs if r.measured.energy_method})),
    }


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return float(np.median(present)) if present else None


def _add_relative(table: pd.DataFrame, groups: Sequence[Group], base: Base) -> pd.DataFrame:
    """Ratios against the base's configuration of each workload, on the same data source (synthetic rows against
    the base's synthetic runs): total times where the experiments match, steady-epoch times always; the verdict
    is `benchmarks.stats.compare`'s on whichever of the two is compared."""
    table = table.copy()
    by_workload: dict[str, list[Group]] = defaultdict(list)
    for group in groups:
        by_workload[group.workload].append(group)
    chosen = {
        (workload, synthetic): base.choose(members, synthetic)
        for workload, members in by_workload.items()
        for synthetic in (False, True)
    }
    index_of = {(r["workload"], r["config"]): i for i, r in table.iterrows()}
    table["is_base"] = False
    for group in groups:
        index = index_of[(group.workload, group.config.label)]
        base_group = chosen[(group.workload, group.config.synthetic)]
        if base_group is None:
            reason = f"no base run: {base.label} has no complete run of this workload"
            reason += " on synthetic data" if group.config.synthetic else ""
            table.at[index, "notes"] = _join(table.at[index, "notes"], reason)
            continue
        if base_group is group:
            table.at[index, "is_base"] = True
            table.at[index, "rel_time"] = 1.0
            table.at[index, "rel_steady"] = 1.0
            table.at[index, "steady_basis"] = PER_EPOCH
            if pd.notna(table.at[index, "cost_usd"]) and table.at[index, "cost_usd"] > 0:
                table.at[index, "rel_cost"] = 1.0
            continue
        _relative_row(table, index, group, base_group, index_of[(group.workload, base_group.config.label)])
    return table


def _relative_row(table: pd.DataFrame, index: int, group: Group, base_group: Group, base_index: int) -> None:
    notes = []
    verdict: Comparison | None = None
    basis = ""
    steady, base_steady, steady_basis = _steady_pair(group, base_group)
    steady_ratio = None
    if steady[0] and base_steady[0]:
        steady_ratio = ratio_of_medians(steady[0], base_steady[0], steady[1], base_steady[1])
        table.loc[index, ["rel_steady", "rel_steady_low", "rel_steady_high"]] = [
            steady_ratio.value,
            steady_ratio.low,
            steady_ratio.high,
        ]
        table.at[index, "steady_basis"] = steady_basis
    if (group.epochs, group.train_samples) == (base_group.epochs, base_group.train_samples):
        ratio = ratio_of_medians(group.totals(), base_group.totals(), group.machines(), base_group.machines())
        table.loc[index, ["rel_time", "rel_time_low", "rel_time_high"]] = [ratio.value, ratio.low, ratio.high]
        verdict = compare(
            group.totals(),
            base_group.totals(),
            candidate_machines=group.machines(),
            base_machines=base_group.machines(),
        )
        basis = "total"
        _relative_cost(table, index, base_index, ratio)
    else:
        compared = f"; {steady_basis} compared" if steady[0] and base_steady[0] else "; no steady epochs to compare"
        notes.append(
            f"total time not compared: {group.epochs} epochs / {_samples(group)} samples vs the base's "
            f"{base_group.epochs} / {_samples(base_group)}{compared}"
        )
        if steady_ratio is not None:
            verdict = compare(steady[0], base_steady[0], candidate_machines=steady[1], base_machines=base_steady[1])
            basis = steady_basis
            _relative_steady_cost(table, index, base_index, steady_ratio)
    if verdict is not None:
        table.at[index, "verdict"] = verdict.text("it", "the base")
        table.at[index, "verdict_basis"] = basis
    table.at[index, "notes"] = _join(table.at[index, "notes"], *notes)


Sample = tuple[list[float], list[str]]  # values and the machine of each


def _steady_pair(group: Group, base: Group) -> tuple[Sample, Sample, str]:
    """What compares between two experiments' steady epochs: the epoch itself where both trained on the same
    samples, else the time per sample (an epoch of 500 samples against one of 20,000 means nothing)."""
    if group.train_samples == base.train_samples:
        return group.steady(), base.steady(), PER_EPOCH
    return group.per_sample(), base.per_sample(), PER_SAMPLE


def _samples(group: Group) -> str:
    return f"{group.train_samples:,}" if group.train_samples else "unrecorded"


def _relative_cost(table: pd.DataFrame, index: int, base_index: int, time_ratio: Estimate) -> None:
    """Cost over the base's cost. Where both are billed exactly their training time, cost is time x price, so the
    time ratio's interval times the price ratio is the cost ratio's; a billing minimum breaks that (no interval)."""
    cost, base_cost = table.at[index, "cost_usd"], table.at[base_index, "cost_usd"]
    if pd.isna(cost) or pd.isna(base_cost) or base_cost <= 0:
        return
    table.at[index, "rel_cost"] = cost / base_cost
    exact = all(table.at[i, "billed_s"] == table.at[i, "total_s"] for i in (index, base_index))
    if exact and time_ratio.low is not None and time_ratio.high is not None:
        prices = table.at[index, "usd_per_hour"] / table.at[base_index, "usd_per_hour"]
        table.loc[index, ["rel_cost_low", "rel_cost_high"]] = [time_ratio.low * prices, time_ratio.high * prices]


def _relative_steady_cost(table: pd.DataFrame, index: int, base_index: int, steady_ratio: Estimate) -> None:
    """Where whole runs do not compare, the cost of a steady epoch (or of a training sample) over the base's: the
    steady ratio x the price ratio, as a steady epoch is billed as training time."""
    price, base_price = table.at[index, "usd_per_hour"], table.at[base_index, "usd_per_hour"]
    if pd.isna(price) or pd.isna(base_price) or base_price <= 0:
        return
    prices = price / base_price
    low, high = steady_ratio.low, steady_ratio.high
    table.loc[index, ["rel_cost", "rel_cost_low", "rel_cost_high"]] = [
        steady_ratio.value * prices,
        None if low is None else low * prices,
        None if high is None else high * prices,
    ]


def _join(*parts: object) -> str:
    return "; ".join(str(p) for p in parts if isinstance(p, str) and p)


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
                "machine": r.machine,
                "repeat_group": r.measured.repeat_group,
                "stability": r.measured.stability,
                "steady_cv": r.measured.steady_cv,
                "host_share": r.measured.host_share,
                "gpu_wh": r.measured.gpu_wh,
                "counted": id(r) in counted,
                "why_not_counted": left_out.get(id(r), "" if r.complete else f"status {r.status}"),
                "path": str(r.log.path),
            }
        )
    return pd.DataFrame(rows)
