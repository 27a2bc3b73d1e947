"""GPU against GPU, per epoch and per dollar, beyond noise: for whatever GPUs the runs' metadata names.

A run's GPU is the board its metadata records (`hardware.gpus[0].name`), never its folder or run id. Only runs that
say something about the GPU are compared: complete, one device, trained with the runner's default settings in a fresh
process (`Run.default_settings`). Two GPUs are compared on a (workload, backend, data source, training samples) both
ran, so the two epochs train the same samples the same way.

- *steady epoch*: the median over a side's runs of each run's median steady epoch, with its interval
  (benchmarks.stats.median_estimate; machines, then runs, where the runs came from several machines).
- *faster*: benchmarks.stats.compare on the two sides' run medians, the verdict the rest of the report uses.
- *per dollar*: a GPU's offers are the catalog's profiles whose accelerator names the same model (the cheapest GPU
  hour per provider, not retired, with an on-demand price; a machine of N GPUs offers one GPU's share, its price over
  N, as clouds that sell a GPU only in 8-GPU shapes do); cost per epoch = steady epoch x that hourly price,
  and *cheaper* is the same test on the runs' costs, for every offer of one GPU against every offer of the other.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.stats import FASTER, NOISE_THRESHOLD, SLOWER, TOO_FEW, Estimate, compare, median_estimate
from records.catalog import Profile

TITLE = "GPU against GPU, per epoch and per dollar"
NEITHER = "neither beyond noise"
TOO_FEW_WORDS = "too few repeats"
# Words a board name carries besides its model ("NVIDIA H100 80GB HBM3" -> h100, "nvidia-tesla-t4" -> t4).
VENDOR_WORDS = frozenset({"nvidia", "tesla", "geforce", "rtx", "quadro"})


def model_of(name: str) -> str:
    """The GPU model a board or catalog accelerator names: its first word with a digit, lower case ("" if none)."""
    words = [w for w in re.split(r"[\s_-]+", name.lower()) if w and w not in VENDOR_WORDS]
    return next((w for w in words if any(c.isdigit() for c in w)), "")


def short_name(board: str) -> str:
    return board.removeprefix("NVIDIA ").strip()


@dataclass(frozen=True)
class Key:
    """What two GPUs must both have trained to be compared."""

    workload: str
    backend: str
    data_source: str
    train_samples: int


@dataclass
class Side:
    """One GPU's comparable runs of one Key."""

    gpu: str  # the board, as the metadata names it
    steady: list[float] = field(default_factory=list)  # each run's median steady epoch, seconds
    machines: list[str] = field(default_factory=list)
    host_bound: list[bool] = field(default_factory=list)

    def estimate(self) -> Estimate:
        return median_estimate(self.steady, self.machines)

    @property
    def machine_count(self) -> int:
        return len(set(self.machines))

    @property
    def mostly_host_bound(self) -> bool:
        return sum(self.host_bound) * 2 > len(self.host_bound)


def comparable_runs(runs: Iterable[Any]) -> dict[tuple[str, Key], Side]:
    """(board, key) -> its side, from records.loading runs."""
    found: dict[tuple[str, Key], Side] = {}
    for run in runs:
        meta = run.metadata
        gpus = meta.hardware.get("gpus") or []
        board = str(gpus[0].get("name", "")) if gpus else ""
        devices = int((meta.distribution or {}).get("devices") or 1)
        steady = run.steady_median_s
        if not (board and run.complete and steady and devices == 1 and run.default_settings):
            continue
        key = Key(run.workload, run.config.backend, run.data_source, int(meta.data.train_samples or 0))
        side = found.setdefault((board, key), Side(board))
        side.steady.append(steady)
        side.machines.append(run.machine)
        side.host_bound.append(bool(run.measured.host_bound))
    return found


@dataclass(frozen=True)
class Offer:
    """One GPU hour of a model at one provider: the catalog's cheapest there, a GPU's share of a machine of `gpus`."""

    provider: str
    profile: str
    usd_per_hour: float
    date: str
    gpus: int = 1

    @property
    def text(self) -> str:
        share = f" per GPU, 1/{self.gpus} of the machine" if self.gpus > 1 else ""
        return f"{self.profile} ${self.usd_per_hour:.2f}/h{share} ({self.date})"


def offers_of(board: str, profiles: Mapping[str, Profile]) -> list[Offer]:
    model = model_of(board)
    if not model:
        return []
    cheapest: dict[str, Offer] = {}
    for p in profiles.values():
        price = p.on_demand
        if p.retired or p.accelerator_count < 1 or price is None or not model or model_of(p.accelerator or "") != model:
            continue
        gpus = p.accelerator_count
        offer = Offer(p.provider, p.name, price.usd_per_hour / gpus, price.date, gpus)
        known = cheapest.get(p.provider)
        if known is None or (offer.usd_per_hour, offer.gpus) < (known.usd_per_hour, known.gpus):  # ties: fewer GPUs
            cheapest[p.provider] = offer
    return sorted(cheapest.values(), key=lambda o: (o.provider, o.profile))


def pairings(a: Sequence[Offer], b: Sequence[Offer]) -> list[tuple[Offer, Offer]]:
    """The offers set side by side: at each provider that offers both GPUs, the two; where no provider offers both,
    every offer of one against every offer of the other (each at its own provider)."""
    same = [(oa, ob) for oa in a for ob in b if oa.provider == ob.provider]
    return same or [(oa, ob) for oa in a for ob in b]


def verdict(a: Side, b: Side, a_values: Sequence[float], b_values: Sequence[float]) -> str:
    """Which side is lower beyond noise (its short name), NEITHER, or TOO_FEW_WORDS."""
    result = compare(a_values, b_values, candidate_machines=a.machines, base_machines=b.machines)
    words = {FASTER: short_name(a.gpu), SLOWER: short_name(b.gpu), TOO_FEW: TOO_FEW_WORDS}
    return words.get(result.verdict, NEITHER)


def caveats(a: Side, b: Side) -> list[str]:
    """What a verdict rests on that a reader must know: one run or one machine on a side, hosts compared."""
    notes = []
    for side in (a, b):
        name = short_name(side.gpu)
        if len(side.steady) == 1:
            notes.append(f"{name} on one run")
        elif side.machine_count == 1:
            notes.append(f"{name} on one machine")
    if a.mostly_host_bound or b.mostly_host_bound:
        notes.append("host-bound: compares the hosts more than the GPUs")
    return notes


@dataclass(frozen=True)
class Pair:
    key: Key
    a: Side
    b: Side
    faster: str
    cheaper: list[tuple[Offer, Offer, str]]  # (offer of a, offer of b, which is cheaper per epoch)
    caveats: list[str]


def pairs_of(found: Mapping[tuple[str, Key], Side], profiles: Mapping[str, Profile]) -> list[Pair]:
    boards = sorted({board for board, _ in found})
    out = []
    for first, second in itertools.combinations(boards, 2):
        keys = sorted({k for g, k in found if g == first} & {k for g, k in found if g == second}, key=_order)
        for key in keys:
            a, b = found[first, key], found[second, key]
            cheaper = [
                (
                    oa,
                    ob,
                    verdict(a, b, [t * oa.usd_per_hour for t in a.steady], [t * ob.usd_per_hour for t in b.steady]),
                )
                for oa, ob in pairings(offers_of(first, profiles), offers_of(second, profiles))
            ]
            out.append(Pair(key, a, b, verdict(a, b, a.steady, b.steady), cheaper, caveats(a, b)))
    return out


def _priced(side: Side, offer: Offer) -> list[float]:
    return [t * offer.usd_per_hour for t in side.steady]


def _order(key: Key) -> tuple[str, str, str, int]:
    return key.workload, key.backend, key.data_source, key.train_samples


def _seconds(estimate: Estimate) -> str:
    text = f"{estimate.value:.3f}"
    if estimate.low is not None and estimate.high is not None:
        return f"{text} [{estimate.low:.3f}-{estimate.high:.3f}]"
    return f"{text} (no interval)"


def _usd(value: float) -> str:
    return f"${value:.5f}" if value < 0.01 else f"${value:.4f}"


def _runs(side: Side) -> str:
    return f"{len(side.steady)}/{side.machine_count}"


def time_cells(p: Pair) -> dict[str, str]:
    ea, eb = p.a.estimate(), p.b.estimate()
    return {
        "workload": p.key.workload, "backend": p.key.backend,
        "data, samples": f"{p.key.data_source}, {p.key.train_samples}",
        "GPU A": short_name(p.a.gpu), "A epoch s": _seconds(ea), "A runs/machines": _runs(p.a),
        "GPU B": short_name(p.b.gpu), "B epoch s": _seconds(eb), "B runs/machines": _runs(p.b),
        "B/A": f"{eb.value / ea.value:.2f}", "faster": p.faster, "rests on": "; ".join(p.caveats) or "-",
    }  # fmt: skip


def cost_cells(p: Pair, oa: Offer, ob: Offer, cheaper: str) -> dict[str, str]:
    ea, eb = p.a.estimate().value, p.b.estimate().value
    same = "same provider" if oa.provider == ob.provider else "each at its own provider"
    return {
        "workload": p.key.workload, "backend": p.key.backend,
        "GPU A at": f"{short_name(p.a.gpu)}: {oa.text}", "A $/epoch": _usd(ea * oa.usd_per_hour / 3600),
        "GPU B at": f"{short_name(p.b.gpu)}: {ob.text}", "B $/epoch": _usd(eb * ob.usd_per_hour / 3600),
        "prices": same, "cheaper": cheaper, "rests on": "; ".join(p.caveats) or "-",
    }  # fmt: skip


def _thin(p: Pair) -> bool:
    """A side rests on one run or one machine."""
    return any(side_count in c for c in p.caveats for side_count in ("one run", "one machine"))


def summary_line(pairs: Sequence[Pair]) -> str:
    """Per pair of GPUs: how many (workload, backend) each wins beyond noise, and how many of those wins rest on one
    run or one machine of a side (never crowned without saying so)."""
    lines = []
    by_gpus: dict[tuple[str, str], list[Pair]] = {}
    for p in pairs:
        by_gpus.setdefault((p.a.gpu, p.b.gpu), []).append(p)
    for (first, second), group in by_gpus.items():
        names = (short_name(first), short_name(second))
        parts = []
        for name in names:
            wins = [p for p in group if p.faster == name]
            fragile = sum(_thin(p) for p in wins)
            hosts = sum(p.a.mostly_host_bound or p.b.mostly_host_bound for p in wins)
            marks = [f"{fragile} on one run or one machine of a side"] if fragile else []
            marks += [f"{hosts} host-bound"] if hosts else []
            parts.append(f"{name} faster beyond noise in {len(wins)}" + (f" ({', '.join(marks)})" if marks else ""))
        undecided = sum(p.faster in (NEITHER, TOO_FEW_WORDS) for p in group)
        cheap = _cheaper_text(group, names)
        lines.append(
            f"{names[0]} against {names[1]}, {len(group)} (workload, backend) compared: {'; '.join(parts)}; "
            f"undecided (no difference beyond noise or too few repeats) in {undecided}. {cheap}"
        )
    return " ".join(lines)


def _cheaper_text(group: Sequence[Pair], names: tuple[str, str]) -> str:
    verdicts = [(p, c) for p in group for _, _, c in p.cheaper]
    if not verdicts:
        return "No catalog price for both GPUs: no cost compared."
    counts = [sum(c == name for _, c in verdicts) for name in names]
    fragile = sum(c in names and _thin(p) for p, c in verdicts)
    hosts = sum(c in names and (p.a.mostly_host_bound or p.b.mostly_host_bound) for p, c in verdicts)
    marks = [f"{fragile} on one run or one machine of a side"] if fragile else []
    marks += [f"{hosts} host-bound"] if hosts else []
    text = (
        f"Cheaper per epoch beyond noise, over {len(verdicts)} pairings of offers: "
        f"{names[0]} in {counts[0]}, {names[1]} in {counts[1]}"
    )
    return text + (f" ({', '.join(marks)})." if marks else ".")


NOTE = (
    "Per pair of GPUs the runs' metadata names (`hardware.gpus`), on each workload and backend both trained with the "
    "default settings in fresh processes, one device, the same data and training samples. *epoch s*: the median of "
    "the runs' median steady epochs [95% interval; none under 3 runs]. *runs/machines*: the repeats and the machines "
    "(`hardware.host_id`) behind it. *faster*: benchmarks.stats.compare (rank-sum test and bootstrap ratio beyond "
    f"±{NOISE_THRESHOLD:.0%}). *rests on*: a side with one run or one machine, whose host cannot be told from its GPU."
)
COST_NOTE = (
    "Cost per epoch at the catalog's dated on-demand prices: per GPU, the cheapest GPU hour of each provider "
    "whose accelerator is that model (a machine of N GPUs: its price over N). At each provider that offers both GPUs "
    "the two are set side by side; where none does, every offer of one against every offer of the other, each at its "
    "own provider, as *prices* says. *cheaper*: the same test on "
    "the runs' costs."
)


@dataclass
class Section:
    pairs: list[Pair]
    summary: str
    times: Any  # pandas.DataFrame of formatted cells
    costs: Any  # pandas.DataFrame of formatted cells (empty without prices)
    unpriced: list[str]  # GPUs without any catalog offer


def section(runs: Iterable[Any], profiles: Mapping[str, Profile]) -> Section | None:
    """None where fewer than two GPUs share a comparable (workload, backend)."""
    import pandas as pd

    pairs = pairs_of(comparable_runs(runs), profiles)
    if not pairs:
        return None
    times = pd.DataFrame([time_cells(p) for p in pairs])
    costs = pd.DataFrame([cost_cells(p, oa, ob, c) for p in pairs for oa, ob, c in p.cheaper])
    boards = sorted({s.gpu for p in pairs for s in (p.a, p.b)})
    unpriced = [short_name(b) for b in boards if not offers_of(b, profiles)]
    return Section(pairs, summary_line(pairs), times, costs, unpriced)


def csv_table(section: Section) -> Any:
    """Full precision, one row per compared (pair, workload, backend) and pairing of offers (none: one row)."""
    import pandas as pd

    rows = []
    for p in section.pairs:
        ea, eb = p.a.estimate(), p.b.estimate()
        base = {
            "workload": p.key.workload, "backend": p.key.backend, "data_source": p.key.data_source,
            "train_samples": p.key.train_samples, "gpu_a": p.a.gpu, "gpu_b": p.b.gpu,
            "a_epoch_s": ea.value, "a_low": ea.low, "a_high": ea.high, "a_runs": len(p.a.steady),
            "a_machines": p.a.machine_count, "b_epoch_s": eb.value, "b_low": eb.low, "b_high": eb.high,
            "b_runs": len(p.b.steady), "b_machines": p.b.machine_count, "faster": p.faster,
            "rests_on": "; ".join(p.caveats),
        }  # fmt: skip
        if not p.cheaper:
            rows.append(base)
        rows += [{**base, **_offer_columns(ea, eb, oa, ob), "cheaper": c} for oa, ob, c in p.cheaper]
    return pd.DataFrame(rows)


def _offer_columns(ea: Estimate, eb: Estimate, oa: Offer, ob: Offer) -> dict[str, object]:
    return {
        "a_profile": oa.profile, "a_usd_per_hour": oa.usd_per_hour, "a_price_date": oa.date,
        "a_usd_per_epoch": ea.value * oa.usd_per_hour / 3600, "b_profile": ob.profile,
        "b_usd_per_hour": ob.usd_per_hour, "b_price_date": ob.date,
        "b_usd_per_epoch": eb.value * ob.usd_per_hour / 3600,
    }  # fmt: skip
