"""`python -m benchmarks suite` resolves each dataset file once, before the backends' processes start: a file that
cannot be had is tried and reported once, not once per workload and backend; the suite ends with where the logs
are and how to report them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_missing_file_is_tried_and_reported_once(tmp_path: Path) -> None:
    # An empty cache and a proxy that refuses: every download attempt fails at once, as on an offline machine.
    env = {**os.environ, "KERAS_HOME": str(tmp_path / "keras"), "PYTHONPATH": str(ROOT)}
    env |= {"https_proxy": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "no_proxy": ""}
    env.pop("BENCH_OFFLINE", None)
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "suite", "--workloads", "mnist_mlp,mnist_cnn", "--backends", "jax,torch",
         "--epochs", "1", "--train-limit", "64", "--val-limit", "32", "--out", str(tmp_path / "logs"),
         "--run-id", "once"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert out.count("Downloading data from https://storage.googleapis.com/") == 1, out
    assert len([line for line in out.splitlines() if line.startswith("note: mnist.npz: ")]) == 1, out
    assert len(list((tmp_path / "logs" / "local" / "once").glob("mnist_*_synthetic.csv"))) == 4
    run_dir = tmp_path / "logs" / "local" / "once"
    assert out.splitlines()[-2:] == [
        f"logs: {run_dir}/ (a CSV and a metadata JSON per workload and backend)",
        f"report: python -m report {run_dir.parent} --out report-out  (or make report: every run under logs/)",
    ]
