"""Keras against native PyTorch: each Keras backend's time as a multiple of the native twin's, on the same GPU,
from the committed H200 runs of one machine (Keras on JAX, Keras on PyTorch and torch-native beside each other)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from records.loading import load_runs
from report import native_compare
from report.cli import main

RUNS = Path(__file__).resolve().parents[2] / "logs" / "reference" / "NVIDIA-H200" / "gpu-repeats-h200x4-a"


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("native") / "logs"
    shutil.copytree(RUNS, root / "NVIDIA-H200" / RUNS.name)
    return root


def test_each_keras_backend_is_a_multiple_of_the_native_time(logs: Path) -> None:
    section = native_compare.section(load_runs(logs).complete_runs)
    assert section is not None
    rows = {(r.workload, r.backend): r for r in section.rows}
    assert set(rows) == {("resnet50", "jax"), ("resnet50", "torch")}  # the GPT's native run did not complete
    torch = rows["resnet50", "torch"]
    assert 6.0 < torch.ratio < 7.2 and torch.sentence.startswith("Keras on PyTorch: 6.")
    assert torch.sentence.endswith("x the native time (resnet50, H200)")
    assert 0.85 < rows["resnet50", "jax"].ratio < 1.0  # Keras on JAX ahead of the compiled native twin here
    assert all(r.verdict() == "too few repeats" for r in section.rows)  # one run a side: no verdict claimed


def test_the_report_says_it_in_its_summary_and_its_section(logs: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    assert main([str(logs), "--markdown", str(out)]) == 0
    text = out.read_text()
    assert f"## {native_compare.TITLE}" in text and "- Keras on PyTorch: 6." in text
