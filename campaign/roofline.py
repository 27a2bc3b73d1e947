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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from campaign.designs import fresh_repeat
from campaign.today import GPUS, PLATFORMS, complete_runs
from report.format import markdown_table
from report.model_costs import ModelCost, load_costs
from report.roofline import (
    Datasheet,
    Row,
    Run,
    advice,
    cells,
    load_datasheets,
    pct,
    rows_of,
    run_of,
)
from report.roofline import chart as draw

HEADROOM_COMMAND = "python3 -m campaign.gpu_session run --carry .carry --phase headroom --tag TAG --out OUT"
HEADROOM_GLOB = "gpu-headroom-*/*.headroom.json"  # what that phase leaves, collected beside the runs


def measured(logs: Path) -> dict[tuple[str, str, str], list[Run]]:
    """(gpu, workload, backend) -> the complete default repeats, each alone in its process, under each GPU's
    platform folder."""
    found: dict[tuple[str, str, str], list[Run]] = {}
    for gpu, meta, steady in complete_runs(logs):
        if fresh_repeat(meta) and meta.data.train_samples:
            found.setdefault((gpu, meta.workload, meta.backend), []).append(run_of(meta, steady))
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
                      "records": str(len(found)), "GPU share": pct(share),
                      "host loop share": pct(max(0.0, 1 - share))}  # fmt: skip
        out.append(cells)
    return pd.DataFrame(out)


def rows(
    logs: Path, costs: dict[str, ModelCost] | None = None, sheets: dict[str, Datasheet] | None = None
) -> list[Row]:
    costs = load_costs() if costs is None else costs
    sheets = load_datasheets() if sheets is None else sheets
    return rows_of(measured(logs), costs, sheets)


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
        table=pd.DataFrame([cells(r) for r in table]),
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
    """The roofline of the H100 and H200 defaults (report.roofline.chart), `<out_stem>.png` and `.svg`."""
    return draw(table, sheets, out_stem, "Short-suite defaults on the H100 and H200 against their rooflines")


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
