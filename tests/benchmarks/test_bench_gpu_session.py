"""The GPU-session script's planning and result collection, checked on the CPU."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from benchmarks import gpu_session
from benchmarks.logs import EpochLogWriter, EpochRecord, LogFormatError, write_metadata
from benchmarks.workloads import WORKLOADS, spec


def test_sweep_runs_defaults_first_and_alternatives_where_they_apply() -> None:
    items = gpu_session.plan("sweep", ["jax", "torch"])
    configs = [(item.backend, item.config) for item in items]
    assert configs[:2] == [("jax", "default"), ("torch", "default")]
    by_config = {(item.backend, item.config): item for item in items}
    assert by_config["jax", "default"].workloads == WORKLOADS
    assert by_config["jax", "jit-off"].workloads == gpu_session.EAGER_JAX_WORKLOADS
    assert by_config["torch", "torch-compile"].workloads == gpu_session.TORCH_COMPILE_WORKLOADS
    assert ("torch", "steps-per-execution-8") not in by_config  # Keras allows only 1 on torch
    assert all(item.epochs == gpu_session.SWEEP_EPOCHS for item in items)
    # Both LSTM kernels are timed on the same slice, so their epochs compare.
    cudnn, generic = by_config["torch", "lstm-cudnn-slice"], by_config["torch", "lstm-generic-slice"]
    assert cudnn.workloads == generic.workloads == gpu_session.LSTM_SLICE_WORKLOADS
    assert cudnn.flags[:2] == ("--lstm-kernel", "auto") and generic.flags[:2] == ("--lstm-kernel", "generic")
    assert cudnn.flags[2:] == generic.flags[2:] == gpu_session.LSTM_SLICE


def test_configurations_name_real_workloads_and_slices_count_samples() -> None:
    for configs in gpu_session.CONFIGURATIONS.values():
        for config in configs.values():
            assert set(config.workloads) <= set(WORKLOADS)
    for name in gpu_session.LSTM_SLICE_WORKLOADS:
        assert spec(name).uses_lstm and spec(name).datasets[0] in ("imdb", "voxceleb")
    assert set(gpu_session.LSTM_WORKLOADS) == {name for name in WORKLOADS if spec(name).uses_lstm}


def test_a_sweep_can_be_narrowed_to_some_configurations() -> None:
    items = gpu_session.plan("sweep", ["jax"], configs=["steps-per-execution-8"])
    assert [(i.backend, i.config) for i in items] == [("jax", "steps-per-execution-8")]


def test_suite_runs_every_workload_with_published_epochs() -> None:
    [jax, torch] = gpu_session.plan("suite", ["jax", "torch"], dataset="fashion_mnist")
    command = jax.command("python3", "h100", Path("/out"))
    assert jax.workloads == WORKLOADS and jax.epochs is None and "--epochs" not in command
    assert command[command.index("--suite") + 1] == "bounded"
    assert command[command.index("--prefer-dataset") + 1] == "fashion_mnist"
    assert command[command.index("--run-id") + 1] == "gpu-suite-jax-default" and torch.backend == "torch"


def test_fashion_mnist_stands_in_only_when_mnist_was_not_carried(tmp_path: Path) -> None:
    datasets = tmp_path / "keras" / "datasets"
    (datasets / "fashion-mnist").mkdir(parents=True)
    assert gpu_session._preferred_dataset(tmp_path) == "fashion_mnist"
    (datasets / "mnist.npz").write_bytes(b"")
    assert gpu_session._preferred_dataset(tmp_path) is None


def test_an_item_past_the_budget_is_skipped_not_started(tmp_path: Path) -> None:
    [item] = gpu_session.plan("suite", ["jax"])
    entry = gpu_session._run_item(item, "gpu", tmp_path, {}, None, deadline=0.0)
    assert entry["skipped"] == "time budget spent" and entry["returncode"] is None


def _write_run(root: Path, name: str, status: str = "complete") -> Path:
    path = root / "h100" / "gpu-suite-jax-default" / name
    writer = EpochLogWriter(path)
    writer.append(EpochRecord(0, 3.0, 0.5, 0.8, 0.4, 0.85, 20000.0, True, 60000, 0.0))
    writer.append(EpochRecord(1, 1.0, 0.3, 0.9, 0.3, 0.88, 60000.0, False, 60000, 3.0))
    writer.close()
    write_metadata(path, {"workload": "mnist_mlp", "backend": "jax", "status": status})
    return path


def test_collect_unpacks_into_the_log_tree_and_reads_every_log(tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    _write_run(remote, "mnist_mlp_jax.csv")
    _write_run(remote, "cifar10_cnn_jax.csv", status="running")  # stopped at the time budget
    tarball = tmp_path / "logs-suite-jax.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(remote, arcname=".")
    collected = gpu_session.collect([tarball], tmp_path / "logs")
    assert collected == [tmp_path / "logs" / "h100" / "gpu-suite-jax-default" / "mnist_mlp_jax.csv"]
    assert collected[0].with_suffix(".json").is_file()


def _write_timed(root: Path, run_id: str, steady: float, samples: int = 60000, **settings) -> None:
    path = root / "h200" / run_id / "mnist_mlp_torch.csv"
    writer = EpochLogWriter(path)
    writer.append(EpochRecord(0, 9.0, compiled=True))
    writer.append(EpochRecord(1, steady, compiled=False))
    writer.append(EpochRecord(2, steady * 1.2, compiled=False))
    writer.close()
    meta = {"workload": "mnist_mlp", "backend": "torch", "status": "complete", "run_id": run_id}
    meta |= {"data": {"train_samples": samples}, "settings": {"steps_per_execution": 1, **settings}}
    write_metadata(path, meta)


def test_configuration_table_marks_the_default_and_the_fastest_among_comparable_runs(tmp_path: Path) -> None:
    _write_timed(tmp_path, "gpu-suite-torch-default", 1.0, jit_compile=False, float32_matmul="tf32")
    _write_timed(tmp_path, "gpu-sweep-torch-torch-compile", 0.5, jit_compile=True, float32_matmul="tf32")
    _write_timed(tmp_path, "gpu-sweep-torch-slice", 0.1, samples=2500, jit_compile=False)  # compares with no other
    table = gpu_session.configuration_table(tmp_path)
    assert "| jit on, 1 step/exec, tf32 matmul **fastest** | sweep-torch-torch-compile | 0.55 | 9.00 | 3 |" in table
    assert "| jit off, 1 step/exec, tf32 matmul **default** | suite-torch-default | 1.10 | 9.00 | 3 |" in table
    assert "| 2,500 | jit off, 1 step/exec, framework-default matmul | sweep-torch-slice | 0.11 |" in table
    [problem] = gpu_session.slower_defaults(tmp_path)
    assert problem.startswith("mnist_mlp on torch: the default (jit off, 1 step/exec, tf32 matmul) takes 1.10 s")


def test_a_default_within_the_run_to_run_spread_of_the_fastest_passes(tmp_path: Path) -> None:
    _write_timed(tmp_path, "gpu-suite-torch-default", 1.05, jit_compile=False)
    _write_timed(tmp_path, "gpu-sweep-torch-torch-compile", 1.0, jit_compile=True)
    assert gpu_session.slower_defaults(tmp_path) == []
    assert gpu_session.slower_defaults(tmp_path, tolerance=0.01) != []


COMMITTED_GPU_LOGS = Path(__file__).resolve().parents[2] / "logs" / "reference" / "NVIDIA-H200"


def test_committed_gpu_defaults_are_the_fastest_configurations_measured() -> None:
    assert gpu_session.slower_defaults(COMMITTED_GPU_LOGS) == []


def test_committed_default_runs_ran_with_the_current_gpu_defaults() -> None:
    from benchmarks.harness.backends import default_settings

    defaults = [m for m in gpu_session.measurements(COMMITTED_GPU_LOGS) if m.is_default]
    assert {(m.backend, m.workload) for m in defaults} == {(b, w) for b in ("jax", "torch") for w in WORKLOADS}
    for path in COMMITTED_GPU_LOGS.glob("gpu-suite-*-default/*.json"):
        meta = json.loads(path.read_text())
        recorded, expected = meta["settings"], default_settings(meta["backend"], meta["workload"], gpu=True)
        jit = expected.jit_compile if expected.jit_compile != "auto" else meta["backend"] != "torch"
        assert (recorded["jit_compile"], recorded["steps_per_execution"]) == (jit, expected.steps_per_execution), path
        if spec(meta["workload"]).uses_lstm:
            assert recorded["use_cudnn"] == expected.use_cudnn, path
        # Runs from before the precision was recorded ran with each framework's default (docs/results.md).
        assert recorded.get("float32_matmul", expected.float32_matmul) == expected.float32_matmul, path


def test_collect_rejects_a_broken_log(tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    path = _write_run(remote, "mnist_mlp_jax.csv")
    path.write_text("epoch,elapsed\n0,soon\n")
    tarball = tmp_path / "logs.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(remote, arcname=".")
    with pytest.raises(LogFormatError, match="bad value"):
        gpu_session.collect([tarball], tmp_path / "logs")
