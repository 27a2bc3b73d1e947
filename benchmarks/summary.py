"""The table `python -m benchmarks suite` prints at the end: one row per workload x backend."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benchmarks.logs import LogFormatError, find_logs, read_epoch_log


@dataclass(frozen=True)
class Row:
    workload: str
    backend: str
    first_epoch_s: float | None
    steady_median_s: float | None
    steady_epochs: int
    accuracy: float | None
    accuracy_kind: str  # "val_acc", "acc" or "loss" (workloads without accuracy report their final loss)
    data: str
    status: str


def summarize(run_dir: Path) -> list[Row]:
    rows = []
    for path in find_logs(run_dir):
        try:
            log = read_epoch_log(path)
        except LogFormatError as exc:
            print(f"warning: {exc}")
            continue
        meta = log.metadata or {}
        timing = meta.get("timing") or {}
        data = meta.get("data") or {}
        final = log.final
        accuracy, kind = None, "loss"
        if final is not None:
            accuracy, kind = next(
                (
                    (v, k)
                    for k, v in (("val_acc", final.val_acc), ("acc", final.acc), ("loss", final.loss))
                    if v is not None
                ),
                (None, "loss"),
            )
        source = data.get("source", "?")
        rows.append(
            Row(
                workload=meta.get("workload", path.stem),
                backend=meta.get("backend", "?"),
                first_epoch_s=timing.get("first_epoch_s"),
                steady_median_s=timing.get("steady_median_s"),
                steady_epochs=timing.get("steady_epochs") or 0,
                accuracy=accuracy,
                accuracy_kind=kind,
                data=f"{data.get('dataset', '?')} ({source})" if source == "synthetic" else data.get("dataset", "?"),
                status=log.status,
            )
        )
    return rows


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_table(rows: list[Row]) -> None:
    if not rows:
        print("no results")
        return
    header = ("workload", "backend", "first epoch s", "steady median s", "final", "data", "status")
    body = [
        (
            r.workload,
            r.backend,
            _seconds(r.first_epoch_s),
            f"{_seconds(r.steady_median_s)} (n={r.steady_epochs})",
            "-" if r.accuracy is None else f"{r.accuracy_kind} {r.accuracy:.4f}",
            r.data,
            r.status,
        )
        for r in rows
    ]
    widths = [max(len(str(line[i])) for line in (header, *body)) for i in range(len(header))]
    for line in (header, tuple("-" * w for w in widths), *body):
        print("  ".join(str(cell).ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
