"""benchmark-gpus-2017-11 on today's GPUs: the study's published K80 and P100 beside the measured H100 and H200.

The H100 and H200 rows are the committed short-suite repeats of each backend's GPU defaults (gpu_session's repeats
phase: logs/reference/NVIDIA-H100, logs/reference/NVIDIA-H200). They train on slices of the published data, so an
epoch is scaled to the published training samples (time per sample times the published samples) before it stands
beside the 2017 epochs; the 2017 rows are TensorFlow 1.4 with the published data. Which GPU is faster, and which is
cheaper at each cloud's price, is decided by benchmarks.stats.compare on the runs' steady-epoch medians (runs from
several machines resampled by machine). A row whose runs were mostly host-bound compares the hosts the GPUs sat in,
not the GPUs: it says so.

    python -m campaign.today logs/reference              # the section, markdown
    python -m campaign.today logs/reference --cache      # what the compile cache saved per round of the defaults
    python -m campaign.today logs/reference --designs    # the verdicts again, the H100 side from round processes
    python -m campaign.today logs/reference --epochs     # the verdicts again from each run's first steady epochs
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tomllib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from benchmarks.metadata import RunMetadata
from benchmarks.stats import FASTER, SLOWER, TOO_FEW, Estimate, compare, median_estimate, within_machine_sd
from campaign.designs import (
    by_default_and_machine,
    cache_rounds,
    complete_runs_in,
    fresh_repeat,
    machine_of,
    preloaded_repeat,
    round_process_repeat,
    staged_repeat,
    timed_repeats,
)
from report.format import markdown_table
from report.studies import get_study, published_results

STUDY = "benchmark-gpus-2017-11"
GPUS = ("H100", "H200")
PLATFORMS = {"H100": "NVIDIA-H100", "H200": "NVIDIA-H200"}
PUBLISHED_GPUS = ("k80", "p100")
PUBLISHED_BACKEND = "tensorflow"
PRICES_FILE = Path(__file__).parent / "data" / "today.toml"
TOO_FEW_WORDS = "too few repeats"  # a verdict that could not be decided
# H100 against H200 is a claim about machines: with one machine on a side, its host's speed cannot be told apart
# from its GPU's, nor the spread between machines measured, however many repeats it ran.
MIN_MACHINES = 2
TOO_FEW_MACHINES_WORDS = "too few machines"
UNDECIDABLE = (TOO_FEW_WORDS, TOO_FEW_MACHINES_WORDS)
STEADY_EPOCHS_TRIED = (1, 2, 3)  # the short suite's runs have 4


@dataclass(frozen=True)
class Price:
    gpu: str
    cloud: str
    shape: str
    usd_per_gpu_hour: float
    date: str
    source: str


def load_prices(path: Path = PRICES_FILE) -> list[Price]:
    return [Price(**entry) for entry in tomllib.loads(path.read_text())["price"]]


@dataclass
class Measured:
    """One GPU's default runs of one workload and backend."""

    steady: list[float] = field(default_factory=list)  # each run's steady-epoch median, seconds
    machines: list[str] = field(default_factory=list)  # each run's host_id
    host_bound: list[bool] = field(default_factory=list)
    train_samples: int = 0

    def estimate(self) -> Estimate:
        return median_estimate(self.steady, self.machines)


Design = Callable[[RunMetadata], bool]


def measured_runs(
    logs: Path, h100_design: Design = fresh_repeat
) -> tuple[dict[tuple[str, str, str], Measured], dict[str, int]]:
    """(gpu, workload, backend) -> the complete repeats of the defaults, each trained alone in its process, under
    each GPU's platform folder (campaign.designs says why runs that shared one are kept apart; `h100_design` takes
    the H100's from another design instead); and per workload the training samples of its published data (from any
    run that was not cut down)."""
    return _measured(complete_runs(logs), h100_design)


def _measured(
    runs: Iterable[tuple[str, RunMetadata, list[float]]], h100_design: Design, h200_design: Design = fresh_repeat
) -> tuple[dict[tuple[str, str, str], Measured], dict[str, int]]:
    found: dict[tuple[str, str, str], Measured] = {}
    full: dict[str, int] = {}
    for gpu, meta, steady in runs:
        if meta.cut_down is False and meta.data.train_samples:
            full[meta.workload] = meta.data.train_samples
        if not (h100_design if gpu == "H100" else h200_design)(meta):
            continue
        m = found.setdefault((gpu, meta.workload, meta.backend), Measured())
        m.steady.append(statistics.median(steady))
        m.machines.append(machine_of(meta))
        m.host_bound.append(bool(meta.stability and meta.stability.host_bound))
        m.train_samples = meta.data.train_samples or 0
    return found, full


def complete_runs(logs: Path) -> Iterator[tuple[str, RunMetadata, list[float]]]:
    """(gpu, metadata, steady epoch seconds) of every complete run with steady epochs under each GPU's platform
    folder."""
    for gpu, platform in PLATFORMS.items():
        if (logs / platform).is_dir():
            for meta, steady in complete_runs_in(logs / platform):
                yield gpu, meta, steady


def published_epochs() -> dict[tuple[str, str], float]:
    """(gpu, workload) -> the study's median steady epoch on TensorFlow, seconds."""
    results = published_results(get_study(STUDY)).results
    out = {}
    for gpu in PUBLISHED_GPUS:
        rows = results[results["config"] == f"{gpu}-{PUBLISHED_BACKEND}"]
        for _, row in rows.iterrows():
            out[gpu, str(row["workload"])] = float(row["steady_epoch_s"])
    return out


def published_prices() -> dict[str, float]:
    configs = get_study(STUDY).configs
    return {c.name: c.usd_per_hour for c in configs if c.name in PUBLISHED_GPUS and c.usd_per_hour is not None}


@dataclass(frozen=True)
class Row:
    workload: str
    backend: str
    published: dict[str, float]  # gpu -> 2017 epoch, seconds (published data)
    scale: float  # published training samples over measured ones
    estimates: dict[str, Estimate]  # GPU -> measured steady epoch (measured slice)
    faster: str  # "H100", "H200", "neither beyond noise", or one of UNDECIDABLE
    cheaper: dict[str, str]  # cloud -> the same words, on cost per epoch
    host_bound: bool


def rows(logs: Path, prices: Sequence[Price], h100_design: Design = fresh_repeat) -> list[Row]:
    return _rows(*measured_runs(logs, h100_design), prices)


def _rows(measured: dict[tuple[str, str, str], Measured], full: dict[str, int], prices: Sequence[Price]) -> list[Row]:
    published = published_epochs()
    by_cloud = {(p.gpu, p.cloud): p.usd_per_gpu_hour for p in prices}
    clouds = sorted({p.cloud for p in prices if all((g, p.cloud) in by_cloud for g in GPUS)})
    out = []
    studied = {w for _, w in published}
    pairs = {(w, b) for _, w, b in measured if w in studied and all((g, w, b) in measured for g in GPUS)}
    for workload, backend in sorted(pairs):
        runs = {g: measured[g, workload, backend] for g in GPUS}
        pub = {gpu: published[gpu, workload] for gpu in PUBLISHED_GPUS if (gpu, workload) in published}
        samples = full.get(workload, 0)
        cheaper = {
            cloud: _verdict(
                [t * by_cloud["H100", cloud] for t in runs["H100"].steady],
                [t * by_cloud["H200", cloud] for t in runs["H200"].steady],
                runs,
            )
            for cloud in clouds
        }
        bound = [b for g in GPUS for b in runs[g].host_bound]
        out.append(
            Row(
                workload=workload,
                backend=backend,
                published=pub,
                scale=samples / runs["H100"].train_samples if samples and runs["H100"].train_samples else 1.0,
                estimates={g: runs[g].estimate() for g in GPUS},
                faster=_verdict(runs["H100"].steady, runs["H200"].steady, runs),
                cheaper=cheaper,
                host_bound=sum(bound) * 2 > len(bound),
            )
        )
    return out


def _verdict(h100: Sequence[float], h200: Sequence[float], runs: dict[str, Measured]) -> str:
    if any(len(set(runs[gpu].machines)) < MIN_MACHINES for gpu in GPUS):
        return TOO_FEW_MACHINES_WORDS
    result = compare(h100, h200, candidate_machines=runs["H100"].machines, base_machines=runs["H200"].machines)
    return {FASTER: "H100", SLOWER: "H200", TOO_FEW: TOO_FEW_WORDS}.get(result.verdict, "neither beyond noise")


def _seconds(value: float) -> str:
    return f"{value:.2f}" if value < 100 else f"{value:.0f}"


def _usd(value: float) -> str:
    return f"${value:.4f}" if value < 1 else f"${value:.2f}"


FRAGILE_MARK = " †"
FRAGILE_LEGEND = (
    "†: the verdict changes when one machine's repeats are left out (each machine of either GPU left out in turn): "
    "it rests on that machine."
)


TIMES_NOTE = (
    "Steady epoch, seconds, scaled to the published training samples (H100 and H200: median of the short suite's "
    "repeats, [interval], n runs/machines). K80 and P100: the study's published TensorFlow 1.4 epochs; H100 and "
    "H200: this suite's GPU defaults on JAX and PyTorch, so a row compares the GPUs with today's software against "
    "2017's. *host-bound*: most runs left the GPU waiting on the host, so H100 against H200 compares the machines' "
    "hosts, not the GPUs. A verdict needs runs from at least two machines of each GPU; with fewer it says *too few "
    "machines*, however many repeats one machine ran."
)
COSTS_NOTE = (
    "Cost per epoch of the published data (steady epoch times the price of one GPU hour; K80 and P100 at the "
    "study's GCE prices of November 2017, the GPU with an n1-standard-1). *cheaper*: the GPU whose cost per epoch "
    "is lower beyond noise at that cloud's two prices."
)


@dataclass(frozen=True)
class Section:
    """The section's parts, for the markdown and the HTML report alike: its summary, the times and the costs as
    tables of formatted cells (`right`: the columns of figures), and a line per price."""

    summary: str
    times: pd.DataFrame
    costs: pd.DataFrame
    right: frozenset[str]
    prices: list[str]


def section_parts(logs: Path, prices: Sequence[Price] | None = None) -> Section | None:
    """Times, costs, verdicts and a summary generated from them, a verdict that rests on one machine marked; None
    where no workload of the study was measured on both GPUs."""
    prices = list(prices if prices is not None else load_prices())
    runs = list(complete_runs(logs))  # read once: the verdicts and their machines-left-out checks
    table = _rows(*_measured(runs, fresh_repeat), prices)
    if not table:
        return None
    fragile = fragile_verdicts(runs, prices)
    clouds = sorted({p.cloud for p in prices})
    by_cloud = {(p.gpu, p.cloud): p.usd_per_gpu_hour for p in prices}
    pub_prices = published_prices()
    times, costs = [], []
    for r in table:
        resting = fragile.get((r.workload, r.backend), set())
        times.append(
            {
                "workload": r.workload,
                "backend": r.backend,
                **{f"{g.upper()} 2017": _seconds(r.published[g]) if g in r.published else "not published"
                   for g in PUBLISHED_GPUS},
                **{g: _scaled(r.estimates[g], r.scale) for g in GPUS},
                "faster": _marked(r.faster, "faster", resting),
                "bound by": "host-bound (hosts compared)" if r.host_bound else "GPU-bound",
            }
        )  # fmt: skip
        costs.append(
            {
                "workload": r.workload,
                "backend": r.backend,
                **{g.upper(): _usd(r.published[g] * pub_prices[g] / 3600) if g in r.published else ""
                   for g in PUBLISHED_GPUS},
                **{f"{g} {c}": _usd(r.estimates[g].value * r.scale * by_cloud[g, c] / 3600)
                   if (g, c) in by_cloud else "" for g in GPUS for c in clouds},
                **{f"cheaper on {c}": _marked(r.cheaper[c], c, resting) if c in r.cheaper else "" for c in clouds},
            }
        )  # fmt: skip
    right = {f"{g.upper()} 2017" for g in PUBLISHED_GPUS} | {g.upper() for g in PUBLISHED_GPUS}
    right |= {f"{g} {c}" for g in GPUS for c in clouds}
    return Section(
        summary=summary(table, prices, fragile),
        times=pd.DataFrame(times),
        costs=pd.DataFrame(costs),
        right=frozenset(right),
        prices=[f"{p.gpu} on {p.cloud}, {p.shape}: ${p.usd_per_gpu_hour:g} ({p.date}; {p.source})" for p in prices],
    )


def section(logs: Path, prices: Sequence[Price] | None = None) -> str:
    """The section in markdown (section_parts)."""
    parts = section_parts(logs, prices)
    if parts is None:
        return ""
    lines = [
        f"## {STUDY} on today's GPUs",
        "",
        parts.summary,
        "",
        TIMES_NOTE,
        "",
        markdown_table(parts.times, parts.right),
    ]
    lines += ["", FRAGILE_LEGEND, "", COSTS_NOTE, "", markdown_table(parts.costs, parts.right), "", FRAGILE_LEGEND]
    lines += ["", "Prices (on demand, per GPU hour):", "", *(f"- {line}" for line in parts.prices)]
    return "\n".join(lines) + "\n"


def _marked(verdict: str, name: str, fragile: set[str]) -> str:
    return verdict + FRAGILE_MARK if name in fragile else verdict


def _scaled(estimate: Estimate, scale: float) -> str:
    text = _seconds(estimate.value * scale)
    if estimate.low is not None and estimate.high is not None:
        text += f" [{_seconds(estimate.low * scale)}–{_seconds(estimate.high * scale)}]"
    return f"{text} (n={estimate.n}/{estimate.machines})"


def summary(
    table: Sequence[Row], prices: Sequence[Price], fragile: dict[tuple[str, str], set[str]] | None = None
) -> str:
    """One paragraph from the verdicts and medians: which GPU is faster, which is cheaper at each cloud, how many of
    those verdicts hold with any one machine left out (`fragile`, where given), and the study's own question, the
    most training per dollar, against its K80."""
    count = {word: sum(r.faster == word for r in table) for word in ("H100", "H200")}
    undecided = len(table) - count["H100"] - count["H200"]
    gpu_bound = [r for r in table if not r.host_bound]
    h200_gpu = sum(r.faster == "H200" for r in gpu_bound)
    speedups = [
        r.published["k80"] / (r.estimates["H200"].value * r.scale)
        for r in table
        if "k80" in r.published and r.estimates["H200"].value > 0
    ]
    clouds = sorted({p.cloud for p in prices})
    cheaper = {
        c: {g: sum(r.cheaper.get(c) == g for r in table) for g in GPUS} for c in clouds if any(r.cheaper for r in table)
    }
    cheap_text = "; ".join(f"on {c} the H100 in {v['H100']} and the H200 in {v['H200']}" for c, v in cheaper.items())
    text = (
        f"Over {len(table)} workload and backend pairs, the H200 ran faster beyond noise in {count['H200']}, the "
        f"H100 in {count['H100']}, and {undecided} stayed undecided (no difference beyond noise, or too few "
        f"repeats or machines). {len(gpu_bound)} of the pairs were GPU-bound, and the H200 won {h200_gpu} of those; "
        f"the rest compare the two machines' hosts more than their GPUs. Cheaper per epoch beyond noise: {cheap_text}."
    )
    if fragile is not None:
        text += _held_without_any_machine(table, fragile)
    if speedups:
        text += (
            f" Against the study's K80 (TensorFlow 1.4, 2017), an H200 epoch of the same data takes "
            f"{min(speedups):.0f}x to {max(speedups):.0f}x less time (median {statistics.median(speedups):.0f}x)."
        )
    return text + _per_dollar(table, prices)


def _held_without_any_machine(table: Sequence[Row], fragile: dict[tuple[str, str], set[str]]) -> str:
    """How many verdicts beyond noise (faster, or cheaper at a cloud) hold with any one machine left out."""
    decided = [
        (name, fragile.get((r.workload, r.backend), set()))
        for r in table
        for name, verdict in (("faster", r.faster), *r.cheaper.items())
        if verdict in GPUS
    ]
    held = sum(name not in resting for name, resting in decided)
    text = f" Of those {len(decided)} verdicts beyond noise, {held} hold whichever one machine's repeats are left out"
    if held == len(decided):
        return text + "."
    return text + f"; the other {len(decided) - held} each rest on one machine (marked †)."


def cheapest_today(row: Row, prices: Sequence[Price]) -> Price:
    """The GPU offer with the lowest median cost per epoch for a row (the GPU's median epoch times the price)."""
    return min(
        (p for p in prices if p.gpu in row.estimates), key=lambda p: row.estimates[p.gpu].value * p.usd_per_gpu_hour
    )


def _per_dollar(table: Sequence[Row], prices: Sequence[Price]) -> str:
    """The study's question, training per dollar: where an epoch cost least today, and that cost against the K80's
    at the study's price (each in the dollars of its date)."""
    if not table:
        return ""
    k80_usd_per_hour = published_prices().get("k80")
    picks = [(r, cheapest_today(r, prices)) for r in table]
    where = Counter(f"the {p.gpu} on {p.cloud}" for _, p in picks)
    text = " The lowest median cost per epoch today was " + ", ".join(
        f"{name} ({n} {'pair' if n == 1 else 'pairs'})" for name, n in where.most_common()
    )
    against = [
        r.estimates[p.gpu].value * r.scale * p.usd_per_gpu_hour / (r.published["k80"] * k80_usd_per_hour)
        for r, p in picks
        if "k80" in r.published and k80_usd_per_hour
    ]
    if not against:
        return text + "."
    median = statistics.median(against)
    cheaper_than_k80 = sum(ratio < 1 for ratio in against)
    buys = "speed, not training per dollar" if median >= 1 else "both speed and training per dollar"
    text += (
        f"; at that price an epoch cost {min(against):.2f}x to {max(against):.1f}x what it cost on the study's K80 "
        f"at its November 2017 price (median {median:.2f}x; less than on the K80 in {cheaper_than_k80} of "
        f"{len(against)} pairs), so for these models a newer GPU buys {buys}."
    )
    clouds, gpus = {p.cloud for _, p in picks}, {p.gpu for _, p in picks}
    if len(clouds) == 1 and len(gpus) > 1:
        text += (
            f" {next(iter(clouds))}'s offers were the cheapest for every pair, with either GPU: where a run is "
            "rented moved its cost more than which of the two GPUs it ran on."
        )
    return text


DESIGN_RUNS = {"round": round_process_repeat, "preloaded": preloaded_repeat, "staged": staged_repeat}


EVERY_BACKEND = "*"


def design_names(spec: str) -> dict[str, str]:
    """backend -> design of one design for every backend (`staged`: {"*": "staged"}), or of a design per backend
    (`jax:preloaded,torch:staged`, where no one design serves both); ValueError names what is wrong."""
    if ":" not in spec:
        if spec not in DESIGN_RUNS:
            raise ValueError(f"--designs: unknown design {spec!r}; choose from {', '.join(DESIGN_RUNS)}")
        return {EVERY_BACKEND: spec}
    chosen: dict[str, str] = {}
    for part in spec.split(","):
        backend, _, name = part.partition(":")
        if name not in DESIGN_RUNS or not backend or backend in chosen:
            raise ValueError(
                f"--designs: {part!r} must be BACKEND:DESIGN, once per backend, DESIGN among {', '.join(DESIGN_RUNS)}"
            )
        chosen[backend] = name
    return chosen


def design_runs(spec: str) -> Design:
    """The repeats of the design(s) `spec` names (design_names)."""
    names = design_names(spec)

    def chosen(meta: RunMetadata) -> bool:
        name = _design_of(names, meta.backend)
        return name is not None and DESIGN_RUNS[name](meta)

    return chosen


def _design_of(names: dict[str, str], backend: str) -> str | None:
    """The design design_names gives `backend`, if any."""
    return names.get(backend, names.get(EVERY_BACKEND))


Verdicts = dict[tuple[str, str], dict[str, str]]  # (workload, backend) -> faster and cheaper per cloud


def _decided(verdicts: dict[str, str]) -> bool:
    """Whether a pair's runs were enough to decide every one of its verdicts (faster, and cheaper per cloud)."""
    return not set(UNDECIDABLE) & set(verdicts.values())


def _verdicts(
    measured: tuple[dict[tuple[str, str, str], Measured], dict[str, int]], prices: Sequence[Price]
) -> Verdicts:
    return {(r.workload, r.backend): {"faster": r.faster, **r.cheaper} for r in _rows(*measured, prices)}


Runs = Sequence[tuple[str, RunMetadata, list[float]]]
LeftOut = list[tuple[tuple[str, str], tuple[str, str], dict[str, str]]]  # (GPU, machine) left out, pair, verdicts


def machines_left_out(runs: Runs, prices: Sequence[Price]) -> dict[tuple[str, str], dict]:
    """How reproducible the fresh-process verdicts are: each pair's verdicts decided again with one machine's
    repeats left out, once per machine of either GPU. A pair whose verdicts change when a machine is left out was
    decided by that machine; no other design can be asked to reproduce it. Left-out sets that leave too few
    repeats or machines to decide are not counted."""
    return _kept_per_pair(*_left_out(runs, prices))


def _kept_per_pair(full: Verdicts, left_out: LeftOut) -> dict[tuple[str, str], dict]:
    kept: dict[tuple[str, str], list[bool]] = {key: [] for key in full}
    for _, key, verdicts in left_out:
        kept[key].append(verdicts == full[key])
    return {key: {"kept": sum(k), "tried": len(k), "stable": all(k)} for key, k in kept.items()}


def fragile_verdicts(runs: Runs, prices: Sequence[Price]) -> dict[tuple[str, str], set[str]]:
    """Per pair, which of its fresh-process verdicts (`faster`, or a cloud's cheaper) change when some one machine's
    repeats are left out (machines_left_out's rule): those rest on that machine."""
    full, left_out = _left_out(runs, prices)
    fragile: dict[tuple[str, str], set[str]] = {key: set() for key in full}
    for _, key, verdicts in left_out:
        fragile[key].update(name for name, verdict in verdicts.items() if verdict != full[key][name])
    return fragile


def _left_out(runs: Runs, prices: Sequence[Price]) -> tuple[Verdicts, LeftOut]:
    """The fresh-process verdicts, and each pair's verdicts again with each machine of either GPU left out in turn
    (those of a pair whose left-out set is too small to decide every verdict are left out)."""
    full = _verdicts(_measured(runs, fresh_repeat), prices)
    hosts = sorted({(gpu, machine_of(meta)) for gpu, meta, _ in runs if fresh_repeat(meta)})
    again = []
    for gpu, host in hosts:
        kept = [r for r in runs if (r[0], machine_of(r[1])) != (gpu, host)]
        for key, verdicts in _verdicts(_measured(kept, fresh_repeat), prices).items():
            if key in full and _decided(verdicts):
                again.append(((gpu, host), key, verdicts))
    return full, again


def verdicts_moved_by_one_machine(runs: Runs, prices: Sequence[Price]) -> dict[str, Any]:
    """How many fresh-process verdicts (faster, or a cloud's cheaper) change when one machine's repeats are left
    out, per machine left out: how far the fresh verdicts themselves move with one machine fewer, the yardstick
    for another design's changed verdicts. As in machines_left_out, a pair its left-out set cannot decide is not
    counted for that machine, and a machine whose left-out set decides no pair is not counted at all."""
    return _changed_per_machine(*_left_out(runs, prices))


def _changed_per_machine(full: Verdicts, left_out: LeftOut) -> dict[str, Any]:
    changed: dict[tuple[str, str], int] = {}
    for machine, key, verdicts in left_out:
        changed[machine] = changed.get(machine, 0) + sum(verdicts[name] != full[key][name] for name in verdicts)
    counts = sorted(changed.values())
    return {
        "machines": len(counts),
        "median": statistics.median(counts) if counts else None,
        "range": [counts[0], counts[-1]] if counts else None,
    }


def design_verdicts(logs: Path, prices: Sequence[Price] | None = None, design: str = "round") -> dict:
    """Per default: which GPU is faster and which is cheaper per cloud, decided once with fresh-process repeats
    and once with the H100's repeats of `design` (design_runs: one design, or one per backend), whether the two
    agree, and whether the fresh verdicts survive leaving out any one machine (machines_left_out): agreement is
    only asked of those. Pairs whose design runs are too few (repeats or machines) to decide are counted apart
    (`design_decided`): they say nothing either way. The H200 side takes the design's runs too where it has any of
    the backend (`h200_side`), as a round in that design would measure both GPUs; where it has none it stays fresh,
    and a design that slows the H100's runs moves the verdicts towards the H200 whether or not it would move them
    with both GPUs measured alike."""
    prices = load_prices() if prices is None else prices
    runs = list(complete_runs(logs))  # read once: both designs' verdicts come from the same logs
    chosen = design_runs(design)
    h200_backends = {meta.backend for gpu, meta, _ in runs if gpu == "H200" and chosen(meta)}

    def h200_runs(meta: RunMetadata) -> bool:
        return (chosen if meta.backend in h200_backends else fresh_repeat)(meta)

    fresh = {(r.workload, r.backend): r for r in _rows(*_measured(runs, fresh_repeat), prices)}
    other = {(r.workload, r.backend): r for r in _rows(*_measured(runs, chosen, h200_runs), prices)}
    left_out = _left_out(runs, prices)  # the slow part: every pair decided again once per machine
    stability = _kept_per_pair(*left_out)
    one_machine = _changed_per_machine(*left_out)
    names = design_names(design)
    pairs: list[dict[str, Any]] = []
    for key in sorted(fresh.keys() & other.keys()):
        designs = (("fresh", fresh[key]), (design, other[key]))
        verdicts = {name: {"faster": r.faster, **r.cheaper} for name, r in designs}
        pairs.append(
            {
                "workload": key[0],
                "backend": key[1],
                **{f"{gpu.lower()}_repeats": _repeats_per_design(fresh[key], other[key], design, gpu) for gpu in GPUS},
                **verdicts,
                "same": verdicts["fresh"] == verdicts[design],
                "reversed": _reversed(verdicts["fresh"], verdicts[design]),
                "fresh_machines_left_out": stability[key],
            }
        )
    stable = [p for p in pairs if p["fresh_machines_left_out"]["stable"]]
    decided = [p for p in pairs if _decided(p[design])]
    backends = sorted({p["backend"] for p in pairs})
    return {
        "h200_side": {b: _design_of(names, b) if b in h200_backends else "fresh" for b in backends},
        "pairs": pairs,
        "same": sum(p["same"] for p in pairs),
        "compared": len(pairs),
        "design_decided": len(decided),
        "same_where_design_decided": sum(p["same"] for p in decided),
        "by_backend": {
            b: {
                "compared": sum(p["backend"] == b for p in pairs),
                "design_decided": sum(p["backend"] == b for p in decided),
                "same": sum(p["same"] for p in pairs if p["backend"] == b),
                "verdicts": _verdict_counts([p for p in pairs if p["backend"] == b], design),
            }
            for b in backends
        },
        "verdicts": _verdict_counts(pairs, design),
        "fresh_stable": len(stable),
        "same_where_fresh_stable": sum(p["same"] for p in stable),
        "fresh_verdicts_changed_by_one_machine_left_out": one_machine,
    }


def _reversed(fresh: dict[str, str], other: dict[str, str]) -> list[str]:
    """The verdicts (`faster`, or a cloud's cheaper) where one design names one GPU and the other the other GPU: a
    reversal, unlike a verdict that one design decides and the other finds within noise."""
    return sorted(name for name, verdict in fresh.items() if {verdict, other[name]} == set(GPUS))


def _verdict_counts(pairs: Sequence[dict[str, Any]], design: str) -> dict[str, int]:
    """Verdict by verdict over the pairs: how many there are, how many the design repeats, how many it reverses."""
    return {
        "compared": sum(len(p["fresh"]) for p in pairs),
        "same": sum(p["fresh"][name] == p[design][name] for p in pairs for name in p["fresh"]),
        "reversed": sum(len(p["reversed"]) for p in pairs),
    }


def _repeats_per_design(fresh: Row, other: Row, design: str, gpu: str) -> dict[str, int]:
    return {"fresh": fresh.estimates[gpu].n, design: other.estimates[gpu].n}


def steady_epochs(
    logs: Path, prices: Sequence[Price] | None = None, counts: Sequence[int] = STEADY_EPOCHS_TRIED
) -> dict:
    """How many steady epochs a run needs, pyperf's question of values per process: the fresh-process verdicts
    decided again with each run (both GPUs) cut to its first n steady epochs, against all of them, counting the
    pairs whose verdicts survive leaving out any one machine apart; beside it, how far one steady epoch strays
    from another in the same run and how far one process's median strays from another's on the same machine (log
    units, pooled). Where the epochs' spread is small against the processes', fewer epochs per run keep the
    verdicts and cost less."""
    prices = load_prices() if prices is None else prices
    runs = list(complete_runs(logs))
    fresh = [r for r in runs if fresh_repeat(r[1])]
    full = _verdicts(_measured(fresh, fresh_repeat), prices)
    stable = {key for key, kept in machines_left_out(runs, prices).items() if kept["stable"]}
    cuts = []
    for n in counts:
        cut = _verdicts(_measured([(gpu, meta, steady[:n]) for gpu, meta, steady in fresh], fresh_repeat), prices)
        same = {key for key in full if cut.get(key) == full[key]}
        cuts.append(
            {
                "steady_epochs": n,
                "same": len(same),
                "compared": len(full),
                "fresh_stable": len(stable),
                "same_where_fresh_stable": len(same & stable),
                "changed": sorted(f"{w} {b}" for w, b in full.keys() - same),
            }
        )
    return {"spread": _epoch_spread(fresh), "cut": cuts}


def _epoch_spread(runs: Sequence[tuple[str, RunMetadata, list[float]]]) -> dict[str, dict[str, float | None]]:
    """Per GPU and backend: the pooled spread of steady epochs around their run's mean, and of run medians around
    their machine's mean (benchmarks.stats.within_machine_sd), with the steady epochs a run had (median)."""
    groups: dict[tuple[str, str], list[tuple[RunMetadata, list[float]]]] = {}
    for gpu, meta, steady in runs:
        groups.setdefault((gpu, meta.backend), []).append((meta, steady))
    out = {}
    for (gpu, backend), members in sorted(groups.items()):
        medians = ((m.workload, m.backend, machine_of(m), statistics.median(steady)) for m, steady in members)
        epochs = within_machine_sd([{str(i): steady for i, (_, steady) in enumerate(members)}])
        processes = within_machine_sd(list(by_default_and_machine(medians).values()))
        out[f"{gpu} {backend}"] = {
            "epochs_within_run_sd": None if epochs is None else round(epochs, 3),
            "runs_within_machine_sd": None if processes is None else round(processes, 3),
            "steady_epochs_per_run": round(statistics.median(len(steady) for _, steady in members)),
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m campaign.today", description=__doc__.splitlines()[0])
    parser.add_argument("logs", type=Path, help="the folder that holds NVIDIA-H100 and NVIDIA-H200")
    parser.add_argument("--cache", action="store_true", help="cold and warm compile-cache rounds of the H100 runs")
    parser.add_argument(
        "--designs",
        nargs="?",
        const="round",
        help=f"the verdicts with the H100's repeats of another process design: one of {', '.join(DESIGN_RUNS)} "
        "(default: round), or one per backend, e.g. jax:preloaded,torch:staged",
    )
    parser.add_argument(
        "--epochs", action="store_true", help="the verdicts again from each run's first 1, 2 and 3 steady epochs"
    )
    args = parser.parse_args(argv)
    if not (args.logs / PLATFORMS["H100"]).is_dir() or not (args.logs / PLATFORMS["H200"]).is_dir():
        print(f"error: logs: {args.logs} holds no {' and '.join(PLATFORMS.values())} folders", file=sys.stderr)
        return 2
    if args.cache:
        h100 = args.logs / PLATFORMS["H100"]
        print(json.dumps(cache_rounds(h100 / "console", timed_repeats(h100)), indent=2))
        return 0
    if args.designs:
        try:
            design_runs(args.designs)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(json.dumps(design_verdicts(args.logs, design=args.designs), indent=2))
        return 0
    if args.epochs:
        print(json.dumps(steady_epochs(args.logs), indent=2))
        return 0
    print(section(args.logs), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
