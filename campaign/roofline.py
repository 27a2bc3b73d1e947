"""Where the time goes: each H100 and H200 default run against its GPU's roofline.

Per run (the short suite's repeats of each backend's GPU defaults, as in campaign/today.py):

- *flops per epoch*: the workload's model FLOPs per training sample (report/data/model_costs.toml: XLA's cost
  analysis of the Keras train step, the program XLA would run on the CPU; see campaign/model_costs.py) times the
  samples one device trains on per epoch (the training samples over the devices). The validation pass is in the
  epoch's time but not in its flops, so every rate below is a lower bound. Bytes per epoch likewise, from XLA's
  'bytes accessed'.
- *achieved TFLOP/s* = flops per epoch / steady epoch seconds (the median of the run's steady epochs), and its share
  of the device's measured float32 GEMM peak (`fingerprint.gemm_tflops`, measured with the run's matmul precision:
  TF32 on the defaults) and of its datasheet peak at that precision (report/data/datasheet.toml).
- *memory traffic* = bytes per epoch / steady epoch seconds, against the measured device memory bandwidth.
- *GPU busy*: 1 - the run's `stability.host_share`, the share of the steady epochs in which NVML saw a kernel
  running. The compute floor (flops / measured peak) and the memory floor (bytes / measured bandwidth) are the
  least GPU time the epoch's arithmetic and traffic need.

Bound-by rule, per row (the median over its runs):
1. *host*: the GPU sat idle more than half of the steady epochs (host_share > 0.5, as benchmarks.stability marks a
   run host-bound): the framework's Python loop on the host sets the pace;
2. otherwise *memory* when the arithmetic intensity (flops / bytes) lies below the measured ridge point
   (measured GEMM peak / measured memory bandwidth), else *compute*.

A faster GPU can save at most the busy share of an epoch (the rest is the host loop waiting on nothing the GPU
does), and the compute floor says how little of that busy time the arithmetic itself needs.

Headroom (`gpu_session --phase headroom`, campaign.headroom): the same model trained by one compiled program per
epoch with its data on the device; over the Keras JAX steady epoch of the same slice it is the GPU's share of that
epoch, the rest the framework's host loop.

    python -m campaign.roofline logs/reference                 # the section, markdown
    python -m campaign.roofline logs/reference --chart OUT     # and the roofline chart, OUT.png and OUT.svg
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from benchmarks.metadata import RunMetadata
from benchmarks.stability import HOST_BOUND_SHARE
from campaign.designs import fresh_repeat
from campaign.model_costs import ModelCost, load_costs
from campaign.today import GPUS, PLATFORMS, complete_runs
from report.charts import BACKEND_COLOURS, OTHER_COLOUR, save_figure
from report.format import markdown_table

DATASHEET_FILE = Path(__file__).resolve().parents[1] / "report" / "data" / "datasheet.toml"
HOST, MEMORY, COMPUTE = "host", "memory", "compute"
HEADROOM_COMMAND = "python3 -m campaign.gpu_session run --carry .carry --phase headroom --tag TAG --out OUT"
HEADROOM_GLOB = "gpu-headroom-*/*.headroom.json"  # what that phase leaves, collected beside the runs


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


def _run(meta: RunMetadata, steady: Sequence[float]) -> Run:
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


def measured(logs: Path) -> dict[tuple[str, str, str], list[Run]]:
    """(gpu, workload, backend) -> the complete default repeats, each alone in its process, under each GPU's
    platform folder."""
    found: dict[tuple[str, str, str], list[Run]] = {}
    for gpu, meta, steady in complete_runs(logs):
        if fresh_repeat(meta) and meta.data.train_samples:
            found.setdefault((gpu, meta.workload, meta.backend), []).append(_run(meta, steady))
    return found


@dataclass(frozen=True)
class Headroom:
    """One compiled-loop measurement (campaign.headroom): the GPU's time for the epoch's arithmetic alone."""

    gpu: str
    workload: str
    steady_s: float
    train_samples: int
    val_samples: int
    source: str


def headroom(logs: Path) -> dict[tuple[str, str], list[Headroom]]:
    """(gpu, workload) -> the headroom records collected under each GPU's platform folder."""
    found: dict[tuple[str, str], list[Headroom]] = {}
    for gpu, platform in PLATFORMS.items():
        for path in sorted((logs / platform).glob(HEADROOM_GLOB)):
            record = json.loads(path.read_text())
            if record.get("steady_median_s") is None:
                continue
            found.setdefault((gpu, record["workload"]), []).append(
                Headroom(
                    gpu=gpu,
                    workload=record["workload"],
                    steady_s=float(record["steady_median_s"]),
                    train_samples=int(record["train_samples"]),
                    val_samples=int(record.get("val_samples_evaluated") or 0),
                    source=str(record.get("source", "")),
                )
            )
    return found


HEADROOM_MISSING = (
    "Headroom (the same Keras model trained by a compiled loop with its data on the device, "
    f"`{HEADROOM_COMMAND}`, then `collect`) has not been measured on these GPUs."
)
HEADROOM_NOTE = (
    "Headroom: the same Keras model, loss and optimizer trained by one compiled program per epoch with its "
    "data on the device (JAX, `campaign.headroom`, on the short suite's slice, its validation pass "
    "included). *compiled epoch*: the median of its steady epochs over the records; *GPU share*: compiled "
    "over Keras's steady JAX epoch, what the GPU needs of that epoch; the rest is Keras's host loop "
    "(callbacks, metrics, dispatch, data feeding)."
)
HEADROOM_FIGURES = frozenset({"Keras JAX epoch s", "compiled epoch s", "records", "GPU share", "host loop share"})


def headroom_table(table: Sequence[Row], records: dict[tuple[str, str], list[Headroom]]) -> pd.DataFrame:
    """Per workload and GPU: how much of the suite's JAX epoch the GPU's arithmetic needs when no host loop
    drives it, and so how much is the framework's host loop (formatted cells)."""
    keras_rows = {(r.gpu, r.workload): r for r in table if r.backend == "jax"}
    out = []
    for (gpu, workload), found in sorted(records.items()):
        row = keras_rows.get((gpu, workload))
        compiled = statistics.median(h.steady_s for h in found)
        cells = {"workload": workload, "GPU": gpu}
        if row is None or any(h.train_samples != round(row.samples) for h in found):
            cells |= {"Keras JAX epoch s": "n/a", "compiled epoch s": f"{compiled:.3f}", "records": str(len(found)),
                      "GPU share": "not the suite's slice", "host loop share": ""}  # fmt: skip
        else:
            share = compiled / row.epoch_s
            cells |= {"Keras JAX epoch s": f"{row.epoch_s:.3f}", "compiled epoch s": f"{compiled:.3f}",
                      "records": str(len(found)), "GPU share": _pct(share),
                      "host loop share": _pct(max(0.0, 1 - share))}  # fmt: skip
        out.append(cells)
    return pd.DataFrame(out)


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


def rows(
    logs: Path, costs: dict[str, ModelCost] | None = None, sheets: dict[str, Datasheet] | None = None
) -> list[Row]:
    costs = load_costs() if costs is None else costs
    sheets = load_datasheets() if sheets is None else sheets
    return rows_of(measured(logs), costs, sheets)


def rows_of(
    found: dict[tuple[str, str, str], list[Run]], costs: dict[str, ModelCost], sheets: dict[str, Datasheet]
) -> list[Row]:
    """One row per measured (gpu, workload, backend) that has a model cost and a datasheet."""
    out = []
    for (gpu, workload, backend), runs in sorted(found.items()):
        if workload in costs and gpu in sheets:
            _check_board(sheets[gpu], runs)
            out.append(make_row(gpu, workload, backend, runs, costs[workload], sheets[gpu]))
    return out


def _check_board(sheet: Datasheet, runs: Sequence[Run]) -> None:
    """The datasheet must be the board the logs name (an H100 PCIe has other peaks than the SXM)."""
    other = {r.device_name for r in runs} - set(sheet.names)
    if other:
        raise ValueError(f"datasheet {sheet.gpu}: logs name {', '.join(sorted(other))}, not {sheet.board}")


def _pct(share: float | None) -> str:
    if share is None:
        return "n/a"
    return f"{share * 100:.0f} %" if share >= 0.01 else f"{share * 100:.2f} %"


def _rate(value: float) -> str:
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
            f"{_pct(most)} of an epoch, so even a GPU that took no time would save at most that (the arithmetic "
            f"needs {_pct(floor)} or less at the measured peak, the traffic {_pct(memory)} or less). A faster host "
            "loop (compiled epochs, more steps per execution) would."
        )
    if max(floor, memory) * 2 < most:
        return (
            f"little: the GPU is busy up to {_pct(most)} of an epoch, but the arithmetic needs {_pct(floor)} or less "
            f"of it at the measured GEMM peak and the traffic {_pct(memory)} or less at the measured bandwidth; the "
            "rest of the busy time is many small kernels, which more FLOP/s or bandwidth barely shortens."
        )
    return (
        f"yes, up to {_pct(most)} of an epoch: the GPU is busy that long and its floors (arithmetic {_pct(floor)}, "
        f"traffic {_pct(memory)}) fill much of it, so a GPU with more {'bandwidth' if memory > floor else 'FLOP/s'} "
        "shortens the epoch."
    )


TITLE = "Where the time goes: the H100 and H200 runs on a roofline"
CHART_TITLE = "The H100 and H200 runs on their rooflines"
NOTE = (
    "Model FLOPs and bytes per training step are XLA's cost analysis of each workload's Keras train step "
    "(`python -m campaign.model_costs`: the program XLA would run on the CPU, recurrent layers unrolled; the "
    "validation pass is not counted, so the rates are lower bounds; the bytes are the CPU program's, whose "
    "fusions differ from the GPU's, so a memory floor above the busy share overstates the GPU's traffic). "
    "*achieved*: training FLOPs per steady "
    "epoch over its seconds; *% measured*: of the run's float32 GEMM fingerprint (TF32, as the defaults "
    "multiply); *% datasheet*: of the board's dense TF32 peak. *GPU busy*: the share of the steady epochs NVML "
    "saw a kernel running; the rest is the framework's host loop. *compute floor* and *memory floor*: the "
    "share of the epoch the arithmetic needs at the measured GEMM peak and the traffic at the measured memory "
    "bandwidth. *bound by*: host when the GPU idled more than half the epoch, else memory or compute by the "
    "arithmetic intensity against the measured ridge point (docs/statistics.md)."
)
TEXT_COLUMNS = frozenset({"workload", "backend", "GPU", "bound by"})


@dataclass(frozen=True)
class Section:
    """The section's parts, for the markdown and the HTML report alike: the rows (to draw) and their table of
    formatted cells, the advice per workload, the workloads left out, the headroom table (None: not measured)
    and a line per datasheet."""

    rows: list[Row]
    table: pd.DataFrame
    advice: list[tuple[str, str]]
    missing: list[str]
    headroom: pd.DataFrame | None
    datasheets: list[str]


def section_parts(logs: Path, costs: dict[str, ModelCost] | None = None) -> Section | None:
    """None where no H100 or H200 run has a model cost."""
    costs = load_costs() if costs is None else costs
    sheets = load_datasheets()
    found = measured(logs)
    table = rows_of(found, costs, sheets)
    if not table:
        return None
    records = headroom(logs)
    return Section(
        rows=table,
        table=pd.DataFrame([_cells(r) for r in table]),
        advice=[(w, advice([r for r in table if r.workload == w])) for w in sorted({r.workload for r in table})],
        missing=sorted({w for _, w, _ in found} - set(costs)),
        headroom=headroom_table(table, records) if records else None,
        datasheets=[
            f"{s.gpu} ({s.board}, logged as {', '.join(s.names)}): TF32 {s.tf32_tflops:g}, BF16 {s.bf16_tflops:g}, "
            f"FP32 {s.fp32_tflops:g} TFLOP/s; memory {s.memory_tbps:g} TB/s ({s.source})"
            for s in sheets.values()
            if s.gpu in GPUS
        ],
    )


def _cells(r: Row) -> dict[str, str]:
    return {
        "workload": r.workload, "backend": r.backend, "GPU": r.gpu, "runs": str(r.runs),
        "steady epoch s": f"{r.epoch_s:.2f}", "achieved TFLOP/s": _rate(r.tflops),
        "% measured": _pct(r.tflops / r.gemm_tflops), "% datasheet": _pct(r.tflops / r.datasheet_tflops),
        "flops/byte": f"{r.intensity:.1f}", "GB/s": f"{r.memory_gbps:.0f}", "GPU busy": _pct(r.busy),
        "compute floor": _pct(r.compute_floor), "memory floor": _pct(r.memory_floor), "bound by": r.bound,
    }  # fmt: skip


def section(logs: Path, costs: dict[str, ModelCost] | None = None, markdown: Path | None = None) -> str:
    """The section in markdown (section_parts); with `markdown` (the document's path) the roofline chart is drawn
    into its charts folder (`<stem>_charts/`, where report.markdown puts the others) and shown."""
    parts = section_parts(logs, costs)
    if parts is None:
        return ""
    image = []
    if markdown is not None:
        folder = markdown.parent / f"{markdown.stem}_charts"
        folder.mkdir(parents=True, exist_ok=True)
        chart(parts.rows, load_datasheets(), folder / "roofline")
        png, svg = f"{folder.name}/roofline.png", f"{folder.name}/roofline.svg"  # the PNG shown, linking the SVG
        image = ["", f"[![{CHART_TITLE}]({png})]({svg})"]
    right = frozenset(parts.table.columns) - TEXT_COLUMNS
    lines = [f"## {TITLE}", "", NOTE, *image, "", markdown_table(parts.table, right)]
    lines += ["", "Would a faster GPU help? Per workload, from the rows above:", ""]
    lines += [f"- **{workload}**: {text}" for workload, text in parts.advice]
    if parts.missing:
        lines += ["", f"No model cost for {', '.join(parts.missing)}: left out."]
    if parts.headroom is None:
        lines += ["", HEADROOM_MISSING]
    else:
        lines += ["", HEADROOM_NOTE, "", markdown_table(parts.headroom, HEADROOM_FIGURES)]
    lines += ["", "Datasheet peaks (dense, no sparsity):", "", *(f"- {line}" for line in parts.datasheets)]
    return "\n".join(lines) + "\n"


def chart(table: Sequence[Row], sheets: dict[str, Datasheet], out_stem: Path) -> list[Path]:
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
    ax.set_title("Short-suite defaults on the H100 and H200 against their rooflines", loc="left", fontsize=11)
    ax.grid(which="major", color="#dddddd", linewidth=0.6)
    return save_figure(fig, out_stem)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m campaign.roofline", description=__doc__.splitlines()[0])
    parser.add_argument("logs", type=Path, help="the folder that holds NVIDIA-H100 and NVIDIA-H200")
    parser.add_argument("--chart", type=Path, help="also draw the roofline to CHART.png and CHART.svg")
    args = parser.parse_args(argv)
    if not any((args.logs / p).is_dir() for p in PLATFORMS.values()):
        print(f"error: logs: {args.logs} holds no {' or '.join(PLATFORMS.values())} folder", file=sys.stderr)
        return 2
    print(section(args.logs), end="")
    if args.chart:
        for path in chart(rows(args.logs), load_datasheets(), args.chart):
            print(path, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
