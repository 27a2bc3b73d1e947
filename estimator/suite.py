"""How long a suite will take on a machine profile, and what it will cost, before renting it.

Each planned workload x backend is one run: its training time (estimator.model: measured throughput scaled
to the planned samples and epochs, the first epoch's compilation apart; from measured, published or related
hardware runs, in that order), plus the time the same runs spent outside their epochs (data, model). Its
range is the 5th to 95th percentile of actual / predicted that `python -m report backtest` finds for the basis
the figure came from. The machine's start (boot, host preparation, image pull, and a container start per run:
each workload x backend runs in its own container) is added once, from the assumed figures of data/estimate.toml.
Nothing comparable: no figure, and the totals are lower bounds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from benchmarks.workload_set import Workload, Workloads, built_in
from estimator import physics
from estimator.backtest import Band, committed_bands
from estimator.basis import measured, reference_basis
from estimator.model import (
    Fit,
    Observation,
    Prediction,
    Target,
    accelerator_model,
    cpu_machine,
    fits,
    machine_kind,
    outside_epochs_s,
    predict,
    published_observations,
    shaped,
)
from estimator.parallel import Scale, scaled
from estimator.plugin_scaling import BASIS as SCALED
from estimator.plugin_scaling import scaled_by_builtins
from estimator.workload_plan import UnknownSize, estimate_data, planned
from records.catalog import Profile

__all__ = [
    "Shape",
    "SuiteEstimate",
    "accelerator_model",
    "cpu_machine",
    "estimate_suite",
    "profile_machine",
    "suite_lines",
]
# A host reached over SSH may be fresh (a pod rented by the hour): nothing boots, but the image travels to it before
# the first run as to a rented machine. This machine (local) has the image built already.
NO_BOOT = ("ssh", "local")
NO_PULL = ("local",)


@dataclass(frozen=True)
class Shape:
    """What the runner is told beyond the suite (its --epochs, --train-limit, --gpus and --batch-policy flags)."""

    epochs: int | None = None
    train_limit: int | None = None
    devices: int = 1  # per node: one process over them, or (on several nodes) a process each
    per_device_batch: bool = False  # --batch-policy per-device: each device takes the published batch
    nodes: int = 1  # a batch scheduler's nodes per run (--nodes)

    @property
    def scale(self) -> Scale:
        return Scale(self.devices, self.nodes)

    def machine(self, model: str) -> str:
        return shaped(model, self.devices, self.nodes)

    def batch(self, published: int) -> int:
        return published * self.scale.processes if self.per_device_batch else published


@dataclass(frozen=True)
class ItemEstimate:
    workload: str
    backend: str
    seconds: float | None  # one run: training plus the time outside its epochs; None: nothing comparable
    low: float | None
    high: float | None
    basis: str  # "measured", "published", "hardware", or why there is no figure
    where: str = ""
    count: int = 1  # repeats of this workload and backend in the plan

    @property
    def total(self) -> float:
        return (self.seconds or 0.0) * self.count

    @property
    def total_low(self) -> float:
        return (self.low or 0.0) * self.count

    @property
    def total_high(self) -> float:
        return (self.high or 0.0) * self.count


@dataclass(frozen=True)
class Start:
    """Machine time before the first run: each part named with its figure."""

    parts: tuple[tuple[str, float], ...]
    source: str

    @property
    def seconds(self) -> float:
        return sum(seconds for _, seconds in self.parts)


@dataclass(frozen=True)
class SuiteEstimate:
    items: tuple[ItemEstimate, ...]
    start: Start

    @property
    def estimated(self) -> list[ItemEstimate]:
        return [i for i in self.items if i.seconds is not None]

    @property
    def planned(self) -> int:
        """Container runs planned (each repeat one)."""
        return sum(i.count for i in self.items)

    @property
    def unestimated(self) -> int:
        """Planned runs with nothing comparable: the totals leave them out, so they are lower bounds."""
        return sum(i.count for i in self.items if i.seconds is None)

    @property
    def lower_bound(self) -> str:
        """What a total that leaves runs out says of itself, or "" when nothing was left out."""
        if not self.unestimated:
            return ""
        return f"a lower bound: {self.unestimated} of {self.planned} run(s) not estimated"

    @property
    def runs(self) -> float:
        return sum(i.total for i in self.items)

    @property
    def seconds(self) -> float:
        return self.runs + self.start.seconds

    @property
    def low(self) -> float:
        return sum(i.total_low for i in self.items) + self.start.seconds

    @property
    def high(self) -> float:
        return sum(i.total_high for i in self.items) + self.start.seconds


def profile_machine(profile: Profile) -> str:
    return accelerator_model(profile.accelerator) if profile.has_gpu else cpu_machine(profile.machine_type)


def machine_start(profile: Profile, runs: int, carried_bytes: int = 0) -> Start:
    """`carried_bytes`: the user's data folder (`run --data-dir`), counted at the image's assumed transfer rate
    where the image pull is counted (a rented machine), since both travel before the first run."""
    data = estimate_data()["start"]
    parts: list[tuple[str, float]] = []
    image_gb, rate = data["image_gb"][profile.docker_image], data["pull_mb_per_s"]
    if profile.provider not in NO_BOOT:
        parts += [
            ("boot", float(data["boot_s"].get(profile.provider, max(data["boot_s"].values())))),
            ("host preparation", float(data["prepare_s"].get(profile.provider, max(data["prepare_s"].values())))),
        ]
    if profile.provider not in NO_PULL:
        fresh = " on a fresh host; none where the image is there" if profile.provider in NO_BOOT else ""
        parts.append((f"image pull ({image_gb:g} GB at {rate} MB/s{fresh})", image_gb * 1000 / rate))
        if carried_bytes:
            parts.append((f"data folder ({carried_bytes / 1e6:.3g} MB at {rate} MB/s)", carried_bytes / 1e6 / rate))
    parts.append((f"{runs} container start(s)", float(runs * data["run_start_s"])))
    return Start(tuple(parts), str(data["source"]))


def estimate_item(
    target: Target,
    pool: Sequence[Observation],
    fitted: dict[str, Fit],
    bands: dict[str, Band],
    rates: Mapping[tuple[str, str], physics.Fitted],
    logs: Path,
) -> ItemEstimate:
    """The target machine's own runs (measured, published), else the physics basis (the workload's step costs at the
    GPU's rates for its backend), else the nearest machine's runs of the same backend scaled by its speed figure,
    else the physics basis at another backend's rates (TensorFlow has no GPU runs of its own)."""
    found = predict(target, pool, fitted, hardware=False) or _physics(target, "", rates, logs, borrow=False)
    found = found or predict(target, pool, fitted) or _physics(target, "", rates, logs)
    if found is None:
        kind = "CPU" if machine_kind(target.machine) == "cpu" else "GPU"
        why = f"not estimated: nothing comparable (no run of it on {target.machine}, nor on a {kind} to relate to)"
        if kind == "GPU" and target.machine not in physics.peaks():
            why += f", and {target.machine} has no datasheet peak in report/data/gpu_peaks.toml"
        return ItemEstimate(target.workload, target.backend, None, None, None, why)
    return _item(target, found, bands, pool)


def _physics(
    target: Target, code: str, rates: Mapping[tuple[str, str], physics.Fitted], logs: Path, borrow: bool = True
) -> Prediction | None:
    costs = physics.costs_of(target.workload, code, logs)
    return None if costs is None else physics.predict(target, costs, rates, borrow)


def _item(target: Target, found: Prediction, bands: dict[str, Band], pool: Sequence[Observation]) -> ItemEstimate:
    outside = (
        found.outside_s if found.outside_s is not None else outside_epochs_s(target.workload, target.backend, pool)
    )
    band = bands.get(found.basis)
    if band is None:  # the backtest had too few runs of this basis to give it a range
        low, high, where = found.seconds, found.seconds, f"{found.where}; no range: too few backtested runs"
    else:
        low, high, where = found.seconds * band.low, found.seconds * band.high, found.where
    return ItemEstimate(
        target.workload, target.backend, found.seconds + outside, low + outside, high + outside, found.basis, where
    )


def estimate_plugin_item(
    target: Target,
    pool: Sequence[Observation],
    fitted: dict[str, Fit],
    bands: dict[str, Band],
    code: str,
    rates: Mapping[tuple[str, str], physics.Fitted],
    logs: Path,
) -> ItemEstimate:
    """A user's workload file: its runs of the same content measured on the target machine; else, on a GPU, the
    physics basis from its step costs (logs/step-costs/, measured before the dry run); else its own measured
    throughput on another machine scaled by the built-ins' measured ratio (estimator.plugin_scaling); else the
    estimator's other bases, as for a built-in workload."""
    same_code = [o for o in pool if o.code == code or o.workload != target.workload]
    found = predict(target, same_code, fitted, hardware=False) or _physics(target, code, rates, logs)
    if found is not None:
        return _item(target, found, bands, same_code)
    scaled = scaled_by_builtins(target, same_code, code, bands.get("hardware"))
    if scaled is None:
        found_item = estimate_item(target, same_code, fitted, bands, {}, logs)
        if found_item.seconds is None and machine_kind(target.machine) == "gpu":
            return replace(found_item, basis=found_item.basis + f"; no step costs of {target.workload} in "
                           f"{logs}/step-costs/ (python -m benchmarks step-costs --workload-file ...)")  # fmt: skip
        return found_item
    outside = outside_epochs_s(target.workload, target.backend, same_code)
    return ItemEstimate(
        target.workload,
        target.backend,
        scaled.seconds + outside,
        scaled.low + outside,
        scaled.high + outside,
        SCALED,
        scaled.where,
    )


def estimate_suite(
    profile: Profile,
    suite: str,
    items: Sequence[tuple[str, str]],
    logs: Path,
    shape: Shape = Shape(),
    carried_bytes: int = 0,
    workloads: Workloads | None = None,
) -> SuiteEstimate:
    """`items`' workloads are the built-in ones and those of `workloads` (the run's: a user's workload files)."""
    machine = shape.machine(profile_machine(profile))
    start = machine_start(profile, len(items), carried_bytes)
    base = profile_machine(profile)
    return SuiteEstimate(estimate_runs(machine, suite, items, logs, shape, workloads, base_machine=base), start)


def estimate_runs(
    machine: str,
    suite: str,
    items: Sequence[tuple[str, str]],
    logs: Path,
    shape: Shape = Shape(),
    workloads: Workloads | None = None,
    basis: Basis | None = None,
    base_machine: str | None = None,
) -> tuple[ItemEstimate, ...]:
    """Each planned run's estimate on `machine` (an estimate_model machine key: "h100", "rtx4090x2", ...); a run
    on several devices or nodes that nothing measured at that scale is scaled from one device of `base_machine`
    (estimator.parallel)."""
    known = workloads or built_in()
    basis = basis or basis_of(logs)
    pool, fitted, bands, rates = basis.pool, basis.fitted, basis.bands, basis.rates
    counts = Counter(items)  # in plan order; a workload repeated N times is estimated once, counted N times
    estimates = []
    for (name, backend), count in counts.items():
        workload = known[name]
        try:
            epochs, samples = planned(suite, workload, shape.epochs, shape.train_limit)
        except UnknownSize as exc:
            estimates.append(ItemEstimate(name, backend, None, None, None, f"not estimated: {exc}", count=count))
            continue
        batch = shape.batch(workload.spec.batch_size)
        target = Target(name, backend, machine, batch, samples, epochs)
        if workload.built_in:
            found = estimate_item(target, pool, fitted, bands, rates, logs)
        else:
            found = estimate_plugin_item(target, pool, fitted, bands, workload.sha256, rates, logs)
        if found.seconds is None and shape.scale.parallel and base_machine is not None:
            found = _scaled_item(found, target, base_machine, shape, basis, workload)
        estimates.append(replace(found, count=count))
    return tuple(estimates)


def _scaled_item(
    unscaled: ItemEstimate, target: Target, base_machine: str, shape: Shape, basis: Basis, workload: Workload
) -> ItemEstimate:
    """The run scaled from one device by the nearest measured speed-up; else the unscaled one, saying why not."""
    pool, fitted, bands, rates, logs = basis.pool, basis.fitted, basis.bands, basis.rates, basis.logs

    def one_device(one: Target) -> ItemEstimate:
        if workload.built_in:
            return estimate_item(one, pool, fitted, bands, rates, logs)
        return estimate_plugin_item(one, pool, fitted, bands, workload.sha256, rates, logs)

    found = scaled(target, base_machine, shape.scale, shape.per_device_batch, pool, one_device)
    if isinstance(found, str):
        return replace(unscaled, basis=f"{unscaled.basis}; {found}")
    return ItemEstimate(target.workload, target.backend, found.seconds, found.low, found.high, found.basis, found.where)


@dataclass(frozen=True)
class Basis:
    """What estimates from one log root are made from: its runs with the committed and the published ones, the
    hardware relation, the backtested ranges and the GPUs' rates. Made once where many estimates are asked for (a
    report, own or rent's machines)."""

    logs: Path
    pool: list[Observation]
    fitted: dict[str, Fit]
    bands: dict[str, Band]
    rates: dict[tuple[str, str], physics.Fitted]


def basis_of(logs: Path) -> Basis:
    pool = [*measured(logs), *published_observations()]
    return Basis(logs, pool, fits(pool), committed_bands(), physics_rates(tuple(pool)))


def steady_epoch(
    basis: Basis, machine: str, workload: str, backend: str, batch: int, samples: int, code: str = ""
) -> tuple[float, float, float, str, str] | None:
    """One steady epoch of `samples` on `machine` (seconds, low, high, basis, where), as a second epoch adds it to
    the first: the time a measured steady epoch elsewhere compares with. None where nothing estimates it. `code`:
    a workload file's content hash (its runs and step costs)."""

    def item(epochs: int) -> ItemEstimate:
        target = Target(workload, backend, machine, batch, samples, epochs)
        if code:
            return estimate_plugin_item(target, basis.pool, basis.fitted, basis.bands, code, basis.rates, basis.logs)
        return estimate_item(target, basis.pool, basis.fitted, basis.bands, basis.rates, basis.logs)

    one, two = item(1), item(2)
    if one.seconds is None or two.seconds is None or one.low is None or two.low is None:
        return None
    assert one.high is not None and two.high is not None
    return two.seconds - one.seconds, two.low - one.low, two.high - one.high, two.basis, two.where


@cache
def physics_rates(pool: tuple[Observation, ...]) -> dict[tuple[str, str], physics.Fitted]:
    """The GPUs' rates (estimator.physics): those shipped with the estimator, fitted on the committed reference runs,
    unless `pool` holds other GPU runs of the built-in workloads (the user's), then fitted on every run given."""
    if {o for o in pool if physics.usable(o)} <= _shipped_runs():
        return physics.shipped().fitted
    return physics.table(pool, physics.builtin_costs())


@cache
def _shipped_runs() -> frozenset[Observation]:
    return frozenset(o for o in reference_basis() if physics.usable(o))


def suite_lines(estimate: SuiteEstimate, profile: Profile, spot: bool, max_lifetime_s: float) -> list[str]:
    """The estimate as every dry run prints it (attached, detached, scheduled): time and cost with their range,
    what each figure came from, and a warning when the high end would outlive the machine's self-destruct. Runs
    with nothing comparable count as nothing, so the totals then say they are lower bounds, with no high end."""
    start = estimate.start
    parts = f"{_minutes(estimate.runs)} of runs, {_minutes(start.seconds)} to start the machine and containers"
    if estimate.unestimated:
        total = f"at least {_minutes(estimate.seconds)} ({estimate.lower_bound}): {parts}"
    else:
        total = f"{_minutes(estimate.seconds)} ({_minutes(estimate.low)} to {_minutes(estimate.high)}): {parts}"
    lines = [
        f"  {'estimate':<12} {total}",
        f"  {'':<12} start: " + ", ".join(f"{name} {seconds:,.0f} s" for name, seconds in start.parts)
        + f" ({start.source})",
    ]  # fmt: skip
    for item in estimate.items:
        repeats = f" x{item.count}" if item.count > 1 else ""
        if item.seconds is None:
            lines.append(f"    {item.workload} [{item.backend}]{repeats}: {item.basis}")
            continue
        figure = f"{item.seconds:,.0f} s ({item.low:,.0f} to {item.high:,.0f} s)"
        lines.append(f"    {item.workload} [{item.backend}]{repeats}: {figure}, {item.basis}: {item.where}")
    lines.append(
        f"  {'':<12} ranges: the 5th-95th percentile of actual / predicted for each basis (python -m report backtest)"
    )
    price = profile.hourly_price(spot)
    if price is not None:
        costs = [profile.cost_usd(s, spot=spot) or 0.0 for s in (estimate.seconds, estimate.low, estimate.high)]
        if estimate.unestimated:
            cost = f"at least ${costs[0]:.2f} ({estimate.lower_bound})"
        else:
            cost = f"about ${costs[0]:.2f} (${costs[1]:.2f} to ${costs[2]:.2f})"
        lines.append(f"  {'':<12} {cost} at ${price.usd_per_hour:.4f}/h")
    if estimate.high > max_lifetime_s:
        lines.append(
            f"warning: the estimate reaches {_minutes(estimate.high)}, beyond --max-lifetime "
            f"{max_lifetime_s / 60:.0f} min: the machine would end itself mid-suite (raise --max-lifetime)"
        )
    return lines


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:,.1f} min"
