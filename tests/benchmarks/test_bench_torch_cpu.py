"""PyTorch on a CPU: its OpenMP threads wait passively unless the user chose otherwise, and the run says which.

With libgomp's default (spinning), a loaded 2-core CPU spent 8 s of CPU on a mnist_mlp epoch that takes 0.7 s, and
a step-by-step Bidirectional LSTM 15-25 s on 1.3 s (docs/cpu.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchmarks.harness.backends import OMP_WAIT_POLICY, prepare_process
from tests.benchmarks.conftest import run_benchmarks

pytestmark = pytest.mark.slow


def test_a_torch_run_waits_passively_and_records_it(
    keras_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(OMP_WAIT_POLICY, raising=False)
    args = ["run", "--workload", "mnist_mlp", "--dataset", "fashion_mnist", "--backend", "torch", "--platform", "ci"]
    args += ["--out", str(tmp_path)]
    args += ["--run-id", "omp", "--epochs", "2", "--train-limit", "256", "--val-limit", "64", "--offline"]
    result = run_benchmarks(args, keras_home, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    [path] = (tmp_path / "ci" / "omp").glob("mnist_mlp_torch*.json")
    assert json.loads(path.read_text())["settings"]["omp_wait_policy"] == "PASSIVE"


def test_a_wait_policy_the_user_set_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OMP_WAIT_POLICY, "ACTIVE")
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    prepare_process("torch")
    assert os.environ[OMP_WAIT_POLICY] == "ACTIVE" and os.environ["KERAS_BACKEND"] == "torch"
    monkeypatch.delenv(OMP_WAIT_POLICY)
    prepare_process("jax")
    assert OMP_WAIT_POLICY not in os.environ  # JAX's CPU threads are not OpenMP's
