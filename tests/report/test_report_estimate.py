"""The estimate before renting: from the closest measured run, with its stated range, and the max-lifetime
warning of `orchestrate run --dry-run`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from report_helpers import REPO, write_run

from orchestrate.catalog import load_catalog
from report.estimate import (
    OTHER_ACCELERATOR_FACTOR,
    SAME_ACCELERATOR_FACTOR,
    accelerator_model,
    cpu_machine,
    estimate_lines,
)

H200 = {"hardware": {"cpu_model": "Xeon", "accelerator": "gpu", "gpus": [{"name": "NVIDIA H200"}]}}


@pytest.fixture
def h200_logs(logs: Path) -> Path:
    """One committed reference run of mnist_mlp on an H200: 60,000 samples, first epoch 4 s, steady 0.5 s."""
    reference = logs / "reference" / "NVIDIA-H200"
    write_run(reference, platform="NVIDIA-H200", elapsed=(4.0, 0.5, 0.5, 0.5), schema2=H200)
    return logs


def test_accelerator_names() -> None:
    assert [accelerator_model(t) for t in ("nvidia-h100-80gb", "NVIDIA H200", "Tesla K80", "A10G", None)] == [
        "h100",
        "h200",
        "k80",
        "a10g",
        "cpu",
    ]
    # A CPU machine's description names machine families (n1, e2), not accelerators; an instance family (p2)
    # does not hide the GPU named after it; a GPU of no known model is named as written.
    assert accelerator_model("GCE preemptible n1-highcpu-32 (Skylake)") == "cpu"
    assert accelerator_model("AWS p2.xlarge: half a Tesla K80") == "k80"
    assert accelerator_model("GeForce GTX 1070 Ti 8 GB") == "geforce gtx 1070 ti 8 gb"
    # CPU machines of one family but another size are not "the same accelerator".
    assert cpu_machine("GCE preemptible n1-highcpu-16 (Skylake)") == "cpu:n1-highcpu-16"
    assert cpu_machine("aws-c5.4xlarge") == "cpu:c5.4xlarge" and cpu_machine("local") == "cpu"


def test_estimate_from_the_closest_run(h200_logs: Path) -> None:
    catalog = load_catalog()
    items = [("mnist_mlp", "jax"), ("twitter_sentiment_bilstm", "jax")]
    lines = estimate_lines(catalog["runpod-h200"], "quick", items, False, 3600, h200_logs)
    # The quick suite: 3 epochs of 6,000 samples; the run had 60,000: 4 s + 2 x 0.5 s x 0.1 = 4.1 s.
    assert any("mnist_mlp [jax]: 4 s (x/÷ 1.5): reference NVIDIA-H200-jax" in line for line in lines)
    assert any("twitter_sentiment_bilstm [jax]: not estimated" in line for line in lines)
    assert any("1 run(s) not estimated: the totals are lower bounds" in line for line in lines)
    assert 4.1 * SAME_ACCELERATOR_FACTOR < 60  # so the whole range is billed the profile's 60 s minimum:
    assert any("about $0.08 ($0.08 to $0.08) at $4.5900/h" in line for line in lines)
    assert not any(line.startswith("warning") for line in lines)
    other = estimate_lines(catalog["gce-t4"], "quick", items[:1], False, 3600, h200_logs)
    assert f"(x/÷ {OTHER_ACCELERATOR_FACTOR:g})" in other[1] and "(a h200, not a t4)" in other[1]


def test_warning_when_the_estimate_outlives_the_machine(h200_logs: Path) -> None:
    profile = load_catalog()["runpod-h200"]
    # The full suite: 20 epochs of all 60,000 samples: 4 + 19 x 0.5 = 13.5 s, up to 20.25 s with the range.
    lines = estimate_lines(profile, "full", [("mnist_mlp", "jax")] * 3, False, 60, h200_logs)
    assert "mnist_mlp [jax] x3: 14 s (x/÷ 1.5)" in lines[1]  # three repeats: 40.5 s, up to 60.75 s
    assert lines[-1].startswith("warning: the estimate reaches 1.0 min, beyond --max-lifetime 1 min")
    assert not estimate_lines(profile, "full", [("mnist_mlp", "jax")] * 3, False, 61, h200_logs)[-1].startswith("warn")


def test_dry_run_prints_the_estimate(h200_logs: Path, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "orchestrate", "run", "--profile", "runpod-h200", "--host", "root@pod.invalid"]
    command += ["--suite", "quick", "--backends", "jax", "--workloads", "mnist_mlp", "--logs", str(h200_logs)]
    done = subprocess.run(
        [*command, "--dry-run", "--max-lifetime", "1"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "mnist_mlp [jax]: 4 s (x/÷ 1.5)" in done.stdout
