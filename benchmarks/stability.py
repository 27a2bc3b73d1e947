"""How steady a run's epochs were, and whether the host rather than the accelerator set their pace.

Thresholds, from the committed H200 logs (logs/reference/NVIDIA-H200, 38 runs with 3+ steady epochs): runs whose
GPU was busy over 80 % of the time had a steady-epoch coefficient of variation (CV) of 0.1-0.2 %; runs whose GPU
was busy under 30 % had 1-10 %, and those were the ones whose medians moved by up to 45 % between processes.
pyperf warns at a standard deviation over 10 % of the mean; we flag a run as unstable from 5 %, which marks the
worst of the host-bound runs, and call a GPU run host-bound when its GPU idled for more than half of the steady
epochs. A run needs 3 steady epochs for either judgement.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from benchmarks.metadata import StabilityLabel

UNSTABLE_CV = 0.05
HOST_BOUND_SHARE = 0.5
MIN_STEADY_EPOCHS = 3
# Iglewicz and Hoaglin's cut-off for the modified z-score (0.6745 * |x - median| / MAD).
OUTLIER_Z = 3.5


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    if len(values) < 2 or statistics.fmean(values) == 0:
        return None
    return statistics.stdev(values) / statistics.fmean(values)


def outlier_positions(values: Sequence[float]) -> list[int]:
    """Positions of values whose modified z-score exceeds OUTLIER_Z (robust to the outliers themselves)."""
    if len(values) < MIN_STEADY_EPOCHS:
        return []
    median = statistics.median(values)
    mad = statistics.median(abs(v - median) for v in values)
    if mad == 0:
        return [i for i, v in enumerate(values) if v != median] if len(set(values)) > 1 else []
    return [i for i, v in enumerate(values) if 0.6745 * abs(v - median) / mad > OUTLIER_Z]


def host_share(gpu_utilization_pct: Sequence[float | None]) -> float | None:
    """Fraction of the steady epochs the GPU sat idle, from each epoch's mean utilisation (None off GPUs)."""
    known = [u for u in gpu_utilization_pct if u is not None]
    if not known:
        return None
    return max(0.0, 1 - statistics.fmean(known) / 100)


def _label(cv: float | None, enough: bool) -> StabilityLabel:
    if not enough or cv is None:
        return StabilityLabel.TOO_FEW_EPOCHS
    return StabilityLabel.UNSTABLE if cv > UNSTABLE_CV else StabilityLabel.STABLE


def assess(steady: Sequence[tuple[int, float]], gpu_utilization_pct: Sequence[float | None] = ()) -> dict[str, Any]:
    """The `stability` block of the run metadata, from (epoch number, seconds) of the steady epochs and, on GPUs,
    each steady epoch's mean GPU utilisation."""
    seconds = [s for _, s in steady]
    cv = coefficient_of_variation(seconds)
    share = host_share(gpu_utilization_pct)
    enough = len(seconds) >= MIN_STEADY_EPOCHS
    return {
        "steady_cv": cv,
        "steady_epochs": len(seconds),
        "outlier_epochs": [steady[i][0] for i in outlier_positions(seconds)],
        "label": _label(cv, enough),
        "host_share": share,
        "host_bound": None if share is None or not enough else share > HOST_BOUND_SHARE,
    }
