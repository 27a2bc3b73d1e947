"""How long a suite will take on a machine profile, and what it will cost, before renting it: from the closest
measured runs (the user's logs and the project's committed reference runs) or published runs of each workload.

Each planned workload x backend is estimated from one run: its first epoch plus (planned epochs - 1) steady epochs,
scaled by the planned training samples over the run's. The closest run shares the profile's accelerator and the
backend; then the accelerator; then the backend; then any. Uncertainty, stated with the figure:

- same accelerator: x/÷ 1.5, because runs of one configuration on one H200 machine differed by up to 45 %
  (issue 11's measurements);
- another accelerator: x/÷ 3, an assumption (the published K80, P100 and CPU runs of one workload differ by up to
  that much), not a measurement of the profile's accelerator.

Machine boot, image pulls and data loading are not in the runs' epoch times and are not estimated.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.suites import get_suite
from benchmarks.workloads import spec
from report.loading import REFERENCE_FOLDER, Run, load_runs
from report.studies import load_studies, published_results

if TYPE_CHECKING:
    from orchestrate.catalog import Profile

SAME_ACCELERATOR_FACTOR = 1.5
OTHER_ACCELERATOR_FACTOR = 3.0
# h200, k80, p100, a10g, l4, l40s, t4, b200, m60; not "80gb", and not the machine families n1, e2 or c2 that a CPU
# machine's description names.
MODEL = re.compile(r"^[abhklmptv]\d{1,4}[a-z]{0,2}$")
GPU_WORDS = ("nvidia", "tesla", "geforce", "gtx", "rtx", "radeon", "gpu")


def accelerator_model(text: str | None) -> str:
    """ "nvidia-h100-80gb", "NVIDIA H200", "Tesla K80" -> "h100", "h200", "k80"; no GPU -> "cpu"."""
    lowered = (text or "").lower()
    tokens = re.split(r"[^a-z0-9]+", lowered)
    models = [t for t in tokens if MODEL.match(t)]
    # "AWS p2.xlarge: half a Tesla K80": the model named after a GPU word wins over an instance family.
    named = [t for before, t in itertools.pairwise(tokens) if before in GPU_WORDS and MODEL.match(t)]
    if named or models:
        return (named or models)[0]
    # A GPU of no known model is named as written; anything else (no text, a CPU machine) is a CPU.
    return lowered if any(word in lowered for word in GPU_WORDS) else "cpu"


MACHINE_TYPE = re.compile(r"\b([a-z]\d[a-z]?-[a-z]+-\d+|[a-z]\d[a-z]*\.\d*x?large)\b")  # n1-highcpu-16, c5.4xlarge


def cpu_machine(text: str | None) -> str:
    """A CPU machine's key: "cpu:n1-highcpu-16" where a machine type is named (an 8-core and a 64-core machine of
    one family differ severalfold, so they are not the same "accelerator"), else "cpu"."""
    found = MACHINE_TYPE.search((text or "").lower())
    return f"cpu:{found.group(1)}" if found else "cpu"


@dataclass(frozen=True)
class Sample:
    """One run a planned item can be estimated from."""

    workload: str
    backend: str
    accelerator: str
    first_s: float
    steady_s: float
    train_samples: int | None
    where: str  # "measured NVIDIA-H200 run gpu-suite-jax-default" / "published k80-tensorflow (study)"
    cut_or_superseded: bool = False  # a slice of the data, or a default since replaced: chosen last


@dataclass(frozen=True)
class ItemEstimate:
    workload: str
    backend: str
    seconds: float | None
    factor: float
    basis: str
    count: int = 1  # repeats of this workload and backend in the plan

    @property
    def total(self) -> float:
        return (self.seconds or 0.0) * self.count


@dataclass(frozen=True)
class SuiteEstimate:
    items: tuple[ItemEstimate, ...]

    @property
    def estimated(self) -> list[ItemEstimate]:
        return [i for i in self.items if i.seconds is not None]

    @property
    def seconds(self) -> float:
        return sum(i.total for i in self.items)

    @property
    def low(self) -> float:
        return sum(i.total / i.factor for i in self.items)

    @property
    def high(self) -> float:
        return sum(i.total * i.factor for i in self.items)


def _samples_from_runs(runs: Iterable[Run], origin: str) -> list[Sample]:
    samples = []
    for run in runs:
        if not run.complete or run.steady_median_s is None or run.first_epoch_s is None:
            continue
        gpus = (run.metadata.get("hardware") or {}).get("gpus") or []
        name = gpus[0].get("name") if gpus and isinstance(gpus[0], dict) else None
        data = run.metadata.get("data") or {}
        samples.append(
            Sample(
                workload=run.workload,
                backend=run.config.backend,
                accelerator=accelerator_model(name) if name else cpu_machine(run.config.platform),
                first_s=run.first_epoch_s,
                steady_s=run.steady_median_s,
                train_samples=data.get("train_samples") if isinstance(data.get("train_samples"), int) else None,
                where=f"{origin} {run.config.label} run {run.run_id}",
                cut_or_superseded=bool(run.metadata.get("cut_down") or run.metadata.get("relabelled_from")),
            )
        )
    return samples


def _published_accelerator(hardware: str) -> str:
    """ "1x Tesla K80 + GCE n1-standard-1" -> "k80"; "GCE preemptible n1-highcpu-16" -> "cpu:n1-highcpu-16"."""
    model = accelerator_model(hardware.split(" + ")[0].split("x ")[-1])
    return cpu_machine(hardware) if model == "cpu" else model


def _published_samples() -> list[Sample]:
    """The published studies' per-epoch logs (K80, P100 and CPU runs of 2017)."""
    samples = []
    for study in load_studies().values():
        if study.kind != "epoch-logs":
            continue
        hardware = {c.name: c.hardware for c in study.configs}
        for _, row in published_results(study).results.iterrows():
            if row["steady_epoch_s"] != row["steady_epoch_s"]:  # NaN: a single-epoch log
                continue
            samples.append(
                Sample(
                    workload=str(row["workload"]),
                    backend=str(row["backend"]),
                    accelerator=_published_accelerator(hardware[row["platform"]]),
                    first_s=float(row["first_epoch_s"]),
                    steady_s=float(row["steady_epoch_s"]),
                    train_samples=None,
                    where=f"published {row['config']} ({study.name})",
                )
            )
    return samples


def known_samples(logs: Path) -> list[Sample]:
    """The user's runs, the committed reference runs, then the published ones."""
    samples = _samples_from_runs(load_runs(logs).runs, "measured") if logs.is_dir() else []
    references = logs / REFERENCE_FOLDER
    for folder in sorted(references.iterdir()) if references.is_dir() else []:
        samples += _samples_from_runs(load_runs(folder).runs, "reference")
    return samples + _published_samples()


def _planned(suite: str, workload: str) -> tuple[int, int | None]:
    """Epochs and training-sample cap the suite runs a workload with."""
    workload_spec = spec(workload)
    cut_name = get_suite(suite).cut
    cut = getattr(workload_spec, cut_name) if cut_name else None
    if cut is None:
        return workload_spec.epochs, None
    return cut.epochs, cut.train_limit


def estimate_item(
    workload: str, backend: str, epochs: int, limit: int | None, accelerator: str, samples: Sequence[Sample]
) -> ItemEstimate:
    candidates = [s for s in samples if s.workload == workload]
    if not candidates:
        return ItemEstimate(workload, backend, None, 1.0, "no measured or published run of this workload")
    on_cpu = accelerator.startswith("cpu")

    def distance(s: Sample) -> tuple[bool, bool, bool, bool]:  # the same machine, then the same kind (CPU or GPU)
        return (s.accelerator != accelerator, s.accelerator.startswith("cpu") != on_cpu, s.backend != backend,
                s.cut_or_superseded)  # fmt: skip

    best = min(candidates, key=distance)
    scale = limit / best.train_samples if limit and best.train_samples else 1.0
    seconds = best.first_s + (epochs - 1) * best.steady_s * scale
    same = best.accelerator == accelerator
    factor = SAME_ACCELERATOR_FACTOR if same else OTHER_ACCELERATOR_FACTOR
    basis = f"{best.where}" + ("" if same else f" (a {best.accelerator}, not a {accelerator})")
    return ItemEstimate(workload, backend, seconds, factor, basis)


def estimate_suite(profile: Profile, suite: str, items: Sequence[tuple[str, str]], logs: Path) -> SuiteEstimate:
    samples = known_samples(logs)
    accelerator = accelerator_model(profile.accelerator) if profile.has_gpu else cpu_machine(profile.machine_type)
    counts = Counter(items)  # in plan order; a workload repeated N times is estimated once, counted N times
    return SuiteEstimate(
        tuple(
            replace(estimate_item(w, b, *_planned(suite, w), accelerator, samples), count=n)
            for (w, b), n in counts.items()
        )
    )


def estimate_lines(
    profile: Profile, suite: str, items: Sequence[tuple[str, str]], spot: bool, max_lifetime_s: float, logs: Path
) -> list[str]:
    """The dry run's estimate: time and cost with their range, what each figure came from, and a warning when
    the high end would outlive the machine's self-destruct."""
    estimate = estimate_suite(profile, suite, items, logs)
    lines = [
        f"  {'estimate':<12} {_minutes(estimate.seconds)} of training "
        f"({_minutes(estimate.low)} to {_minutes(estimate.high)}), from the closest runs:"
    ]
    for item in estimate.items:
        figure = "not estimated" if item.seconds is None else f"{item.seconds:,.0f} s (x/÷ {item.factor:g})"
        repeats = f" x{item.count}" if item.count > 1 else ""
        lines.append(f"    {item.workload} [{item.backend}]{repeats}: {figure}: {item.basis}")
    price = profile.hourly_price(spot)
    if price is not None:
        costs = [profile.cost_usd(s, spot=spot) or 0.0 for s in (estimate.seconds, estimate.low, estimate.high)]
        lines.append(
            f"  {'':<12} about ${costs[0]:.2f} (${costs[1]:.2f} to ${costs[2]:.2f}) at ${price.usd_per_hour:.4f}/h; "
            "boot, image pulls and data loading not included"
        )
    missing = sum(i.count for i in estimate.items) - sum(i.count for i in estimate.estimated)
    if missing:
        lines.append(f"  {'':<12} {missing} run(s) not estimated: the totals are lower bounds")
    if estimate.high > max_lifetime_s:
        lines.append(
            f"warning: the estimate reaches {_minutes(estimate.high)}, beyond --max-lifetime "
            f"{max_lifetime_s / 60:.0f} min: the machine would end itself mid-suite (raise --max-lifetime)"
        )
    return lines


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:,.1f} min"
