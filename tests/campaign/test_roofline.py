"""Where the time goes: the committed model costs recomputed from the models, an analytic check of one, and the
roofline rows, verdicts, section and chart made from the committed H100 and H200 logs."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from benchmarks.logs import find_logs, read_epoch_log, read_metadata
from campaign import roofline
from campaign.designs import fresh_repeat
from campaign.model_costs import load_costs
from report import roofline as generic
from tests.support.datasets import prefill_keras_cache

REPO = Path(__file__).resolve().parents[2]
LOGS = REPO / "logs" / "reference"
# XLA's count of mnist_mlp's train step against the dense layers' matmuls: the elementwise work (activations,
# dropout, softmax, RMSprop's update of 670k weights) adds about 3.5 %.
ANALYTIC_TOLERANCE = 0.05


@pytest.fixture(scope="module")
def recomputed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, float]]:
    # One fresh process: the cost analysis needs Keras on JAX, whatever backend this one imported.
    home = tmp_path_factory.mktemp("keras-home")
    prefill_keras_cache(home)
    done = subprocess.run(
        [sys.executable, "-m", "campaign.model_costs", "mnist_mlp", "imdb_fasttext", "--print"],
        cwd=REPO,
        env={**os.environ, "KERAS_BACKEND": "jax", "KERAS_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return tomllib.loads(done.stdout)


def test_the_committed_costs_are_what_the_models_give(recomputed: dict[str, dict[str, float]]) -> None:
    committed = load_costs()
    assert set(committed) == set(roofline_workloads())
    for name, fresh in recomputed.items():
        kept = committed[name]
        assert fresh["batch_size"] == kept.batch_size and fresh["parameters"] == kept.parameters
        assert fresh["flops_per_step"] == pytest.approx(kept.flops_per_step, rel=0.02)
        assert fresh["bytes_per_step"] == pytest.approx(kept.bytes_per_step, rel=0.1)


def test_each_costed_model_is_the_size_of_the_runs_model() -> None:
    # The optimizer's work per step follows the model's size, which for fastText follows its data's vocabulary.
    costs = load_costs()
    for path in find_logs(LOGS):
        meta = json.loads(path.with_suffix(".json").read_text())
        if meta["run_id"].startswith("gpu-repeats-"):
            assert costs[meta["workload"]].parameters == meta["parameters"], path


def test_mnist_mlp_matches_its_matmuls(recomputed: dict[str, dict[str, float]]) -> None:
    batch, layers = 128, [(784, 512), (512, 512), (512, 10)]
    forward = sum(2 * batch * i * o for i, o in layers)
    # Backward: a weight gradient per layer and an input gradient per layer but the first (nothing needs d/dx).
    analytic = 3 * forward - 2 * batch * 784 * 512
    xla = recomputed["mnist_mlp"]["flops_per_step"]
    assert abs(xla - analytic) / analytic < ANALYTIC_TOLERANCE
    assert xla < 3 * forward  # the textbook 3x overcounts by the unneeded input gradient


def roofline_workloads() -> list[str]:
    from benchmarks.workloads import WORKLOADS

    return list(WORKLOADS)


def test_a_row_is_its_runs_flops_over_their_steady_epochs() -> None:
    table = roofline.rows(LOGS)
    row = next(r for r in table if (r.gpu, r.workload, r.backend) == ("H200", "mnist_cnn", "jax"))
    epochs: list[float] = []
    samples: list[int] = []
    idle: list[float] = []
    for path in find_logs(LOGS / "NVIDIA-H200"):
        meta = read_metadata(path)
        assert meta is not None
        if (meta.workload, meta.backend) != ("mnist_cnn", "jax") or not fresh_repeat(meta):
            continue  # the report pools fresh-process repeats only; other designs are their own configurations
        assert meta.stability is not None
        assert meta.data.train_samples is not None and meta.stability.host_share is not None
        epochs.append(statistics.median(e.elapsed for e in read_epoch_log(path).steady_epochs))
        samples.append(meta.data.train_samples)
        idle.append(meta.stability.host_share)
    cost = load_costs()["mnist_cnn"]
    flops = cost.flops_per_step / cost.batch_size * statistics.median(samples)
    assert row.runs == len(epochs) >= 4
    assert row.tflops == pytest.approx(flops / statistics.median(epochs) / 1e12)
    assert row.busy == pytest.approx(1 - statistics.median(idle))
    assert row.bound == generic.HOST  # the GPU idled most of each epoch


def test_the_bound_by_rule() -> None:
    assert generic.bound_by(0.6, intensity=1000, ridge=100) == generic.HOST
    assert generic.bound_by(0.4, intensity=10, ridge=100) == generic.MEMORY
    assert generic.bound_by(0.4, intensity=1000, ridge=100) == generic.COMPUTE
    assert generic.bound_by(None, intensity=10, ridge=100) == generic.MEMORY


def test_the_datasheet_is_the_board_the_logs_name() -> None:
    sheets = generic.load_datasheets()
    assert sheets["H100"].board.startswith("H100 SXM") and sheets["H100"].memory_tbps == 3.35
    assert sheets["H200"].tf32_tflops == sheets["H100"].tf32_tflops and sheets["H200"].memory_tbps == 4.8
    pcie = generic.Run(1.0, 1.0, 0.5, 300.0, 2000.0, "tf32", "NVIDIA H100 PCIe")
    with pytest.raises(ValueError, match="H100 PCIe"):
        generic.check_board(sheets["H100"], [pcie])


def test_the_section_says_what_bounds_each_workload_and_whether_headroom_was_measured(tmp_path: Path) -> None:
    markdown = tmp_path / "results.md"
    text = roofline.section(LOGS, markdown=markdown)
    table = roofline.rows(LOGS)
    assert text.startswith("## Where the time goes")
    assert text.count("| host |") == sum(r.bound == generic.HOST for r in table)
    for workload in {r.workload for r in table}:
        assert f"- **{workload}**: " in text
    assert "mnist_mlp**: no: " in text  # the H200's MLP runs leave the GPU idle most of each epoch
    assert ("has not been measured on these GPUs" in text) == (not roofline.headroom(LOGS))
    assert "![" in text and (tmp_path / "results_charts" / "roofline.svg").is_file()


def test_the_chart_is_the_same_file_on_every_run(tmp_path: Path) -> None:
    table, sheets = roofline.rows(LOGS), generic.load_datasheets()
    first = roofline.chart(table, sheets, tmp_path / "a")
    second = roofline.chart(table, sheets, tmp_path / "b")
    assert [p.suffix for p in first] == [".png", ".svg"]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(first, second, strict=True))


def test_a_folder_without_the_gpus_is_a_bad_input(tmp_path: Path) -> None:
    assert roofline.main([str(tmp_path)]) == 2


def test_headroom_records_give_the_gpus_share_of_the_keras_epoch(tmp_path: Path) -> None:
    """A collected headroom record of the suite's slice sets the GPU's share against the Keras JAX epoch's median;
    one of another slice is shown but not divided."""
    logs = tmp_path / "logs"
    # The committed H200 headroom is left out: this test's records are the only ones.
    shutil.copytree(LOGS / "NVIDIA-H200", logs / "NVIDIA-H200", ignore=shutil.ignore_patterns("gpu-headroom-*"))
    keras_row = next(r for r in roofline.rows(logs) if (r.gpu, r.workload, r.backend) == ("H200", "mnist_mlp", "jax"))
    folder = logs / "NVIDIA-H200" / "gpu-headroom-t"
    folder.mkdir()
    record = {"workload": "mnist_mlp", "steady_median_s": keras_row.epoch_s / 4, "train_samples": keras_row.samples,
              "val_samples_evaluated": 9984, "source": "real"}  # fmt: skip
    (folder / "mnist_mlp.headroom.json").write_text(json.dumps(record))
    other = {**record, "workload": "mnist_cnn", "train_samples": 1000}
    (folder / "mnist_cnn.headroom.json").write_text(json.dumps(other))
    text = roofline.section(logs)
    assert "has not been measured" not in text
    assert f"| mnist_mlp | H200 | {keras_row.epoch_s:.3f} | {keras_row.epoch_s / 4:.3f} | 1 | 25 % | 75 % |" in text
    assert "| mnist_cnn | H200 | n/a |" in text and "not the suite's slice" in text
