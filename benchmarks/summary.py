"""The table `python -m benchmarks suite` prints at the end: one row per workload x backend (x data source).

Repeats of one item are pooled into one row: the median over repeats of each repeat's median steady epoch, with
the order-statistic interval of that median (benchmarks.stats), and how many repeats were stable.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from benchmarks.logs import LogFormatError, find_logs, read_epoch_log
from benchmarks.metadata import RunMetadata, StabilityLabel, Status
from benchmarks.stats import Estimate, median_estimate


@dataclass(frozen=True)
class Repeat:
    """What one CSV (one repeat) contributes to its row."""

    workload: str
    backend: str
    data: str
    status: str
    first_epoch_s: float | None
    steady_median_s: float | None
    steady_epochs: int
    accuracy: float | None
    accuracy_kind: str  # "val_acc", "acc" or "loss" (workloads without accuracy report their final loss)
    stability: str | None
    host_bound: bool | None


@dataclass(frozen=True)
class Row:
    workload: str
    backend: str
    data: str
    repeats: list[Repeat]

    @property
    def complete(self) -> list[Repeat]:
        return [r for r in self.repeats if r.status == Status.COMPLETE and r.steady_median_s is not None]

    @property
    def steady(self) -> Estimate | None:
        values = [r.steady_median_s for r in self.complete if r.steady_median_s is not None]
        return median_estimate(values) if values else None

    @property
    def first_epoch_s(self) -> float | None:
        values = [r.first_epoch_s for r in self.complete if r.first_epoch_s is not None]
        return statistics.median(values) if values else None

    @property
    def status(self) -> str:
        statuses = sorted({r.status for r in self.repeats})
        return statuses[0] if len(statuses) == 1 else ", ".join(statuses)

    @property
    def stability(self) -> str:
        """E.g. "stable" (every repeat), "2/3 unstable", "host-bound"; "-" where nothing was judged."""
        labels = [r.stability for r in self.complete if r.stability]
        unstable = labels.count(StabilityLabel.UNSTABLE)
        text = "-" if not labels else (StabilityLabel.STABLE if unstable == 0 else f"{unstable}/{len(labels)} unstable")
        if labels and labels.count(StabilityLabel.TOO_FEW_EPOCHS) == len(labels):
            text = StabilityLabel.TOO_FEW_EPOCHS
        if any(r.host_bound for r in self.complete):
            text += ", host-bound"
        return text

    @property
    def final(self) -> str:
        last = self.complete[-1] if self.complete else (self.repeats[-1] if self.repeats else None)
        if last is None or last.accuracy is None:
            return "-"
        return f"{last.accuracy_kind} {last.accuracy:.4f}"


def _read_repeat(path: Path) -> Repeat | None:
    try:
        log = read_epoch_log(path)
    except LogFormatError as exc:
        print(f"warning: {exc}")
        return None
    meta = log.metadata or RunMetadata.from_dict({})
    data = meta.data
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
    steady = [e.elapsed for e in log.steady_epochs]
    source = data.source or "?"
    dataset = data.dataset or "?"
    first = log.first_epoch
    return Repeat(
        workload=meta.workload or path.stem,
        backend=meta.backend or "?",
        data=f"{dataset} ({source})" if source == "synthetic" else dataset,
        status=log.status,
        first_epoch_s=first.elapsed if first else None,
        steady_median_s=statistics.median(steady) if steady else None,
        steady_epochs=len(steady),
        accuracy=accuracy,
        accuracy_kind=kind,
        stability=meta.stability.label if meta.stability else None,
        host_bound=meta.stability.host_bound if meta.stability else None,
    )


def summarize(run_dir: Path) -> list[Row]:
    groups: dict[tuple[str, str, str], list[Repeat]] = {}
    for path in find_logs(run_dir):
        repeat = _read_repeat(path)
        if repeat is not None:
            groups.setdefault((repeat.workload, repeat.backend, repeat.data), []).append(repeat)
    return [Row(*key, repeats) for key, repeats in sorted(groups.items())]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def steady_text(estimate: Estimate | None, steady_epochs: int) -> str:
    """A single run shows its steady-epoch count; repeats show the interval over repeats."""
    if estimate is None:
        return "-"
    if estimate.n == 1:
        return f"{estimate.value:.2f} (1 run, {steady_epochs} epochs)"
    return f"{estimate.value:.2f} [{estimate.interval_text('{:.2f}')}]"


def print_table(rows: list[Row]) -> None:
    if not rows:
        print("no results")
        return
    header = (
        "workload",
        "backend",
        "first epoch s",
        "steady median s [interval]",
        "stability",
        "final",
        "data",
        "status",
    )
    body = [
        (
            r.workload,
            r.backend,
            _seconds(r.first_epoch_s),
            steady_text(r.steady, r.complete[0].steady_epochs if r.complete else 0),
            r.stability,
            r.final,
            r.data,
            r.status,
        )
        for r in rows
    ]
    widths = [max(len(str(line[i])) for line in (header, *body)) for i in range(len(header))]
    for line in (header, tuple("-" * w for w in widths), *body):
        print("  ".join(str(cell).ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
