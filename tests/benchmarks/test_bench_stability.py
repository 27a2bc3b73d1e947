"""Stability labels, outlier epochs, host-bound shares, and energy from power traces and counters."""

from __future__ import annotations

import gc
import time

import pytest

from benchmarks.harness.energy import counter_delta, integrate_power, interpolate, watt_hours
from benchmarks.harness.telemetry import Telemetry, visible_gpu_indices
from benchmarks.stability import HOST_BOUND_SHARE, UNSTABLE_CV, assess, outlier_positions


def _epochs(*seconds: float) -> list[tuple[int, float]]:
    return list(enumerate(seconds, start=1))


def test_steady_gpu_bound_epochs_are_stable() -> None:
    result = assess(_epochs(1.00, 1.001, 0.999, 1.0), [95.0, 96.0, 95.0, 97.0])
    assert result["label"] == "stable" and result["steady_cv"] < 0.002
    assert result["host_bound"] is False and result["host_share"] == pytest.approx(0.0425)


def test_epochs_spread_over_the_threshold_are_unstable_and_host_bound_when_the_gpu_idles() -> None:
    # The bimodal pattern the issue reports for mnist_mlp on JAX: 0.33-0.36 s and 0.54-0.57 s.
    result = assess(_epochs(0.34, 0.55, 0.35, 0.56, 0.33), [10.0, 9.0, 11.0, 10.0, 12.0])
    assert result["steady_cv"] > UNSTABLE_CV and result["label"] == "unstable"
    assert result["host_share"] > HOST_BOUND_SHARE and result["host_bound"] is True


def test_too_few_steady_epochs_are_not_judged() -> None:
    result = assess(_epochs(1.0, 1.5))
    assert result["label"] == "too few epochs" and result["host_bound"] is None and result["host_share"] is None


def test_an_outlier_epoch_is_named_by_its_epoch_number() -> None:
    result = assess(_epochs(1.00, 1.01, 0.99, 1.00, 1.60, 1.01))
    assert result["outlier_epochs"] == [5]
    assert outlier_positions([1.0, 1.0, 1.0]) == []


def test_energy_of_a_known_power_trace() -> None:
    times, watts = [0.0, 1.0, 2.0, 3.0], [100.0, 100.0, 300.0, 300.0]
    assert integrate_power(times, watts, 0.0, 1.0) == pytest.approx(100.0)  # constant 100 W for 1 s
    assert integrate_power(times, watts, 1.0, 2.0) == pytest.approx(200.0)  # ramp 100 -> 300 W: mean 200 W
    # A window between samples is cut at interpolated ends: 1.5 s -> 2.5 s is 200..300 W then 300 W.
    assert integrate_power(times, watts, 1.5, 2.5) == pytest.approx(0.5 * (200 + 300) / 2 + 0.5 * 300)
    assert integrate_power(times, watts, 0.0, 3.0) == pytest.approx(100 + 200 + 300)
    assert interpolate(times, watts, 10.0) == 300.0 and integrate_power(times, watts, 2.0, 2.0) == 0.0
    assert watt_hours(3600.0) == pytest.approx(1.0)


def test_energy_counters_that_wrap() -> None:
    assert counter_delta(100, 250) == 150
    assert counter_delta(900, 100, wrap=1000) == 200  # RAPL's energy_uj wraps at max_energy_range_uj
    with pytest.raises(ValueError, match="went backwards"):
        counter_delta(900, 100)


def test_cuda_visible_devices_selects_the_gpus_sampled() -> None:
    assert visible_gpu_indices(4, "") == [0, 1, 2, 3]
    assert visible_gpu_indices(4, "2,0") == [2, 0]
    assert visible_gpu_indices(2, "GPU-1234") == [0, 1]


def test_paused_telemetry_takes_no_samples_until_it_resumes() -> None:
    """A staged child waiting for its turn samples nothing (no driver polls while a sibling is timed)."""
    with Telemetry(interval_s=0.01) as telemetry:
        time.sleep(0.1)
        with telemetry.paused():
            time.sleep(0.05)  # let a sample in flight land
            paused_at = len(telemetry.samples)
            time.sleep(0.2)
            assert len(telemetry.samples) == paused_at
        time.sleep(0.1)
    assert len(telemetry.samples) > paused_at


def test_telemetry_brackets_epochs_with_cpu_time_and_garbage_collections() -> None:
    with Telemetry(interval_s=0.01) as telemetry:
        telemetry.epoch_begin(0)
        sum(i * i for i in range(200_000))  # CPU work inside the epoch
        gc.collect()
        telemetry.epoch_end(0)
    [epoch] = telemetry.epoch_details()
    assert epoch["epoch"] == 0 and epoch["cpu_s"] > 0 and epoch["gc_collections"] >= 1 and epoch["gc_s"] > 0
    summary = telemetry.summary()
    assert summary["host"]["cpu_busy_pct"] is not None and summary["samples"] >= 1
    if not telemetry.has_gpu:  # this machine: no NVML, so no GPU figures and no energy unless RAPL is readable
        assert summary["gpus"] is None and epoch["gpu_joules"] is None
