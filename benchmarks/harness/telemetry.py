"""What the machine did while a run trained: GPU clocks, power, utilisation and throttle reasons through NVML, the
host's load and CPU steal, and per epoch the process's CPU time, garbage-collection pauses and energy.

Nothing here changes a setting: the GPU's clocks and power limits are read, never set. A background thread samples
every `interval_s`; at each epoch's ends (after device synchronization) the epoch timer asks for the counters that
are exact at an instant (NVML's energy counter, RAPL, the process's CPU time, GC totals). Where NVML or RAPL is
missing (no driver, a container without /sys/class/powercap) those parts are null, never guessed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import resource
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from benchmarks.harness.energy import counter_delta, integrate_power, watt_hours
from benchmarks.metadata import GpuUtilization

DEFAULT_INTERVAL_S = 0.2
RAPL_ROOT = Path("/sys/class/powercap")
# NVML's clock-event ("throttle") reason bits, as nvml.h names them.
THROTTLE_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


@dataclass(frozen=True)
class GPUSample:
    sm_clock_mhz: float
    mem_clock_mhz: float
    power_w: float
    utilization_pct: float
    throttle_mask: int


@dataclass
class Sample:
    t: float  # perf_counter seconds
    gpus: list[GPUSample]
    load1: float


@dataclass
class Counters:
    """Readings that are exact at one instant; an epoch is the difference of its end and begin readings."""

    t: float
    gpu_energy_mj: list[int] | None
    rapl_uj: list[int] | None
    cpu_s: float
    involuntary_switches: int
    gc_s: float
    gc_collections: int


@dataclass
class EpochWindow:
    epoch: int
    begin: Counters
    end: Counters | None = None


def visible_gpu_indices(count: int, visible: str | None = None) -> list[int]:
    """NVML indices of the GPUs this process may use: CUDA_VISIBLE_DEVICES when it lists indices, else all."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible
    if not visible:
        return list(range(count))
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if all(e.isdigit() for e in entries):
        return [int(e) for e in entries if int(e) < count]
    return list(range(count))  # UUIDs or MIG names: sample every GPU rather than guess the mapping


def _number(value: float | int | None) -> float:
    return float("nan") if value is None else float(value)


def _spread(values: Sequence[float]) -> dict[str, float] | None:
    values = [v for v in values if v == v]  # NaN: not reported by this GPU
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


class _NVML:
    """The few NVML reads a run needs, over the GPUs this process may use."""

    def __init__(self) -> None:
        import pynvml

        self.nvml = pynvml
        pynvml.nvmlInit()
        self.indices = visible_gpu_indices(pynvml.nvmlDeviceGetCount())
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in self.indices]
        self.max_sm_clock = [
            self._optional(pynvml.nvmlDeviceGetMaxClockInfo, h, pynvml.NVML_CLOCK_SM) for h in self.handles
        ]
        self.has_energy_counter = all(self._energy(h) is not None for h in self.handles)

    def _optional(self, read: Callable[..., Any], *args: Any) -> Any:
        try:
            return read(*args)
        except self.nvml.NVMLError:  # not supported on this GPU or driver
            return None

    def _energy(self, handle: Any) -> int | None:
        millijoules: int | None = self._optional(self.nvml.nvmlDeviceGetTotalEnergyConsumption, handle)
        return millijoules

    def energy_mj(self) -> list[int] | None:
        if not self.has_energy_counter:
            return None
        return [int(self._energy(h) or 0) for h in self.handles]

    def sample(self) -> list[GPUSample]:
        """One reading per GPU; a value the GPU or driver does not report reads as NaN, never stops sampling."""
        nvml = self.nvml
        out = []
        for h in self.handles:
            power = self._optional(nvml.nvmlDeviceGetPowerUsage, h)
            utilization = self._optional(nvml.nvmlDeviceGetUtilizationRates, h)
            out.append(
                GPUSample(
                    sm_clock_mhz=_number(self._optional(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_SM)),
                    mem_clock_mhz=_number(self._optional(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_MEM)),
                    power_w=_number(power) / 1000,
                    utilization_pct=_number(utilization.gpu if utilization is not None else None),
                    throttle_mask=int(self._optional(nvml.nvmlDeviceGetCurrentClocksThrottleReasons, h) or 0),
                )
            )
        return out

    def shutdown(self) -> None:
        self.nvml.nvmlShutdown()


def _rapl_packages(root: Path = RAPL_ROOT) -> list[tuple[Path, int]]:
    """Readable RAPL package domains (intel-rapl:N, not their sub-zones) with their wrap-around values."""
    found = []
    for zone in sorted(root.glob("intel-rapl:*")):
        if zone.name.count(":") != 1:
            continue
        try:
            int((zone / "energy_uj").read_text())
            found.append((zone / "energy_uj", int((zone / "max_energy_range_uj").read_text())))
        except (OSError, ValueError):  # unreadable without root on recent kernels
            continue
    return found


@dataclass
class Telemetry:
    """Context manager sampling the machine during a run; `epoch_begin`/`epoch_end` bracket each epoch."""

    interval_s: float = DEFAULT_INTERVAL_S
    samples: list[Sample] = field(default_factory=list)
    epochs: list[EpochWindow] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._sampling = threading.Event()
        self._sampling.set()
        self._thread: threading.Thread | None = None
        self._nvml: _NVML | None = None
        self._rapl = _rapl_packages()
        self._gc_s = 0.0
        self._gc_collections = 0
        self._gc_started = 0.0
        self._load1_before = os.getloadavg()[0]
        self._cpu_before: Any = None
        self._cpu_after: Any = None
        self._gpus_before: list[GPUSample] = []
        self._details: list[dict[str, Any]] | None = None

    # -- lifecycle -----------------------------------------------------------------------------------------------
    def __enter__(self) -> Telemetry:
        try:
            self._nvml = _NVML()
            self._gpus_before = self._nvml.sample()  # the idle state the run starts from (clocks ramp under load)
        except Exception:  # no driver, no GPU, or no NVML library: host telemetry only
            self._nvml = None
        gc.callbacks.append(self._on_gc)
        self._cpu_before = psutil.cpu_times()
        self._thread = threading.Thread(target=self._run, name="telemetry", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._cpu_after = psutil.cpu_times()
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self._nvml is not None:
            self._nvml.shutdown()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No samples meanwhile: a process waiting for its turn on a shared device (a `process.design` that takes
        turns) must not poll the driver while a sibling's epochs are timed, nor count the sibling's load as its own."""
        self._sampling.clear()
        try:
            yield
        finally:
            self._sampling.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            if not self._sampling.is_set():
                continue
            gpus = self._nvml.sample() if self._nvml is not None else []
            self.samples.append(Sample(t=time.perf_counter(), gpus=gpus, load1=os.getloadavg()[0]))

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self._gc_s += time.perf_counter() - self._gc_started
            self._gc_collections += 1

    # -- epoch brackets ------------------------------------------------------------------------------------------
    def _counters(self) -> Counters:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return Counters(
            t=time.perf_counter(),
            gpu_energy_mj=self._nvml.energy_mj() if self._nvml is not None else None,
            rapl_uj=[int(path.read_text()) for path, _ in self._rapl] or None,
            cpu_s=usage.ru_utime + usage.ru_stime,
            involuntary_switches=usage.ru_nivcsw,
            gc_s=self._gc_s,
            gc_collections=self._gc_collections,
        )

    def epoch_begin(self, epoch: int) -> None:
        self.epochs.append(EpochWindow(epoch=epoch, begin=self._counters()))

    def epoch_end(self, epoch: int) -> None:
        if self.epochs and self.epochs[-1].epoch == epoch:
            self.epochs[-1].end = self._counters()

    # -- summaries -----------------------------------------------------------------------------------------------
    @property
    def has_gpu(self) -> bool:
        return self._nvml is not None and bool(self._nvml.handles)

    @property
    def _gpu_indices(self) -> range:
        return range(len(self._nvml.handles) if self._nvml is not None else 0)

    def _gpu_series(
        self, index: int, attribute: str, start: float = float("-inf"), end: float = float("inf")
    ) -> list[float]:
        """One GPU's readings of `attribute` between `start` and `end`, without the ones it did not report (NaN)."""
        values = [getattr(s.gpus[index], attribute) for s in self.samples if start <= s.t <= end and s.gpus]
        return [v for v in values if v == v]

    def _power_joules(self, index: int, start: float, end: float) -> float | None:
        points = [
            (s.t, s.gpus[index].power_w)
            for s in self.samples
            if s.gpus and s.gpus[index].power_w == s.gpus[index].power_w
        ]
        if not points:
            return None
        times, watts = zip(*points, strict=True)
        return integrate_power(times, watts, start, end)

    def _epoch_gpu_joules(self, window: EpochWindow) -> float | None:
        if not self.has_gpu or window.end is None:
            return None
        before, after = window.begin.gpu_energy_mj, window.end.gpu_energy_mj
        if before is not None and after is not None:
            return sum(counter_delta(b, a) for b, a in zip(before, after, strict=True)) / 1000
        parts = [self._power_joules(i, window.begin.t, window.end.t) for i in self._gpu_indices]
        known = [p for p in parts if p is not None]
        return sum(known) if len(known) == len(parts) else None

    def _epoch_host_joules(self, window: EpochWindow) -> float | None:
        before, after = window.begin.rapl_uj, window.end.rapl_uj if window.end else None
        if before is None or after is None:
            return None
        wraps = [wrap for _, wrap in self._rapl]
        return sum(counter_delta(b, a, w) for b, a, w in zip(before, after, wraps, strict=True)) / 1e6

    def epoch_details(self) -> list[dict[str, Any]]:
        """Per epoch: time, CPU, GC, switches, energy, and on GPUs utilisation and SM clock. Computed once after
        sampling stopped (the summary, the energy block and the stability judgement all read it)."""
        if self._details is None or self._thread is None or self._thread.is_alive():
            self._details = self._epoch_details()
        return self._details

    def _epoch_details(self) -> list[dict[str, Any]]:
        details = []
        for window in self.epochs:
            if window.end is None:
                continue
            begin, end = window.begin, window.end
            row: dict[str, Any] = {
                "epoch": window.epoch,
                "seconds": end.t - begin.t,
                "cpu_s": end.cpu_s - begin.cpu_s,
                "gc_s": end.gc_s - begin.gc_s,
                "gc_collections": end.gc_collections - begin.gc_collections,
                "involuntary_switches": end.involuntary_switches - begin.involuntary_switches,
                "gpu_joules": self._epoch_gpu_joules(window),
                "host_joules": self._epoch_host_joules(window),
            }
            if self.has_gpu:
                util = [v for i in self._gpu_indices for v in self._gpu_series(i, "utilization_pct", begin.t, end.t)]
                clocks = self._gpu_series(0, "sm_clock_mhz", begin.t, end.t)
                row["gpu_utilization_pct"] = statistics.fmean(util) if util else None
                row["sm_clock_mhz"] = statistics.median(clocks) if clocks else None
            details.append(row)
        return details

    def _gpu_summary(self, index: int) -> dict[str, Any]:
        assert self._nvml is not None
        masks = [int(m) for m in self._gpu_series(index, "throttle_mask")]  # bit masks, kept as numbers
        power = self._gpu_series(index, "power_w")
        util = self._gpu_series(index, "utilization_pct")
        reasons = {
            name: sum(1 for m in masks if m & bit) / len(masks)
            for bit, name in THROTTLE_REASONS.items()
            if any(m & bit for m in masks)
        }
        return {
            "index": self._nvml.indices[index],
            "sm_clock_mhz": _spread(self._gpu_series(index, "sm_clock_mhz")),
            "max_sm_clock_mhz": self._nvml.max_sm_clock[index],
            "mem_clock_mhz": _spread(self._gpu_series(index, "mem_clock_mhz")),
            "power_w": _spread(power),
            "utilization_pct": {"mean": statistics.fmean(util), "max": max(util)} if util else None,
            "throttle_reasons": reasons,
            "before": dataclasses.asdict(self._gpus_before[index]) if self._gpus_before else None,
        }

    def _host_summary(self) -> dict[str, Any]:
        summary: dict[str, Any] = {
            "load1_before": self._load1_before,
            "load1_max": max((s.load1 for s in self.samples), default=self._load1_before),
            "cpu_steal_pct": None,
            "cpu_busy_pct": None,
        }
        if self._cpu_before is not None and self._cpu_after is not None:
            delta = {k: getattr(self._cpu_after, k) - getattr(self._cpu_before, k) for k in self._cpu_after._fields}
            total = sum(delta.values())
            if total > 0:
                idle = delta.get("idle", 0.0) + delta.get("iowait", 0.0)
                summary["cpu_busy_pct"] = (total - idle) / total * 100
                summary["cpu_steal_pct"] = delta["steal"] / total * 100 if "steal" in delta else None
        return summary

    def summary(self) -> dict[str, Any]:
        gpus = [self._gpu_summary(i) for i in self._gpu_indices] if self.has_gpu else None
        return {
            "interval_s": self.interval_s,
            "samples": len(self.samples),
            "gpus": gpus,
            "host": self._host_summary(),
            "epochs": self.epoch_details(),
        }

    def energy(self) -> dict[str, Any] | None:
        """Energy per epoch and per run (timed epochs only: data loading and compilation outside them are not
        counted); None where neither the GPU nor the host can be read."""
        details = self.epoch_details()
        gpu = [d["gpu_joules"] for d in details]
        host = [d["host_joules"] for d in details]
        gpu_total = sum(gpu) if gpu and all(j is not None for j in gpu) else None
        host_total = sum(host) if host and all(j is not None for j in host) else None
        if gpu_total is None and host_total is None:
            return None
        method = None
        if gpu_total is not None:
            method = "nvml-energy-counter" if self._nvml and self._nvml.has_energy_counter else "nvml-power-samples"
        return {
            "gpu_joules": gpu_total,
            "gpu_wh": watt_hours(gpu_total) if gpu_total is not None else None,
            "gpu_joules_per_epoch": gpu if gpu_total is not None else [],
            "gpu_method": method,
            "host_joules": host_total,
            "host_wh": watt_hours(host_total) if host_total is not None else None,
            "host_method": "rapl" if host_total is not None else None,
        }

    def gpu_utilization(self) -> GpuUtilization | None:
        """The older summary (busiest GPU's utilisation), kept for logs and reports that read it."""
        if not self.has_gpu:
            return None
        busiest = [max(g.utilization_pct for g in s.gpus) for s in self.samples if s.gpus]
        busiest = [u for u in busiest if u == u]
        if not busiest:
            return None
        return GpuUtilization(statistics.fmean(busiest), max(busiest), len(busiest), self.interval_s)
