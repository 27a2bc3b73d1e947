"""`make overhead` (python -m benchmarks.overhead): the harness's overhead measured on a real fit, offline."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.benchmarks.conftest import REPO


def test_overhead_measures_a_real_fit_and_prints_both_figures(keras_home: Path) -> None:
    env = {**os.environ, "KERAS_HOME": str(keras_home), "BENCH_OFFLINE": "1"}
    args = ["--workload", "mnist_mlp", "--backend", "jax", "--dataset", "fashion_mnist"]  # as the Makefile runs it
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.overhead", *args, "--epochs", "1", "--repeats", "2", "--train-limit", "512"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "harness overhead: mnist_mlp on jax (real data" in result.stdout
    direct = re.search(r"direct \(harness work\):\s+([\d.]+) ms/epoch", result.stdout)
    assert direct and float(direct.group(1)) > 0, result.stdout
    assert re.search(r"A/B median difference:\s+[+-][\d.]+ ms/epoch", result.stdout), result.stdout
