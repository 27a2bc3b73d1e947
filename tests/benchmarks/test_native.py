"""The torch-native backend: rank and world from a launcher's environment, the native twins trained by the runner
on the CPU, a user's own native file (checked and run), data parallel over two CPU processes (gloo) against one
process of the same global batch, and the one-line refusals."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from benchmarks.harness import processes
from benchmarks.harness.processes import Place, ProcessEnvironmentError, first_host, from_environment
from benchmarks.logs import metadata_path, read_epoch_log
from tests.benchmarks.conftest import REPO, run_benchmarks

TINY = str(REPO / "examples" / "workloads" / "tiny_mlp_torch.py")


def test_no_launcher_is_one_process() -> None:
    assert from_environment({}) == Place()


def test_torchrun_variables_name_rank_world_and_coordinator() -> None:
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "node7", "MASTER_PORT": "1234"}
    place = from_environment(env)
    assert (place.rank, place.world, place.local_rank, place.master_addr, place.master_port) == (3, 4, 1, "node7", 1234)
    assert place.launcher == "torchrun" and place.several and not place.writes_logs
    assert from_environment(place.environment()) == place  # what the launcher sets is what a process reads


def test_slurm_variables_stand_in_where_torchrun_set_none() -> None:
    env = {"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_JOB_NODELIST": "gpu[03-05,09]"}
    place = from_environment(env)
    assert (place.rank, place.world, place.local_rank, place.master_addr) == (5, 8, 1, "gpu03")
    assert place.master_port == processes.DEFAULT_PORT and place.launcher == "slurm"
    assert first_host("node7") == "node7" and first_host("a1,b2") == "a1" and first_host("cn[12,15]") == "cn12"


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"RANK": "x", "WORLD_SIZE": "2"}, "RANK='x'"),
        ({"RANK": "2", "WORLD_SIZE": "2"}, "rank 2 is outside a world of 2"),
        ({"RANK": "0"}, "WORLD_SIZE is not set"),
    ],
)
def test_a_broken_launcher_environment_is_one_line_naming_the_variable(env: dict[str, str], names: str) -> None:
    with pytest.raises(ProcessEnvironmentError, match=names):
        from_environment(env)


@pytest.mark.slow
def test_the_twins_train_their_quick_slices_through_the_runner(keras_home: Path, tmp_path: Path) -> None:
    args = ["run", "--workload", "resnet50,gpt_nietzsche", "--backend", "torch-native", "--suite", "quick"]
    result = run_benchmarks([*args, "--platform", "ci", "--out", str(tmp_path), "--run-id", "n"], keras_home)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for stem, parameters in (
        ("resnet50_torch-native_synthetic", 25_636_712),
        ("gpt_nietzsche_torch-native", 10_763_904),
    ):
        path = tmp_path / "ci" / "n" / f"{stem}.csv"
        meta = json.loads(metadata_path(path).read_text())
        assert meta["status"] == "complete" and meta["backend"] == "torch-native" and meta["epochs_completed"] == 3
        assert meta["parameters"] == parameters  # the Keras model's count: the same network
        assert meta["settings"]["dtype_policy"] == "float32" and meta["software"]["framework"] == "torch"
        assert all(math.isfinite(e.loss) for e in read_epoch_log(path).epochs)


def test_a_native_file_is_checked_and_a_keras_workload_is_refused_on_torch_native(
    keras_home: Path, tmp_path: Path
) -> None:
    check = run_benchmarks(["check-workload", "--workload-file", TINY], keras_home)
    assert check.returncode == 0 and "native model built (6,532 parameters)" in check.stdout, check.stderr[-2000:]
    common = ["--backend", "torch-native", "--suite", "quick", "--out", str(tmp_path)]
    refused = run_benchmarks(["run", "--workload", "mnist_mlp", *common], keras_home)
    assert refused.returncode == 2 and "no native twin of mnist_mlp" in refused.stderr
    keras_file = str(REPO / "examples" / "workloads" / "tiny_mlp.py")
    refused = run_benchmarks(["run", "--workload-file", keras_file, *common, "--allow-synthetic"], keras_home)
    assert refused.returncode == 2 and "is a Keras workload" in refused.stderr.strip().splitlines()[-1]
    refused = run_benchmarks(["run", "--workload-file", TINY, "--backend", "jax", "--out", str(tmp_path)], keras_home)
    assert refused.returncode == 2 and "native PyTorch workload" in refused.stderr.strip().splitlines()[-1]


def _losses(tmp_path: Path, keras_home: Path, gpus: int) -> tuple[list[float], dict]:
    args = ["run", "--workload-file", TINY, "--backend", "torch-native", "--suite", "quick", "--allow-synthetic"]
    args += ["--gpus", str(gpus), "--out", str(tmp_path), "--run-id", f"g{gpus}"]
    result = run_benchmarks(args, keras_home, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.count("wrote ") == 1  # rank 0 alone writes and says so
    [path] = (tmp_path / "local" / f"g{gpus}").glob("*.csv")
    meta = json.loads(metadata_path(path).read_text())
    return [e.loss for e in read_epoch_log(path).epochs], meta


def test_two_gloo_processes_train_the_one_process_steps_of_the_same_global_batch(
    keras_home: Path, tmp_path: Path
) -> None:
    one, _ = _losses(tmp_path, keras_home, 1)
    two, meta = _losses(tmp_path, keras_home, 2)
    assert two == pytest.approx(one, rel=1e-4)  # each process half of every batch, the gradients averaged
    dist = meta["distribution"]
    assert (dist["devices"], dist["replicas"], dist["per_device_batch_size"], dist["device_type"]) == (2, 2, 32, "cpu")
    assert dist["strategy"].startswith("torch.nn.parallel.DistributedDataParallel")
    assert [len(times) for times in dist["process_epoch_s"]] == [3, 3]  # every process's epochs, on rank 0's log
    assert (dist["processes"], dist["collectives"], dist["nodes"], len(dist["process_nodes"])) == (2, "gloo", 1, 2)


def test_a_failing_process_stops_the_job_with_its_status(keras_home: Path, tmp_path: Path) -> None:
    """One process of two dies at start (a bad --val-limit is refused in both; the launcher returns the first)."""
    args = ["run", "--workload-file", TINY, "--backend", "torch-native", "--gpus", "2", "--dataset", "nope"]
    result = run_benchmarks([*args, "--out", str(tmp_path)], keras_home, timeout=120)
    assert result.returncode == 2 and "--dataset 'nope' does not fit tiny_mlp_torch" in result.stderr
    assert not list(tmp_path.rglob("*.csv"))


def test_the_launcher_sets_each_process_its_place(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import launch

    started: list[dict[str, str]] = []

    class Child:
        def __init__(self, command: list[str], env: dict[str, str]) -> None:
            started.append(env)
            self.command = command

        def poll(self) -> int:
            return 0

    monkeypatch.setattr(launch, "device_count", lambda: 0)
    monkeypatch.setattr(launch.subprocess, "Popen", Child)
    assert launch.launch_processes(["run", "--gpus", "3"], 3, "r1") == 0
    assert [(e["RANK"], e["LOCAL_RANK"], e["WORLD_SIZE"]) for e in started] == [
        ("0", "0", "3"),
        ("1", "1", "3"),
        ("2", "2", "3"),
    ]
    assert len({e["MASTER_PORT"] for e in started}) == 1 and os.environ.get("RANK") is None
