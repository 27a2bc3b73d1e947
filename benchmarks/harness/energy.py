"""Energy from power readings: the integral of a sampled power trace over a time window, and counter deltas.

NVML's total-energy counter (Volta and later) is exact at the instants it is read; older GPUs give power only, so
energy is the trapezoid integral of the samples, with the trace interpolated at the window's ends.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence

JOULES_PER_WATT_HOUR = 3600.0


def interpolate(times: Sequence[float], values: Sequence[float], at: float) -> float:
    """The trace's value at `at`, linear between samples and held flat beyond the first and last one."""
    if not times:
        raise ValueError("no samples")
    if at <= times[0]:
        return values[0]
    if at >= times[-1]:
        return values[-1]
    right = bisect.bisect_right(times, at)
    t0, t1, v0, v1 = times[right - 1], times[right], values[right - 1], values[right]
    return v0 if t1 == t0 else v0 + (v1 - v0) * (at - t0) / (t1 - t0)


def integrate_power(times: Sequence[float], watts: Sequence[float], start: float, end: float) -> float:
    """Joules drawn between `start` and `end` (seconds on the clock of `times`): trapezoids over the samples
    inside the window, with the power at the window's ends interpolated."""
    if end <= start:
        return 0.0
    inside = [(t, w) for t, w in zip(times, watts, strict=True) if start < t < end]
    points = [(start, interpolate(times, watts, start)), *inside, (end, interpolate(times, watts, end))]
    return sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in itertools.pairwise(points))


def counter_delta(before: int, after: int, wrap: int | None = None) -> int:
    """The increase of a monotonic counter that may wrap around at `wrap` (RAPL's energy_uj does)."""
    if after >= before:
        return after - before
    if wrap is None:
        raise ValueError(f"counter went backwards ({before} -> {after}) and has no known wrap value")
    return wrap - before + after


def watt_hours(joules: float) -> float:
    return joules / JOULES_PER_WATT_HOUR
