"""Data-parallel scaling: every multi-device configuration against the one-device runs of the same workload,
backend, platform and data, next to the 2018 provider study's multi_gpu_model rows.

A run's device count and batch policy come from its metadata's "distribution" (runs from before `--gpus` existed
trained on one device). The speed-up is of throughput (training samples per second of a steady epoch), so a run
that dropped a sample or two to split its batches evenly is compared fairly; its interval and verdict are those of
`benchmarks.stats.compare` on seconds per sample. With one device both batch policies train the same batch and
learning rate, so every one-device run is a repeat of the base.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from benchmarks.stats import Comparison, Estimate, compare, median_estimate
from estimator.published import PUBLISHED_DIR, Study
from records.catalog import Profile
from records.loading import Run
from report import format as fmt
from report.charts import Bar, relative_chart

PUBLISHED_STUDY = "gpu-providers-2018"
ONE_DEVICE = "one device"  # the base's batch policy: with one device the policies coincide
SAME_GLOBAL = "same-global"  # the runner's default policy


@dataclass(frozen=True)
class Group:
    """The repeats of one configuration."""

    workload: str
    backend: str
    platform: str
    synthetic: bool
    devices: int
    batch_policy: str  # ONE_DEVICE for the base

    @property
    def base(self) -> Group:
        return Group(self.workload, self.backend, self.platform, self.synthetic, 1, ONE_DEVICE)


def devices(run: Run) -> int:
    return int(_distribution(run).get("devices") or 1)


def _distribution(run: Run) -> dict[str, Any]:
    return run.metadata.distribution or {}


def is_multi_device(runs: Sequence[Run]) -> bool:
    return any(devices(r) > 1 for r in runs)


def _group(run: Run) -> Group:
    n = devices(run)
    policy = str(_distribution(run).get("batch_policy")) if n > 1 else ONE_DEVICE
    return Group(run.workload, run.config.backend, run.config.platform, run.config.synthetic, n, policy)


def _seconds_per_sample(run: Run) -> float | None:
    samples = run.metadata.data.train_samples
    steady = run.steady_median_s
    return steady / samples if steady and samples else None


def _final(runs: Sequence[Run]) -> str:
    """Median final accuracy over the repeats (validation where there is one), else the final loss."""
    accuracies = [a for a, _ in (r.final_accuracy for r in runs) if a is not None]
    if accuracies:
        return fmt.accuracy(statistics.median(accuracies), runs[0].final_accuracy[1])
    losses = [r.log.final.loss for r in runs if r.log.final is not None and r.log.final.loss is not None]
    return f"{statistics.median(losses):.4f} (loss)" if losses else fmt.NA


def _groups(runs: Sequence[Run]) -> dict[Group, list[Run]]:
    """The complete runs of one machine with a steady epoch, by configuration (runs across nodes: `node_table`)."""
    groups: dict[Group, list[Run]] = defaultdict(list)
    for run in runs:
        if run.complete and run.cluster is None and _seconds_per_sample(run) is not None:
            groups[_group(run)].append(run)
    return groups


def _per_sample(runs: Sequence[Run]) -> list[float]:
    return [s for s in map(_seconds_per_sample, runs) if s is not None]


def _machines(runs: Sequence[Run]) -> list[str]:
    """The machine of each value of `_per_sample(runs)`, in its order."""
    return [r.machine for r in runs if _seconds_per_sample(r) is not None]


def _compare(runs: Sequence[Run], base: Sequence[Run]) -> Comparison:
    """Seconds per sample on N devices against one: the ratio's value below 1 means the devices helped. Runs from
    several machines are resampled by machine, then by run."""
    return compare(
        _per_sample(runs), _per_sample(base), candidate_machines=_machines(runs), base_machines=_machines(base)
    )


def _ordered(groups: dict[Group, list[Run]]) -> list[Group]:
    """Multi-device configurations, each after its one-device base where there is one."""
    keyed = sorted(groups, key=lambda g: (g.workload, g.backend, g.platform, g.synthetic, g.devices, g.batch_policy))
    return [g for g in keyed if g.devices > 1 or any(o.base == g and o.devices > 1 for o in keyed)]


def scaling_table(runs: Sequence[Run]) -> pd.DataFrame:
    """One row per configuration with a steady epoch: the one-device base first, then its multi-device runs."""
    groups = _groups(runs)
    return pd.DataFrame([_row(g, groups[g], groups.get(g.base, [])) for g in _ordered(groups)], columns=COLUMNS)


def _against_base(groups: dict[Group, list[Run]]) -> Iterator[tuple[Group, Comparison]]:
    """Each multi-device configuration that has a one-device base, compared with it."""
    for g in _ordered(groups):
        if g.devices > 1 and g.base in groups:
            yield g, _compare(groups[g], groups[g.base])


def measured_bars(runs: Sequence[Run]) -> list[Bar]:
    """Time per training sample on N devices relative to one device, with the bootstrap interval of that ratio."""
    bars = []
    for g, comparison in _against_base(_groups(runs)):
        ratio = comparison.ratio
        label = f"{g.workload} [{g.backend}] on {g.platform}: {g.devices} devices, {g.batch_policy}"
        bars.append(Bar(label, ratio.value, g.backend, ratio.low, ratio.high, synthetic=g.synthetic, group=g.platform))
    return bars


COLUMNS = [
    "workload",
    "backend",
    "platform",
    "devices",
    "batch policy",
    "global batch",
    "steady epoch s",
    "interval",
    "samples/s",
    "speed-up vs 1 device",
    "speed-up interval",
    "verdict",
    "efficiency",
    "final",
    "final, 1 device",
]


def _row(group: Group, runs: list[Run], base: list[Run]) -> dict[str, Any]:
    timed = [r for r in runs if r.steady_median_s]
    steady = median_estimate([float(r.steady_median_s or 0) for r in timed], [r.machine for r in timed])
    per_sample = _per_sample(runs)
    batch = _distribution(runs[0]).get("global_batch_size") or _hyperparameters(runs[0]).get("batch_size")
    row = {
        "workload": group.workload,
        "backend": group.backend,
        "platform": group.platform + (" (synthetic)" if group.synthetic else ""),
        "devices": group.devices,
        "batch policy": group.batch_policy,
        "global batch": batch if batch is not None else fmt.NA,
        "steady epoch s": f"{steady.value:.3f}",
        "interval": steady.interval_text("{:.3f}"),
        "samples/s": f"{1 / statistics.median(per_sample):,.0f}",
        "final": _final(runs),
        "final, 1 device": _final(base) if base else fmt.NA,
    }
    no_comparison = {"speed-up interval": "", "verdict": ""}
    if group.devices == 1:
        return {**row, **no_comparison, "speed-up vs 1 device": "1.00x (base)", "efficiency": ""}
    if not base:
        return {**row, **no_comparison, "speed-up vs 1 device": "no 1-device run", "efficiency": fmt.NA}
    comparison = _compare(runs, base)
    speedup = 1 / comparison.ratio.value
    return {
        **row,
        "speed-up vs 1 device": fmt.ratio(speedup),
        "speed-up interval": _speedup_interval(comparison.ratio),
        "verdict": comparison.text(candidate=f"the {group.devices}-device run", base="the 1-device run"),
        "efficiency": f"{speedup / group.devices:.0%}",
    }


def _hyperparameters(run: Run) -> dict[str, Any]:
    return run.metadata.hyperparameters


def _speedup_bounds(ratio: Estimate) -> tuple[float | None, float | None]:
    """The interval of the time ratio as one of speed-up (inverted), where there is one."""
    if ratio.low is None or ratio.high is None or not ratio.has_interval:
        return None, None
    return 1 / ratio.high, 1 / ratio.low


def _speedup_interval(ratio: Estimate) -> str:
    """The interval of the time ratio, inverted: a speed-up is 1 / (seconds per sample, N / 1)."""
    low, high = _speedup_bounds(ratio)
    if low is None or high is None:
        return f"n={ratio.n}, no interval"
    machines = f" on {ratio.machines} machines" if ratio.machines > 1 else ""
    return f"{low:.2f}–{high:.2f} (95% {ratio.method or 'bootstrap'}, n={ratio.n}{machines})"


@dataclass
class ScalingSection:
    measured: pd.DataFrame
    published: pd.DataFrame
    study: Study
    bars: list[Bar]  # measured, then published: time relative to one device
    prices: pd.DataFrame  # the catalog's multi-GPU shapes against one GPU of the same kind: is the extra GPU worth it
    chart: tuple[str, str] | None = None  # (title, PNG path relative to the report folder), once drawn


def section(runs: Sequence[Run], study: Study, profiles: Mapping[str, Profile] | None = None) -> ScalingSection | None:
    """The scaling tables, where at least one run trained on several devices."""
    if not is_multi_device(runs):
        return None
    pairs = published_pairs(study)
    bars = measured_bars(runs) + [pair.bar() for pair in pairs]
    prices = price_table(profiles or {}, measured_speedups(runs))
    return ScalingSection(scaling_table(runs), published_scaling(pairs, study), study, bars, prices)


@dataclass(frozen=True)
class Speedup:
    value: float
    where: str  # workload, backend, policy and platform it was measured on
    low: float | None = None  # the bootstrap interval of the speed-up, where there are repeats enough
    high: float | None = None


def measured_speedups(runs: Sequence[Run]) -> dict[int, list[Speedup]]:
    """Every configuration's median speed-up against one device, by device count."""
    groups = _groups(runs)
    measured: dict[int, list[Speedup]] = defaultdict(list)
    for g, comparison in _against_base(groups):
        where = f"{g.workload} [{g.backend}], {g.batch_policy}, {g.platform}, n={len(groups[g])}"
        measured[g.devices].append(Speedup(1 / comparison.ratio.value, where, *_speedup_bounds(comparison.ratio)))
    return dict(measured)


def price_pairs(profiles: Mapping[str, Profile]) -> list[tuple[Profile, Profile]]:
    """Each multi-GPU profile with the cheapest one-GPU profile of the same provider and accelerator."""
    pairs = []
    for multi in sorted(profiles.values(), key=lambda p: p.name):
        if multi.accelerator_count < 2 or multi.on_demand is None or multi.retired:
            continue
        singles = [
            p
            for p in profiles.values()
            if p.provider == multi.provider
            and p.accelerator == multi.accelerator
            and p.accelerator_count == 1
            and p.on_demand is not None
            and not p.retired
        ]
        if singles:
            pairs.append((multi, min(singles, key=lambda p: p.on_demand.usd_per_hour)))  # type: ignore[union-attr]
    return pairs


def price_table(profiles: Mapping[str, Profile], measured: Mapping[int, Sequence[Speedup]]) -> pd.DataFrame:
    """A machine with N GPUs pays for itself per sample only if it trains more than (its price / one GPU's) times
    faster; the speed-ups measured at N devices, with their intervals, say whether any workload got there."""
    rows = []
    for multi, single in price_pairs(profiles):
        assert multi.on_demand is not None and single.on_demand is not None
        ratio = multi.on_demand.usd_per_hour / single.on_demand.usd_per_hour
        speedups = measured.get(multi.accelerator_count, [])
        best = max(speedups, key=lambda s: s.value, default=None)
        rows.append(
            {
                "profile": multi.name,
                "GPUs": multi.accelerator_count,
                "price": f"${multi.on_demand.usd_per_hour:.2f}/h ({multi.on_demand.date})",
                "one GPU": single.name,
                "its price": f"${single.on_demand.usd_per_hour:.2f}/h ({single.on_demand.date})",
                "break-even speed-up": fmt.ratio(ratio),
                "best measured speed-up": f"{fmt.ratio(best.value)} ({best.where})" if best else "not measured",
                "worth it": _worth(ratio, speedups),
            }
        )
    return pd.DataFrame(rows)


def _worth(price_ratio: float, speedups: Sequence[Speedup]) -> str:
    """Yes where some workload's whole interval lies above the break-even, no where every interval lies below it."""
    if not speedups:
        return "unknown: no run on this many devices"
    judged = [s for s in speedups if s.low is not None and s.high is not None]
    if not judged:
        return "unknown: too few repeats for an interval"
    left_out = f" ({len(speedups) - len(judged)} without an interval left out)" if len(judged) < len(speedups) else ""
    paying = [s for s in judged if s.low is not None and s.low > price_ratio]
    if paying:
        best = max(paying, key=lambda s: s.value)
        return f"yes for {best.where}: {1 - price_ratio / best.value:.0%} less per sample{left_out}"
    best = max(judged, key=lambda s: s.value)
    if all(s.high is not None and s.high < price_ratio for s in judged):
        return (
            f"no: every interval lies below the break-even; the best workload costs "
            f"{price_ratio / best.value - 1:.0%} more per sample (it buys time, not money){left_out}"
        )
    spanning = sum(1 for s in judged if s.high is not None and s.high >= price_ratio)
    return f"not beyond noise: {spanning} workload interval(s) span the break-even{left_out}"


def draw_chart(scaling: ScalingSection, out: Path, charts_dir: str) -> None:
    """Ours and the study's bars on one axis: time on all devices relative to one device of the same machine."""
    footnotes = [
        "1.0x = the same machine, backend and workload on one device; below 1.0 the extra devices helped",
        "ours: seconds per training sample of a steady epoch (median over repeats); no interval below 3 repeats",
        f"pale: {scaling.study.title} ({scaling.study.date}), Table 1: total training hours with multi_gpu_model",
    ]
    title = "Training time on several devices relative to one device of the same machine (lower is better)"
    png, _ = relative_chart(
        scaling.bars, title, "time relative to one device", footnotes, out / charts_dir / "scaling_devices"
    )
    scaling.chart = (title, png.relative_to(out).as_posix())


@dataclass(frozen=True)
class PublishedPair:
    """One of the study's machines, trained on all its GPUs and on one of them."""

    machine: str
    devices: int
    hours_one: float
    hours_all: float
    accuracy_one_pct: float
    accuracy_all_pct: float

    def bar(self) -> Bar:
        return Bar(
            f"2018: {self.machine}", self.hours_all / self.hours_one, "tensorflow", published=True, group="2018 study"
        )


def published_pairs(study: Study, root: Path = PUBLISHED_DIR) -> list[PublishedPair]:
    table = pd.read_csv(root / str(study.table), keep_default_na=False)
    pairs = []
    for (provider, gpu, count), same in table.groupby(["provider", "gpu", "gpu_count"], sort=True):
        one, every = same[same["gpus_used"] == 1], same[same["gpus_used"] == count]
        if count < 2 or one.empty or every.empty:
            continue
        pairs.append(
            PublishedPair(
                machine=f"{provider} {count}x {gpu}",
                devices=int(count),
                hours_one=float(one.iloc[0]["train_time_h"]),
                hours_all=float(every.iloc[0]["train_time_h"]),
                accuracy_one_pct=float(one.iloc[0]["final_accuracy_pct"]),
                accuracy_all_pct=float(every.iloc[0]["final_accuracy_pct"]),
            )
        )
    return pairs


def published_scaling(pairs: Sequence[PublishedPair], study: Study) -> pd.DataFrame:
    """The study's machines on all their GPUs and on one of them: speed-up = hours on one / hours on all."""
    return pd.DataFrame(
        [
            {
                "study": f"{study.title} ({study.date})",
                "machine": p.machine,
                "devices": p.devices,
                "hours, all GPUs": f"{p.hours_all:.2f}",
                "hours, 1 GPU": f"{p.hours_one:.2f}",
                "speed-up vs 1 GPU": fmt.ratio(p.hours_one / p.hours_all),
                "efficiency": f"{p.hours_one / p.hours_all / p.devices:.0%}",
                "final accuracy": f"{p.accuracy_all_pct:.2f}%",
                "final accuracy, 1 GPU": f"{p.accuracy_one_pct:.2f}%",
            }
            for p in pairs
        ]
    )


# ---- several nodes: one job of N nodes (`orchestrate run --nodes N`) against one node ----------------------------

NODES_TITLE = "Several nodes: scaling and cost per epoch against one node"
NODES_NOTE = (
    "One job of N nodes trains each run across all of them (one process per GPU, per node on CPUs), after the image "
    "was made present on every node (set-up, not timed) and an all-reduce across the processes checked the network "
    "(its bus bandwidth and the interface it went over are shown). Speed-up is of throughput against the one-node "
    "runs of the same workload, backend, platform and batch policy; efficiency is speed-up / nodes. Cost per epoch is "
    "a node's catalog price x the nodes x the steady epoch; against one node it is nodes / speed-up: above 1.00x the "
    "extra nodes buy time, not money."
)
NODE_COLUMNS = [
    "workload",
    "backend",
    "platform",
    "nodes",
    "processes",
    "batch policy",
    "global batch",
    "steady epoch s",
    "interval",
    "samples/s",
    "speed-up vs 1 node",
    "speed-up interval",
    "verdict",
    "efficiency",
    "cost per epoch",
    "cost per epoch vs 1 node",
    "each process's steady epoch s",
    "all-reduce bus GB/s",
    "interconnect",
    "set-up s",
    "final",
    "final, 1 node",
]


@dataclass(frozen=True)
class NodeGroup:
    """The repeats of one configuration across nodes, or of its one-node base (nodes 1)."""

    workload: str
    backend: str
    platform: str
    synthetic: bool
    per_node: int  # devices (processes) per node
    nodes: int
    batch_policy: str

    @property
    def base(self) -> NodeGroup:
        """One node with as many devices: with one, the batch policies coincide."""
        policy = ONE_DEVICE if self.per_node == 1 else self.batch_policy
        return NodeGroup(self.workload, self.backend, self.platform, self.synthetic, self.per_node, 1, policy)


def _node_group(run: Run) -> NodeGroup:
    cluster = run.cluster
    per_node, nodes = (cluster.per_node, cluster.nodes) if cluster else (devices(run), 1)
    processes = per_node * nodes
    policy = str(_distribution(run).get("batch_policy") or SAME_GLOBAL) if processes > 1 else ONE_DEVICE
    config = run.config
    return NodeGroup(run.workload, config.backend, config.platform, config.synthetic, per_node, nodes, policy)


def node_table(runs: Sequence[Run], profiles: Mapping[str, Profile] | None = None) -> pd.DataFrame:
    """One row per configuration across nodes, each after its one-node base where there is one: the speed-up and
    the cost per epoch against one node (a node's catalog price per hour x the nodes x the epoch's seconds)."""
    groups: dict[NodeGroup, list[Run]] = defaultdict(list)
    for run in runs:
        if run.complete and _seconds_per_sample(run) is not None:
            groups[_node_group(run)].append(run)
    multi = sorted((g for g in groups if g.nodes > 1), key=lambda g: (g.workload, g.backend, g.platform, g.nodes))
    rows: list[dict[str, Any]] = []
    shown: set[NodeGroup] = set()
    for g in multi:
        if g.base in groups and g.base not in shown:
            shown.add(g.base)
            rows.append(_node_row(g.base, groups[g.base], [], profiles or {}))
        rows.append(_node_row(g, groups[g], groups.get(g.base, []), profiles or {}))
    return pd.DataFrame(rows, columns=NODE_COLUMNS)


def node_price(profile: Profile | None) -> float | None:
    """A node's on-demand price per hour: a GPU-hour price (a Slurm profile's `price_unit`) times its GPUs."""
    if profile is None or profile.on_demand is None:
        return None
    per_gpu = profile.extra.get("price_unit") == "gpu-hour"
    return profile.on_demand.usd_per_hour * (profile.accelerator_count if per_gpu else 1)


def _process_spread(runs: Sequence[Run]) -> str:
    """The fastest and the slowest process's steady-epoch median (`distribution.process_epoch_s`, which rank 0
    gathers from every process), median over the repeats: how far one process held the others back."""
    spreads = []
    for run in runs:
        times = _distribution(run).get("process_epoch_s") or []
        steady = [statistics.median(epochs[1:]) for epochs in times if len(epochs) > 1]
        if steady:
            spreads.append((min(steady), max(steady)))
    if not spreads:
        return ""
    return f"{statistics.median(low for low, _ in spreads):.3f}–{statistics.median(high for _, high in spreads):.3f}"


def _node_row(group: NodeGroup, runs: list[Run], base: list[Run], profiles: Mapping[str, Profile]) -> dict[str, Any]:
    timed = [r for r in runs if r.steady_median_s]
    steady = median_estimate([float(r.steady_median_s or 0) for r in timed], [r.machine for r in timed])
    batch = _distribution(runs[0]).get("global_batch_size") or _hyperparameters(runs[0]).get("batch_size")
    price = node_price(profiles.get(group.platform))
    cost = price * group.nodes * steady.value / 3600 if price is not None else None
    clusters = [r.cluster for r in runs if r.cluster is not None]
    bandwidths = [c.bus_gbps for c in clusters if c.bus_gbps is not None]
    setups = [c.setup_s for c in clusters if c.setup_s is not None]
    row: dict[str, Any] = {
        "workload": group.workload,
        "backend": group.backend,
        "platform": group.platform + (" (synthetic)" if group.synthetic else ""),
        "nodes": group.nodes,
        "processes": group.nodes * group.per_node,
        "batch policy": group.batch_policy,
        "global batch": batch if batch is not None else fmt.NA,
        "steady epoch s": f"{steady.value:.3f}",
        "interval": steady.interval_text("{:.3f}"),
        "samples/s": f"{1 / statistics.median(_per_sample(runs)):,.0f}",
        "cost per epoch": f"${cost:.5f}" if cost is not None else fmt.NA,
        "each process's steady epoch s": _process_spread(runs),
        "all-reduce bus GB/s": f"{statistics.median(bandwidths):.3g}" if bandwidths else "",
        "interconnect": clusters[0].interconnect if clusters else "",
        "set-up s": f"{statistics.median(setups):.1f}" if setups else "",
        "final": _final(runs),
        "final, 1 node": _final(base) if base else fmt.NA,
    }
    no_comparison = {"speed-up interval": "", "verdict": "", "efficiency": ""}
    if group.nodes == 1:
        return {**row, **no_comparison, "speed-up vs 1 node": "1.00x (base)", "cost per epoch vs 1 node": ""}
    if not base:
        return {**row, **no_comparison, "speed-up vs 1 node": "no 1-node run", "cost per epoch vs 1 node": fmt.NA}
    comparison = _compare(runs, base)
    speedup = 1 / comparison.ratio.value
    # cost per sample on N nodes over one: N nodes' price for 1/speed-up of the time
    cost_ratio = group.nodes / speedup if price is not None else None
    return {
        **row,
        "speed-up vs 1 node": fmt.ratio(speedup),
        "speed-up interval": _speedup_interval(comparison.ratio),
        "verdict": comparison.text(candidate=f"the {group.nodes}-node run", base="the 1-node run"),
        "efficiency": f"{speedup / group.nodes:.0%}",
        "cost per epoch vs 1 node": fmt.ratio(cost_ratio) if cost_ratio is not None else fmt.NA,
    }
