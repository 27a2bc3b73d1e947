"""A real dataset is learned: mnist_mlp on the real Fashion-MNIST passes 85% validation accuracy."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.logs import read_epoch_log
from tests.benchmarks.conftest import run_benchmarks

pytestmark = pytest.mark.slow


def test_mnist_mlp_learns_fashion_mnist(keras_home: Path, tmp_path: Path) -> None:
    args = ["mnist_mlp", "--backend", "jax", "--dataset", "fashion_mnist", "--epochs", "4", "--offline"]
    result = run_benchmarks([*args, "--out", str(tmp_path), "--run-id", "learn"], keras_home)
    assert result.returncode == 0, result.stderr[-3000:]
    log = read_epoch_log(tmp_path / "local" / "learn" / "mnist_mlp_jax.csv")
    assert log.metadata is not None
    data = log.metadata.data
    assert (data.dataset, data.source, data.train_samples, data.val_samples) == ("fashion_mnist", "real", 60000, 10000)
    assert log.final.val_acc > 0.85, [e.val_acc for e in log.epochs]
