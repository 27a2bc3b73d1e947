"""A run whose process was not a fresh one of its own is labelled apart, from its metadata alone: the design its
starter recorded (`process.design`), or a repeat trained beside other workloads in one process; never from its run
id or folder."""

from __future__ import annotations

from pathlib import Path

from records import loading
from tests.report.report_helpers import write_run


def _labels(root: Path) -> dict[str, str]:
    return {r.run_id: r.config.name for r in loading.load_runs(root).runs}


def test_the_label_follows_the_recorded_design_whatever_the_run_is_called(logs: Path) -> None:
    fresh = {"repeat": {"group": "g", "index": 1}}
    write_run(logs, platform="box", run_id="20260101T000000Z-0001", repeat=1, schema2=fresh)
    forked = {**fresh, "process": {"position": 1, "workloads": 1, "design": "preloaded"}}
    write_run(logs, platform="box", run_id="anything", repeat=2, schema2=forked)
    round_ = {**fresh, "process": {"position": 2, "workloads": 3}}
    write_run(logs, platform="box", run_id="shared-round", repeat=3, schema2=round_)
    suite = {"process": {"position": 2, "workloads": 3}}  # a suite's process is shared by design: no repeat
    write_run(logs, platform="box", run_id="20260101T000000Z-0002", schema2=suite)
    own = {**fresh, "process": {"position": 1, "workloads": 1, "design": "warm-pool"}}
    write_run(logs, platform="box", run_id="pool", repeat=4, schema2=own)
    labels = _labels(logs)
    assert labels["20260101T000000Z-0001"] == labels["20260101T000000Z-0002"] == "box-jax"
    assert labels["anything"] == f"box-jax [{loading.PROCESS_VARIANTS['preloaded']}]"
    assert labels["shared-round"] == f"box-jax [{loading.ROUND_VARIANT}]"
    assert labels["pool"] == "box-jax [process design warm-pool]"


def test_a_label_does_not_depend_on_what_else_was_loaded(logs: Path, tmp_path: Path) -> None:
    forked = {"repeat": {"group": "g", "index": 1}, "process": {"position": 1, "workloads": 1, "design": "staged"}}
    write_run(logs, platform="box", run_id="alone", repeat=1, schema2=forked)
    alone = _labels(logs)["alone"]
    write_run(logs, platform="box", run_id="20260101T000000Z-0001", repeat=1, schema2={"repeat": forked["repeat"]})
    assert _labels(logs)["alone"] == alone == f"box-jax [{loading.PROCESS_VARIANTS['staged']}]"


def test_a_workload_whose_model_sets_its_precision_leaves_the_others_labels_alone(logs: Path) -> None:
    """ResNet-50 trains in mixed precision on a GPU: the other workloads' float32 runs on the same platform and
    backend keep their label, as they had before it was loaded."""
    write_run(logs, platform="box", run_id="mlp", workload="mnist_mlp")
    alone = _labels(logs)["mlp"]
    mixed = {"settings": {"jit_compile": True, "steps_per_execution": 1, "dtype_policy": "mixed_float16"}}
    write_run(logs, platform="box", run_id="resnet", workload="resnet50", schema2=mixed)
    write_run(logs, platform="box", run_id="resnet-f32", workload="resnet50")
    labels = _labels(logs)
    assert labels["mlp"] == alone == "box-jax"
    assert labels["resnet"] == "box-jax [mixed_float16]" and labels["resnet-f32"] == "box-jax [float32]"
