"""The headroom command: a workload's Keras model trained by one compiled program per epoch on JAX, its data on the
device. On this CPU, on tiny synthetic slices: it trains (the loss falls) and records its epochs as JSON."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from campaign import headroom

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "KERAS_BACKEND": "jax", "BENCH_OFFLINE": "1"}


def headroom_command(*args: str, env: dict[str, str] = ENV) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "campaign.headroom", *args], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip


def without_data(tmp_path: Path) -> dict[str, str]:
    """No dataset file anywhere the loaders look, offline."""
    return {**ENV, "BENCH_DATA_DIR": str(tmp_path / "no-data"), "KERAS_HOME": str(tmp_path / "no-keras-home")}


def test_the_command_trains_mnist_mlp_and_writes_its_epochs(tmp_path: Path) -> None:
    out = tmp_path / "headroom.json"
    args = ["--workload", "mnist_mlp", "--synthetic", "--train-limit", "1024", "--epochs", "3", "--out", str(out)]
    done = headroom_command(*args)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(out.read_text())
    assert (record["workload"], record["backend"], record["batch_size"]) == ("mnist_mlp", "jax", 128)
    assert record["steps_per_epoch"] == 1024 // 128 and len(record["epochs"]) == 3
    losses = [e["loss"] for e in record["epochs"]]
    assert losses[-1] < losses[0] * 0.8
    assert record["steady_median_s"] == statistics.median(e["seconds"] for e in record["epochs"][1:])
    assert record["steady_median_s"] < record["first_epoch_s"]  # the first epoch compiles


def test_a_suite_cut_sets_slice_and_epochs_and_missing_data_fall_back_to_synthetic(tmp_path: Path) -> None:
    """`--cut quick` trains the quick suite's slice for its epochs and evaluates its held-out slice each epoch; with
    no MNIST file offline, `--allow-synthetic` trains labelled synthetic data and says so, as the runner does."""
    out = tmp_path / "headroom.json"
    args = ["--workload", "mnist_mlp", "--cut", "quick", "--prefer-dataset", "fashion_mnist", "--allow-synthetic"]
    done = headroom_command(*args, "--out", str(out), env=without_data(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "using labelled synthetic data instead" in done.stderr
    record = json.loads(out.read_text())
    assert (record["cut"], record["source"], record["train_samples"], len(record["epochs"])) == (
        "quick",
        "synthetic",
        6000,
        3,
    )
    assert record["val_samples_evaluated"] == 1000 // 128 * 128
    assert all(e["val_loss"] > 0 for e in record["epochs"])


def test_without_allow_synthetic_missing_data_stop_the_command(tmp_path: Path) -> None:
    out = str(tmp_path / "x.json")
    done = headroom_command("--workload", "imdb_fasttext", "--cut", "quick", "--out", out, env=without_data(tmp_path))
    assert done.returncode != 0 and not (tmp_path / "x.json").exists()


def test_the_other_workloads_train_in_one_process() -> None:
    # One process for three models: importing Keras per workload is slow on this machine. One batch of each (XLA's
    # convolutions inside a scan take seconds a step on a CPU), validated on as many.
    script = (
        "import json\n"
        "from campaign.headroom import train\n"
        "out = {w: train(w, 3, n, 'synthetic', None, val_limit=n) for w, n in "
        "(('mnist_cnn', 128), ('imdb_fasttext', 64), ('cifar10_cnn', 32))}\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-2000:]
    records = json.loads(done.stdout.strip().splitlines()[-1])
    for workload, record in records.items():
        losses = [e["loss"] for e in record["epochs"]]
        assert losses[-1] < losses[0], (workload, losses)
        assert record["steps_per_epoch"] >= 1 and record["source"] == "synthetic"


def test_bad_arguments_stop_before_anything_is_loaded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "x.json"
    assert headroom.main(["--workload", "siamese", "--out", str(out)]) == 2
    assert headroom.main(["--workload", "mnist_mlp", "--epochs", "1", "--out", str(out)]) == 2
    assert headroom.main(["--workload", "mnist_mlp", "--val-limit", "0", "--out", str(out)]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert errors[0].startswith("error: --workload:") and errors[1].startswith("error: --epochs:")
    assert errors[2].startswith("error: --val-limit:")
    assert not out.exists()
