"""Fixtures for the benchmark-core tests: a Keras cache pre-filled with the real datasets this machine has."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.datasets import prefill_keras_cache

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def keras_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("keras-home")
    prefill_keras_cache(home)
    return home


def run_benchmarks(
    args: list[str], keras_home: Path, timeout: int = 900, module: str = "benchmarks"
) -> subprocess.CompletedProcess[str]:
    """`python -m MODULE ARGS` (the runner by default) in a fresh process, offline, with the pre-filled cache."""
    env = {**os.environ, "KERAS_HOME": str(keras_home), "BENCH_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("BENCH_DATA_DIR", None)
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
