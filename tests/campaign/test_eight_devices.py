"""Eight GPUs, prepared without one: the GPU tool's scaling commands for 1 and 8 devices run on eight logical CPU
devices (JAX), and the report's scaling section reads them, so a machine of eight GPUs needs only the call."""

from __future__ import annotations

import os
import time
from argparse import Namespace
from pathlib import Path

import pytest

from benchmarks.harness.distribution import XLA_DEVICES_FLAG
from campaign import gpu_session
from records.loading import load_runs
from report.scaling import scaling_table
from tests.support.datasets import prefill_keras_cache


def test_the_scaling_configurations_reach_eight_devices_under_either_policy() -> None:
    names = [c.name for c in gpu_session.scaling_configs([2, 4, 8])]
    assert names == ["1gpu", *(f"{n}gpu-{p}" for n in (2, 4, 8) for p in ("same-global", "per-device"))]
    only = gpu_session.scaling_configs([2, 4, 8], ("per-device",))
    assert [c.name for c in only] == ["1gpu", "2gpu-per-device", "4gpu-per-device", "8gpu-per-device"]


@pytest.mark.slow
def test_eight_logical_devices_run_the_tools_commands_and_fill_the_reports_scaling_rows(tmp_path: Path) -> None:
    home = tmp_path / "keras"
    prefill_keras_cache(home)
    env = {**os.environ, "KERAS_HOME": str(home), "BENCH_OFFLINE": "1", "KERAS_BACKEND": "jax"}
    env["XLA_FLAGS"] = f"{XLA_DEVICES_FLAG}=8"
    args = Namespace(
        tag="cpu8", backends=("jax",), platform="cpu-x8", carry=tmp_path, epochs=2, train_limit=1024, runner_flags=None
    )
    console = tmp_path / "console.log"
    for config in (gpu_session.ScalingConfig(1, "same-global"), gpu_session.ScalingConfig(8, "per-device")):
        with console.open("a") as out:
            entry = gpu_session._scaling_process(
                args, env, tmp_path / "logs", out, time.monotonic() + 600, "mnist_mlp", config, 1
            )
        assert entry["returncode"] == 0, console.read_text()[-3000:]
    table = scaling_table(load_runs(tmp_path / "logs").runs).set_index(["devices", "batch policy"])
    assert list(table.index) == [(1, "one device"), (8, "per-device")]
    assert table.loc[(8, "per-device")]["global batch"] == 8 * table.loc[(1, "one device")]["global batch"]
