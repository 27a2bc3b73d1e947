"""Keras against native PyTorch: each Keras backend's steady epoch over the native twin's (`torch-native`) of the
same workload, on the same GPU model, wherever both ran ("Keras on PyTorch: 6.5x the native time").

The same runs as the GPU-against-GPU section (report.gpu_compare.comparable_runs): complete, one device, the
runner's default settings, fresh processes, the same data and training samples. The ratio is the ratio of the two
sides' medians with its bootstrap interval; *verdict* is benchmarks.stats.compare's on the runs' medians.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from benchmarks.stats import FASTER, SLOWER, TOO_FEW, Comparison, compare
from report.gpu_compare import Key, Side, comparable_runs, short_name

TITLE = "Keras against native PyTorch, on the same GPU"
NATIVE = "torch-native"
KERAS_NAMES = {"jax": "Keras on JAX", "torch": "Keras on PyTorch", "tensorflow": "Keras on TensorFlow"}
NOTE = (
    "Each Keras backend's run against the native PyTorch twin of the same workload (`--backend torch-native`: the "
    "same model, data, hyperparameters and precision, in a plain PyTorch training loop) on the same GPU model at "
    "the same precision, both with the runner's defaults in fresh processes, one device. *x native*: the ratio of "
    "the two medians of the runs' median steady epochs (above 1: Keras takes longer) [95% interval; none under 3 "
    "runs on a side]; *verdict*: the rank-sum test and the bootstrap ratio together (benchmarks.stats.compare)."
)


@dataclass(frozen=True)
class Row:
    gpu: str
    workload: str
    backend: str
    keras: Side
    native: Side

    @property
    def ratio(self) -> float:
        return self.keras.estimate().value / self.native.estimate().value

    def comparison(self) -> Comparison:
        return compare(
            self.keras.steady,
            self.native.steady,
            candidate_machines=self.keras.machines,
            base_machines=self.native.machines,
        )

    def verdict(self) -> str:
        result = self.comparison()
        return {SLOWER: "slower than native", FASTER: "faster than native", TOO_FEW: "too few repeats"}.get(
            result.verdict, "no difference beyond noise"
        )

    def interval(self) -> str:
        ratio = self.comparison().ratio
        return f"[{ratio.low:.2f}-{ratio.high:.2f}]" if ratio.has_interval else "(no interval)"

    @property
    def sentence(self) -> str:
        name = KERAS_NAMES.get(self.backend, self.backend)
        return f"{name}: {self.ratio:.2f}x the native time ({self.workload}, {short_name(self.gpu)})"


@dataclass
class Section:
    rows: list[Row]
    table: Any  # pandas.DataFrame of formatted cells


def rows_of(runs: Iterable[Any]) -> list[Row]:
    """Per GPU model, workload and Keras backend, its runs against the native ones at the same precision (a Keras
    run in mixed_float16 is never set against a native run in bfloat16)."""
    by_precision: dict[str | None, list[Any]] = {}
    for run in runs:
        by_precision.setdefault(run.precision, []).append(run)
    rows = []
    for group in by_precision.values():
        sides = comparable_runs(group)
        for (gpu, key), native in sides.items():
            if key.backend != NATIVE:
                continue
            for backend in KERAS_NAMES:
                keras = sides.get((gpu, Key(key.workload, backend, key.data_source, key.train_samples)))
                if keras is not None:
                    rows.append(Row(gpu, key.workload, backend, keras, native))
    return sorted(rows, key=lambda r: (r.gpu, r.workload, r.backend))


def section(runs: Iterable[Any]) -> Section | None:
    """None where no Keras run and native run share a GPU model and workload."""
    import pandas as pd

    rows = rows_of(runs)
    if not rows:
        return None
    table = pd.DataFrame(
        [
            {
                "GPU": short_name(r.gpu),
                "workload": r.workload,
                "Keras backend": KERAS_NAMES.get(r.backend, r.backend),
                "Keras epoch s": f"{r.keras.estimate().value:.3f} ({_runs(len(r.keras.steady))})",
                "native epoch s": f"{r.native.estimate().value:.3f} ({_runs(len(r.native.steady))})",
                "x native": f"{r.ratio:.2f}x {r.interval()}",
                "verdict": r.verdict(),
            }
            for r in rows
        ]
    )
    return Section(rows, table)


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"
