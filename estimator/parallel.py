"""A run on N GPUs or N nodes that nothing measured at that scale: its one-device estimate, its steady epochs sped
up by the speed-up measured at that scale for the nearest kind of workload, and said so.

    resnet50 [jax]: 96 s (61 to 190 s), measured, scaled for 2 nodes x 4 GPUs: x5.90, the median measured
    speed-up of convolutional workloads at 2 nodes x 4 GPUs, per-device batch (x5.62 to x6.31: cifar10_cnn [jax]
    on h200, mnist_cnn [jax] on h200)

A speed-up is a configuration's median throughput over the median of the same workload, backend and machine on
one device, in the runs the estimator reads (the user's logs and the committed reference runs), for the batch
policy the plan asks (the same global batch, or the published batch on every device). The nearest kind is the
workload's own kind (KINDS) where one was measured at that scale, else every kind's (a user's own workload has no
kind here); the same machine first, then
any of the same kind (GPU or CPU). Where nothing was measured at that many devices and nodes, the nearest scale's
parallel efficiency (speed-up / processes) is assumed at this one, and the estimate says so. Only the steady epochs
are sped up: the first epoch's compile and the time outside the epochs are one device's. The range spans the
lowest and the highest speed-up used, on top of the one-device estimate's own range.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from benchmarks.workloads import LSTM_WORKLOADS
from estimator.model import Observation, Target, machine_kind

KINDS: dict[str, str] = {
    "mnist_mlp": "dense",
    "imdb_fasttext": "dense",
    "mnist_cnn": "convolutional",
    "cifar10_cnn": "convolutional",
    "resnet50": "convolutional",
    "gpt_nietzsche": "transformer",
    **{workload: "recurrent" for workload in LSTM_WORKLOADS},
}
SAMPLE_TOLERANCE = 0.05  # a base run's samples per epoch within 5 % (an even split drops a few)


@dataclass(frozen=True)
class Scale:
    """Devices per node and nodes: each process on one device across nodes, one process over them on one node."""

    devices: int = 1
    nodes: int = 1

    @property
    def processes(self) -> int:
        return self.devices * self.nodes

    @property
    def parallel(self) -> bool:
        return self.processes > 1

    def text(self) -> str:
        unit = "device" if self.devices == 1 else "devices"
        return f"{self.nodes} nodes x {self.devices} {unit}" if self.nodes > 1 else f"{self.devices} {unit}"


@dataclass(frozen=True)
class Speedup:
    workload: str
    backend: str
    machine: str  # the base machine
    scale: Scale
    per_device: bool  # the published batch on every device (else the same global batch, split)
    value: float

    @property
    def kind(self) -> str | None:
        return KINDS.get(self.workload)

    def text(self) -> str:
        return f"{self.workload} [{self.backend}] on {self.machine}"


def kind_of(workload: str) -> str | None:
    """A built-in workload's kind; None for a user's own (its model is not read before the run)."""
    return KINDS.get(workload)


def measured_speedups(pool: Sequence[Observation]) -> list[Speedup]:
    """Every measured configuration on several devices or nodes against its one-device base."""
    groups: dict[tuple[str, str, str, int, int, int], list[Observation]] = defaultdict(list)
    for o in pool:
        if o.origin == "measured":
            groups[(o.workload, o.backend, o.base_machine or o.machine, o.devices, o.nodes, o.batch)].append(o)
    found = []
    for (workload, backend, machine, devices, nodes, batch), runs in groups.items():
        scale = Scale(devices, nodes)
        if not scale.parallel:
            continue
        for per_device, base_batch in ((False, batch), (True, batch // scale.processes)):
            base = [
                o
                for o in groups.get((workload, backend, machine, 1, 1, base_batch), [])
                if abs(o.samples / runs[0].samples - 1) <= SAMPLE_TOLERANCE
            ]
            if base and (not per_device or batch == base_batch * scale.processes):
                throughput = statistics.median(o.throughput for o in runs)
                value = throughput / statistics.median(o.throughput for o in base)
                found.append(Speedup(workload, backend, machine, scale, per_device, value))
    return found


@dataclass(frozen=True)
class Chosen:
    value: float
    low: float
    high: float
    where: str


def nearest(workload: str, machine: str, scale: Scale, per_device: bool, speedups: Sequence[Speedup]) -> Chosen | None:
    """The speed-up to scale `workload` on `machine` to `scale` by, with what it came from; None where no run of
    the plan's batch policy was measured on several devices or nodes of a machine of the same kind."""
    kind = kind_of(workload)
    usable = [
        s
        for s in speedups
        if s.per_device == per_device
        and (s.scale.nodes > 1) == (scale.nodes > 1)  # across nodes, or within one machine: not the same network
        and machine_kind(s.machine) == machine_kind(machine)
    ]
    if not usable:
        return None
    own_kind = [s for s in usable if kind is not None and s.kind == kind]
    of_kind, kind_text = (own_kind, f"{kind} workloads") if own_kind else (usable, "every kind measured")
    if not own_kind:
        kind_text += f" (no {kind or 'workload of its kind'} measured so)"
    at_scale = [s for s in of_kind if s.scale == scale]
    assumed = ""
    if not at_scale:  # the nearest scale measured: its parallel efficiency assumed at this one
        closest = min(of_kind, key=lambda s: (abs(s.scale.processes - scale.processes), s.scale.processes))
        at_scale = [s for s in of_kind if s.scale == closest.scale]
        ratio = scale.processes / closest.scale.processes
        at_scale = [replace(s, value=s.value * ratio, scale=scale) for s in at_scale]
        assumed = f"; nothing measured at {scale.text()}: the efficiency measured at {closest.scale.text()} assumed"
    same_machine = [s for s in at_scale if s.machine == machine]
    used = same_machine or at_scale
    values = [s.value for s in used]
    policy = "per-device batch" if per_device else "same global batch"
    median = statistics.median(values)
    spread = f"x{min(values):.2f} to x{max(values):.2f}: " if len(values) > 1 else ""
    where = (
        f"x{median:.2f}, the median measured speed-up of {kind_text} at {scale.text()}, {policy} "
        f"({spread}{', '.join(s.text() for s in used)}){assumed}"
    )
    return Chosen(median, min(values), max(values), where)


class ItemLike(Protocol):
    """What this module reads of an estimate (estimator.suite.ItemEstimate, which imports this module)."""

    @property
    def seconds(self) -> float | None: ...
    @property
    def low(self) -> float | None: ...
    @property
    def high(self) -> float | None: ...
    @property
    def basis(self) -> str: ...
    @property
    def where(self) -> str: ...


@dataclass(frozen=True)
class Scaled:
    seconds: float
    low: float
    high: float
    basis: str
    where: str


def scaled(
    target: Target,
    base_machine: str,
    scale: Scale,
    per_device: bool,
    pool: Sequence[Observation],
    estimate: Callable[[Target], ItemLike],
) -> Scaled | str:
    """`target` at `scale` from its one-device estimate on `base_machine` (`estimate`, the suite's), its steady
    epochs sped up by the nearest measured speed-up; else why not, as a phrase."""
    chosen = nearest(target.workload, base_machine, scale, per_device, measured_speedups(pool))
    if chosen is None:
        policy = "per-device" if per_device else "same-global"
        return f"no run measured on several {'nodes' if scale.nodes > 1 else 'devices'} ({policy}) to scale by"
    one = replace(target, machine=base_machine, batch=target.batch // scale.processes if per_device else target.batch)
    middle, fastest, slowest = (estimate(replace(one, speedup=v)) for v in (chosen.value, chosen.high, chosen.low))
    if middle.seconds is None or fastest.low is None or slowest.high is None:
        return f"no one-device estimate to scale ({middle.basis})"
    return Scaled(
        middle.seconds,
        fastest.low,
        slowest.high,
        f"{middle.basis}, scaled for {scale.text()}",
        f"{middle.where}; {chosen.where}",
    )
