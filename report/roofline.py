"""Where the time goes: a GPU run against its GPU's roofline, for whatever GPUs the runs name.

A run's GPU is the datasheet (report/data/datasheet.toml) whose board names the GPU its metadata records
(`hardware.gpus[0].name`), never its folder or run id; a run on a GPU without a datasheet is left out.

- *flops per epoch*: the workload's model FLOPs per training sample (report/data/model_costs.toml: XLA's cost
  analysis of the Keras train step, report.model_costs) times the samples one device trains on per epoch. The
  validation pass is in the epoch's time but not in its flops, so every rate is a lower bound. Bytes likewise.
- *achieved TFLOP/s* = flops per epoch / steady epoch seconds (the median of the run's steady epochs), and its share
  of the device's measured float32 GEMM peak (`fingerprint.gemm_tflops`) and of its datasheet peak at the run's
  matmul precision.
- *GPU busy*: 1 - the run's `stability.host_share`; the compute and memory floors are the least GPU time the
  epoch's arithmetic and traffic need at the measured peak and bandwidth.

Bound-by rule, per row (the median over its runs): *host* when the GPU sat idle more than half of the steady epochs
(benchmarks.stability's host-bound share); otherwise *memory* when the arithmetic intensity (flops / bytes) lies
below the measured ridge point (measured GEMM peak / measured memory bandwidth), else *compute*.
"""

from __future__ import annotations

import statistics
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.metadata import RunMetadata
from benchmarks.stability import HOST_BOUND_SHARE
from report.charts import BACKEND_COLOURS, OTHER_COLOUR, save_figure
from report.model_costs import ModelCost

DATASHEET_FILE = Path(__file__).parent / "data" / "datasheet.toml"
HOST, MEMORY, COMPUTE = "host", "memory", "compute"


@dataclass(frozen=True)
class Datasheet:
    gpu: str
    names: list[str]
    board: str
    bf16_tflops: float
    tf32_tflops: float
    fp32_tflops: float
    memory_tbps: float
    source: str

    def peak_tflops(self, float32_matmul: str | None) -> float:
        """The datasheet peak at the precision the run's float32 matmuls used."""
        return self.tf32_tflops if float32_matmul == "tf32" else self.fp32_tflops


def load_datasheets(path: Path = DATASHEET_FILE) -> dict[str, Datasheet]:
    return {gpu: Datasheet(gpu=gpu, **entry) for gpu, entry in tomllib.loads(path.read_text()).items()}


@dataclass(frozen=True)
class Run:
    epoch_s: float  # steady-epoch median
    samples: float  # trained per device per epoch
    host_share: float | None
    gemm_tflops: float | None
    memory_gbps: float | None
    float32_matmul: str | None
    device_name: str


@dataclass(frozen=True)
class Row:
    gpu: str
    workload: str
    backend: str
    runs: int
    epoch_s: float
    samples: float  # trained per device per epoch
    tflops: float  # achieved
    gemm_tflops: float  # measured peak
    datasheet_tflops: float
    memory_gbps: float  # achieved traffic
    peak_memory_gbps: float  # measured
    intensity: float  # flops per byte
    busy: float | None  # share of the epoch the GPU ran kernels
    compute_floor: float  # share of the epoch the arithmetic needs at the measured peak
    memory_floor: float  # share of the epoch the traffic needs at the measured bandwidth
    bound: str


def run_of(meta: RunMetadata, steady: Sequence[float]) -> Run:
    devices = int((meta.distribution or {}).get("devices") or 1)
    fp = meta.fingerprint
    gpus = meta.hardware.get("gpus") or [{}]
    return Run(
        epoch_s=statistics.median(steady),
        samples=(meta.data.train_samples or 0) / devices,
        host_share=meta.stability.host_share if meta.stability else None,
        gemm_tflops=fp.gemm_tflops if fp else None,
        memory_gbps=fp.device_memory_gbps if fp else None,
        float32_matmul=meta.settings.float32_matmul,
        device_name=str(gpus[0].get("name", "")),
    )


def gpu_of(meta: RunMetadata, sheets: dict[str, Datasheet]) -> str | None:
    """The datasheet key of the GPU the run's metadata names; None for a run on no GPU or on one without a sheet."""
    gpus = meta.hardware.get("gpus") or []
    name = str(gpus[0].get("name", "")) if gpus else ""
    return next((key for key, sheet in sheets.items() if name and name in sheet.names), None)


def measured(
    runs: Iterable[tuple[RunMetadata, Sequence[float]]], sheets: dict[str, Datasheet]
) -> dict[tuple[str, str, str], list[Run]]:
    """(gpu, workload, backend) -> the runs (metadata, steady epoch seconds) on a GPU with a datasheet."""
    found: dict[tuple[str, str, str], list[Run]] = {}
    for meta, steady in runs:
        gpu = gpu_of(meta, sheets)
        if gpu is not None and steady and meta.data.train_samples:
            found.setdefault((gpu, meta.workload, meta.backend), []).append(run_of(meta, steady))
    return found


def bound_by(host_share: float | None, intensity: float, ridge: float) -> str:
    if host_share is not None and host_share > HOST_BOUND_SHARE:
        return HOST
    return MEMORY if intensity < ridge else COMPUTE


def make_row(gpu: str, workload: str, backend: str, runs: Sequence[Run], cost: ModelCost, sheet: Datasheet) -> Row:
    def median(values: Sequence[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return statistics.median(known) if known else None

    epoch_s = statistics.median(r.epoch_s for r in runs)
    samples = statistics.median(r.samples for r in runs)
    flops = cost.flops_per_step / cost.batch_size * samples
    traffic = cost.bytes_per_step / cost.batch_size * samples
    gemm = median([r.gemm_tflops for r in runs]) or sheet.peak_tflops(runs[0].float32_matmul)
    bandwidth = median([r.memory_gbps for r in runs]) or sheet.memory_tbps * 1e3
    host_share = median([r.host_share for r in runs])
    intensity = flops / traffic
    return Row(
        gpu=gpu,
        workload=workload,
        backend=backend,
        runs=len(runs),
        epoch_s=epoch_s,
        samples=samples,
        tflops=flops / epoch_s / 1e12,
        gemm_tflops=gemm,
        datasheet_tflops=sheet.peak_tflops(runs[0].float32_matmul),
        memory_gbps=traffic / epoch_s / 1e9,
        peak_memory_gbps=bandwidth,
        intensity=intensity,
        busy=None if host_share is None else 1 - host_share,
        compute_floor=flops / (gemm * 1e12) / epoch_s,
        memory_floor=traffic / (bandwidth * 1e9) / epoch_s,
        bound=bound_by(host_share, intensity, gemm * 1e3 / bandwidth),
    )


def rows_of(
    found: dict[tuple[str, str, str], list[Run]], costs: dict[str, ModelCost], sheets: dict[str, Datasheet]
) -> list[Row]:
    """One row per measured (gpu, workload, backend) that has a model cost and a datasheet."""
    out = []
    for (gpu, workload, backend), runs in sorted(found.items()):
        if workload in costs and gpu in sheets:
            check_board(sheets[gpu], runs)
            out.append(make_row(gpu, workload, backend, runs, costs[workload], sheets[gpu]))
    return out


def check_board(sheet: Datasheet, runs: Sequence[Run]) -> None:
    """The datasheet must be the board the logs name (an H100 PCIe has other peaks than the SXM)."""
    other = {r.device_name for r in runs} - set(sheet.names)
    if other:
        raise ValueError(f"datasheet {sheet.gpu}: logs name {', '.join(sorted(other))}, not {sheet.board}")


def pct(share: float | None) -> str:
    if share is None:
        return "n/a"
    return f"{share * 100:.0f} %" if share >= 0.01 else f"{share * 100:.2f} %"


def rate(value: float) -> str:
    return f"{value:.3g}"


def advice(workload_rows: Sequence[Row]) -> str:
    """In words, from the numbers: whether a faster GPU would shorten this workload's epochs."""
    busy = [r.busy for r in workload_rows if r.busy is not None]
    hosts = sum(r.bound == HOST for r in workload_rows)
    most = max(busy, default=0.0)
    floor = max(r.compute_floor for r in workload_rows)
    memory = max(r.memory_floor for r in workload_rows)
    if hosts * 2 > len(workload_rows):
        return (
            f"no: {hosts} of {len(workload_rows)} GPU and backend pairs are host-bound; the GPU is busy at most "
            f"{pct(most)} of an epoch, so even a GPU that took no time would save at most that (the arithmetic "
            f"needs {pct(floor)} or less at the measured peak, the traffic {pct(memory)} or less). A faster host "
            "loop (compiled epochs, more steps per execution) would."
        )
    if max(floor, memory) * 2 < most:
        return (
            f"little: the GPU is busy up to {pct(most)} of an epoch, but the arithmetic needs {pct(floor)} or less "
            f"of it at the measured GEMM peak and the traffic {pct(memory)} or less at the measured bandwidth; the "
            "rest of the busy time is many small kernels, which more FLOP/s or bandwidth barely shortens."
        )
    return (
        f"yes, up to {pct(most)} of an epoch: the GPU is busy that long and its floors (arithmetic {pct(floor)}, "
        f"traffic {pct(memory)}) fill much of it, so a GPU with more {'bandwidth' if memory > floor else 'FLOP/s'} "
        "shortens the epoch."
    )


TEXT_COLUMNS = frozenset({"workload", "backend", "GPU", "bound by"})


def cells(r: Row) -> dict[str, str]:
    return {
        "workload": r.workload, "backend": r.backend, "GPU": r.gpu, "runs": str(r.runs),
        "steady epoch s": f"{r.epoch_s:.2f}", "achieved TFLOP/s": rate(r.tflops),
        "% measured": pct(r.tflops / r.gemm_tflops), "% datasheet": pct(r.tflops / r.datasheet_tflops),
        "flops/byte": f"{r.intensity:.1f}", "GB/s": f"{r.memory_gbps:.0f}", "GPU busy": pct(r.busy),
        "compute floor": pct(r.compute_floor), "memory floor": pct(r.memory_floor), "bound by": r.bound,
    }  # fmt: skip


def chart(
    table: Sequence[Row],
    sheets: dict[str, Datasheet],
    out_stem: Path,
    title: str = "Runs against their GPUs' rooflines",
) -> list[Path]:
    """The roofline, log-log: arithmetic intensity on x, achieved TFLOP/s on y; each GPU's measured ceilings
    (solid) and datasheet ceilings (dashed). Writes `<out_stem>.png` and `.svg`."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(8.5, 6), layout="constrained")
    lows = [r.intensity for r in table]
    x = list(np.geomspace(min([*lows, 1.0]) / 3, max([*lows, 1e3]) * 3, 200))
    styles = {"H100": "#9aa0a6", "H200": "#000000"}
    ceilings: list[Any] = []
    for gpu in sorted({r.gpu for r in table}):
        rs = [r for r in table if r.gpu == gpu]
        peak, bandwidth = (
            statistics.median(r.gemm_tflops for r in rs),
            statistics.median(r.peak_memory_gbps for r in rs),
        )
        sheet = sheets[gpu]
        for top, mem, style, what in (
            (peak, bandwidth / 1e3, "-", "measured"),
            (sheet.tf32_tflops, sheet.memory_tbps, "--", "datasheet TF32"),
        ):
            label = f"{gpu} {what}: {top:.0f} TFLOP/s, {mem:.2f} TB/s"
            (line,) = ax.plot(
                x, [min(top, mem * v) for v in x], style, color=styles.get(gpu, OTHER_COLOUR), linewidth=1, label=label
            )
            ceilings.append(line)
    markers = {"H100": "o", "H200": "s"}
    for r in table:
        ax.scatter(
            r.intensity, r.tflops, marker=markers.get(r.gpu, "^"), color=BACKEND_COLOURS.get(r.backend, OTHER_COLOUR)
        )
    for workload in sorted({r.workload for r in table}):
        best = max((r for r in table if r.workload == workload), key=lambda r: r.tflops)
        ax.annotate(workload, (best.intensity, best.tflops), fontsize=7, xytext=(4, 2), textcoords="offset points")
    handles = (
        ceilings
        + [plt.Line2D([], [], marker=m, linestyle="", color="black", label=g) for g, m in markers.items()]
        + [
            plt.Line2D([], [], marker="o", linestyle="", color=BACKEND_COLOURS[b], label=b)
            for b in sorted({r.backend for r in table})
            if b in BACKEND_COLOURS
        ]
    )
    ax.legend(handles=handles, fontsize=8, loc="lower right")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity, model FLOPs per byte accessed (XLA cost analysis)", fontsize=10)
    ax.set_ylabel("achieved TFLOP/s (training FLOPs / steady epoch)", fontsize=10)
    ax.set_title(title, loc="left", fontsize=11)
    ax.grid(which="major", color="#dddddd", linewidth=0.6)
    return save_figure(fig, out_stem)


TITLE = "Where the time goes: each GPU configuration on its roofline"
CONFIGURATION_NOTE = (
    "Per configuration trained on a GPU with a datasheet (report/data/datasheet.toml) and a workload with a model "
    "cost (report/data/model_costs.toml): XLA's count of the training step's FLOPs and bytes, so the rates are lower "
    "bounds (the validation pass is in the epoch, not in its flops). *achieved*: training FLOPs per steady epoch "
    "over its seconds (the median over the configuration's runs); *% measured*: of the run's float32 GEMM "
    "fingerprint; *% datasheet*: of the board's dense peak at the run's matmul precision. *GPU busy*: the share of "
    "the steady epochs NVML saw a kernel running. *compute floor* and *memory floor*: the share of the epoch the "
    "arithmetic needs at the measured GEMM peak and the traffic at the measured memory bandwidth. *bound by*: host "
    "when the GPU idled more than half the epoch, else memory or compute by the arithmetic intensity against the "
    "measured ridge point."
)


@dataclass
class Section:
    """The report's section: one row per (GPU, workload, configuration), its table of formatted cells (the
    configuration's label in place of the backend), and the advice per workload."""

    rows: list[Row]
    table: Any  # pandas.DataFrame
    advice: list[tuple[str, str]]
    chart: str | None = None  # relative to the report, without its suffix: drawn as .png and .svg


def draw_section_chart(section: Section, out: Path, charts_dir: str) -> None:
    """The section's roofline into `out/<charts_dir>/gpu_roofline.{png,svg}`."""
    (out / charts_dir).mkdir(parents=True, exist_ok=True)
    chart(section.rows, load_datasheets(), out / charts_dir / "gpu_roofline")
    section.chart = f"{charts_dir}/gpu_roofline"


def configuration_rows(
    runs: Iterable[Any], costs: dict[str, ModelCost], sheets: dict[str, Datasheet]
) -> list[tuple[str, Row]]:
    """(configuration label, row) for each configuration of records.loading runs trained on a GPU with a datasheet,
    of a workload with a model cost: its complete runs with steady epochs, never pooled across configurations."""
    by_config: dict[tuple[str, str], list[tuple[RunMetadata, list[float]]]] = {}
    for run in runs:
        steady = [e.elapsed for e in run.log.steady_epochs]
        if run.complete and steady:
            by_config.setdefault((run.config.name, run.workload), []).append((run.metadata, steady))
    out = []
    for (label, workload), found in sorted(by_config.items()):
        for (gpu, _, backend), measured_runs in measured(found, sheets).items():
            if workload in costs:
                check_board(sheets[gpu], measured_runs)
                out.append((label, make_row(gpu, workload, backend, measured_runs, costs[workload], sheets[gpu])))
    return out


def section(runs: Iterable[Any], costs: dict[str, ModelCost], sheets: dict[str, Datasheet]) -> Section | None:
    """None where no run is on a GPU with a datasheet and a model cost."""
    import pandas as pd

    labelled = configuration_rows(runs, costs, sheets)
    if not labelled:
        return None
    table = pd.DataFrame([{"configuration": label, **cells(row)} for label, row in labelled]).drop(columns="backend")
    rows = [row for _, row in labelled]
    workloads = sorted({row.workload for row in rows})
    return Section(rows, table, [(w, advice([r for r in rows if r.workload == w])) for w in workloads])
