"""`python -m benchmarks suite` resolves each dataset file once, before the backends' processes start: a file that
cannot be had is tried and reported once, not once per workload and backend; the suite ends with where the logs
are and how to report them."""

from __future__ import annotations

import os
import shlex
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
        cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert out.count("Downloading data from https://storage.googleapis.com/") == 1, out
    assert len([line for line in out.splitlines() if line.startswith("note: mnist.npz: ")]) == 1, out
    assert len(list((tmp_path / "logs" / "local" / "once").glob("mnist_*_synthetic.csv"))) == 4
    run_dir = tmp_path / "logs" / "local" / "once"
    logs_line, report_line = out.splitlines()[-2:]
    assert logs_line == f"logs: {run_dir}/ (a CSV and a metadata JSON per workload and backend)"
    # The report command works as printed, from where the suite ran, outside any activated virtual environment:
    # `python -m report` was printed once, and there `python` has no Keras.
    command = report_line.removeprefix("report: ").split("  (or make report")[0]
    assert command.startswith(shlex.quote(sys.executable) + " -m report ")
    bare = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    bare["PATH"] = os.pathsep.join(p for p in bare["PATH"].split(os.pathsep) if Path(sys.executable).parent != Path(p))
    report = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=600, env=bare)
    assert report.returncode == 0, report.stdout + report.stderr
    assert (tmp_path / "report-out" / "index.html").exists()
