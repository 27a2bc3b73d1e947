"""A real (tiny) training run by the project's runner, reported: the report reads what the runner writes."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from report_helpers import REPO

from report.cli import main
from tests.support.datasets import prefill_keras_cache


@pytest.mark.slow
def test_report_on_a_real_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keras_home = tmp_path / "keras"
    prefill_keras_cache(keras_home)
    logs = tmp_path / "logs"
    command = [
        sys.executable,
        "-m",
        "benchmarks",
        "run",
        "--workload",
        "mnist_mlp",
        "--backend",
        "jax",
        "--dataset",
        "fashion_mnist",
        "--platform",
        "local",
        "--out",
        str(logs),
        "--epochs",
        "2",
        "--train-limit",
        "2000",
        "--val-limit",
        "500",
        "--offline",
    ]
    env = {**os.environ, "KERAS_HOME": str(keras_home)}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    (written,) = logs.glob("local/*/mnist_mlp_jax.csv")
    with written.open() as handle:
        elapsed = [float(row["elapsed"]) for row in csv.DictReader(handle)]
    metadata = json.loads(written.with_suffix(".json").read_text())

    out = tmp_path / "report"
    assert main([str(logs), "--out", str(out), "--study", "cpu-or-gpu-2017-07", "--price", "local=0.10"]) == 0
    capsys.readouterr()
    row = pd.read_csv(out / "results.csv").iloc[0]
    assert (row["config"], row["data_source"], row["epochs"], row["train_samples"]) == ("local-jax", "real", 2, 2000)
    assert row["total_s"] == pytest.approx(sum(elapsed))
    assert row["first_epoch_s"] == pytest.approx(elapsed[0])
    assert row["cut_down"]
    measured = pd.read_csv(out / "study_cpu-or-gpu-2017-07_comparison.csv").query("source == 'measured'").iloc[0]
    assert "cut-down run" in measured["notes"] and pd.isna(measured["rel_time_vs_published_base"])
    page = (out / "index.html").read_text()
    assert metadata["hardware"]["cpu_model"] in page
    assert f"jax {metadata['software']['framework_version']}, Keras {metadata['software']['keras']}" in page
