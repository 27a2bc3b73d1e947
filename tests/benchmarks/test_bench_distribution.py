"""Data-parallel `--gpus N`: flag validation, batch and learning-rate policies, and every workload trained on two
logical CPU devices, on JAX (XLA's host-device flag) and on TensorFlow (logical CPU devices).

Each backend runs in one subprocess that imports its framework once and trains all nine workloads on a tiny slice.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import cli, workloads
from benchmarks.harness import distribution
from benchmarks.harness.distribution import Devices, DistributionError
from benchmarks.logs import metadata_path, read_epoch_log
from benchmarks.workloads import REFERENCE_WORKLOADS, spec
from tests.benchmarks.conftest import REPO

# The 2017-2018 scripts, which train on these tiny slices in seconds; the reference workloads (ResNet-50, the GPT)
# are trained data parallel on their own quick slices in test_reference_workloads.py.
WORKLOADS = tuple(w for w in workloads.WORKLOADS if w not in REFERENCE_WORKLOADS)

TWO_CPUS = Devices("jax", ("cpu:0", "cpu:1"), "cpu", "cpu")
# JAX trains a steady epoch after the compiling one; on TensorFlow a second epoch over 2 logical CPU devices costs as
# much as the first, and one is enough to show that the mirrored model trained.
EPOCHS = {"jax": 2, "tensorflow": 1}

# In the subprocess, after training: the batches the self-batching loaders draw under the policy, and how
# split_evenly cuts arrays (7 samples, dict targets) and a PyDataset's short batch for two devices.
PROBE = """
import json, sys
from benchmarks import cli

code = cli.main(sys.argv[1:])  # sets KERAS_BACKEND, then imports Keras and the framework

import numpy as np
import keras
from benchmarks.data.types import Data, DataInfo, DataRequest
from benchmarks.harness import distribution
from benchmarks.workloads import cifar10_cnn, siamese_lstm


request = DataRequest("synthetic", train_limit=128, val_limit=64, batch_size=64)
cifar, pairs = cifar10_cnn.load_data(request, None), siamese_lstm.load_data(request, None)

class Short(keras.utils.PyDataset):
    def __len__(self):
        return 2
    def __getitem__(self, i):
        n = 4 if i == 0 else 3
        return (np.zeros((n, 2)), np.zeros((n, 2))), np.zeros(n)

dist = distribution.plan(distribution.resolve_devices(sys.argv[sys.argv.index("--backend") + 1], 2), "same-global", 32)
data = Data(np.arange(7), {"a": np.arange(7), "b": np.arange(7)}, Short(), None, DataInfo("d", "real", 7, 7))
even, dist = distribution.split_evenly(data, dist)
print("PROBE " + json.dumps({
    "code": code,
    "cifar_batch": len(cifar.x_train[0][0]),
    "pair_batch": len(pairs.x_train[0][1]),
    "x": even.x_train.tolist(),
    "y_b": even.y_train["b"].tolist(),
    "train_samples": even.info.train_samples,
    "dropped": dist.dropped_samples,
    "val_batches": [len(even.x_val[i][1]) for i in range(2)],
}))
"""


def _train_everything(backend: str, policy: str, keras_home: Path, out: Path) -> dict[str, Any]:
    args = ["run", "--workload", ",".join(WORKLOADS), "--backend", backend, "--gpus", "2", "--batch-policy", policy]
    args += ["--platform", "ci", "--out", str(out), "--run-id", "dp", "--epochs", str(EPOCHS[backend])]
    args += ["--train-limit", "131", "--val-limit", "33", "--allow-synthetic", "--offline"]
    env = {**os.environ, "KERAS_HOME": str(keras_home), "BENCH_OFFLINE": "1", "KERAS_BACKEND": backend}
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {distribution.XLA_DEVICES_FLAG}=2".strip()
    env.pop("BENCH_DATA_DIR", None)
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    [probe] = [line.removeprefix("PROBE ") for line in result.stdout.splitlines() if line.startswith("PROBE ")]
    return json.loads(probe)


@pytest.fixture(scope="module")
def jax_runs(keras_home: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("jax")
    return out / "ci" / "dp", _train_everything("jax", "per-device", keras_home, out)


@pytest.fixture(scope="module")
def tensorflow_runs(keras_home: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("tensorflow")
    return out / "ci" / "dp", _train_everything("tensorflow", "same-global", keras_home, out)


def _check_run(run_dir: Path, workload: str, backend: str) -> dict[str, Any]:
    [path] = list(run_dir.glob(f"{workload}_{backend}*.csv"))
    log = read_epoch_log(path)
    meta = json.loads(metadata_path(path).read_text())  # the file as written
    assert meta is not None and meta["status"] == "complete" and meta["epochs_completed"] == EPOCHS[backend]
    assert all(e.loss is not None and math.isfinite(e.loss) for e in log.epochs)
    dist = meta["distribution"]
    assert (dist["devices"], dist["replicas"], dist["device_type"]) == (2, 2, "cpu")
    assert dist["strategy"] == distribution.STRATEGIES[backend]
    assert dist["global_batch_size"] == meta["hyperparameters"]["batch_size"]
    assert dist["per_device_batch_size"] * 2 == dist["global_batch_size"]
    assert dist["published_batch_size"] == spec(workload).batch_size
    assert meta["data"]["train_samples"] % 2 == 0 and meta["data"]["val_samples"] % 2 == 0
    return dist


@pytest.mark.parametrize("workload", WORKLOADS)
def test_jax_trains_every_workload_per_device(jax_runs: tuple[Path, dict[str, Any]], workload: str) -> None:
    dist = _check_run(jax_runs[0], workload, "jax")
    assert dist["batch_policy"] == "per-device" and dist["global_batch_size"] == 2 * spec(workload).batch_size
    assert dist["learning_rate_rule"] == "sqrt"
    assert dist["learning_rate"] == pytest.approx(dist["published_learning_rate"] * math.sqrt(2))
    assert dist["published_learning_rate"] == spec(workload).hyperparameters["learning_rate"]


@pytest.mark.parametrize("workload", WORKLOADS)
def test_tensorflow_trains_every_workload_same_global(
    tensorflow_runs: tuple[Path, dict[str, Any]], workload: str
) -> None:
    dist = _check_run(tensorflow_runs[0], workload, "tensorflow")
    assert dist["batch_policy"] == "same-global" and dist["global_batch_size"] == spec(workload).batch_size
    assert dist["learning_rate_rule"] == "none" and dist["learning_rate_factor"] == 1.0
    assert dist["learning_rate"] == dist["published_learning_rate"] == spec(workload).hyperparameters["learning_rate"]


@pytest.mark.parametrize("backend", ["jax", "tensorflow"])
def test_batches_split_evenly_and_self_batching_loaders_follow_the_policy(
    backend: str, jax_runs: tuple[Path, dict[str, Any]], tensorflow_runs: tuple[Path, dict[str, Any]]
) -> None:
    probe = (jax_runs if backend == "jax" else tensorflow_runs)[1]
    assert (probe["cifar_batch"], probe["pair_batch"]) == (64, 64)
    assert probe["x"] == probe["y_b"] == [0, 1, 2, 3, 4, 5]
    assert (probe["train_samples"], probe["dropped"]) == (6, [1, 0])
    assert probe["val_batches"] == [4, 2]  # the PyDataset's short batch of 3 is cut to 2


@pytest.mark.parametrize(
    ("text", "expected"), [("1", 1), ("8", 8), ("all", "all")]
)  # fmt: skip
def test_gpus_accepts_counts_and_all(text: str, expected: int | str) -> None:
    assert distribution.parse_gpus(text) == expected


@pytest.mark.parametrize("text", ["0", "-2", "two", "", "1.5"])
def test_gpus_refuses_anything_else(text: str) -> None:
    with pytest.raises(DistributionError, match="expected a positive integer or 'all'"):
        distribution.parse_gpus(text)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--backend", "torch", "--gpus", "2"], "--gpus: the torch backend trains on one device only"),
        (["--backend", "jax", "--gpus", "0"], "argument --gpus: expected a positive integer or 'all', got 0"),
        (["--backend", "jax", "--batch-policy", "linear"], "argument --batch-policy: invalid choice: 'linear'"),
    ],
)
def test_bad_flags_exit_2_with_one_line_before_any_framework(
    args: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    frameworks = {"jax", "tensorflow", "torch", "keras"}
    before = frameworks & set(sys.modules)
    try:
        code = cli.main(["run", "--workload", "mnist_mlp", *args])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and expected in err[-1]
    assert frameworks & set(sys.modules) == before


def test_suite_refuses_torch_on_several_devices_before_starting_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["suite", "--backends", "jax,torch", "--gpus", "2", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["error: " + distribution.TORCH_UNSUPPORTED]
    assert not any(tmp_path.iterdir())


def test_torch_may_ask_for_one_device_or_all() -> None:
    distribution.check_request("torch", 1, "per-device")
    distribution.check_request("torch", "all", "same-global")  # refused later only if "all" finds several GPUs


def test_same_global_keeps_the_published_batch_and_rate() -> None:
    four = Devices("jax", tuple(f"gpu:{i}" for i in range(4)), "gpu", "NVIDIA H200")
    dist = distribution.plan(four, "same-global", 128)
    assert (dist.global_batch_size, dist.per_device_batch_size, dist.learning_rate_factor) == (128, 32, 1.0)
    assert dist.as_dict()["strategy"] == "keras.distribution.DataParallel"


def test_same_global_refuses_a_batch_that_does_not_split() -> None:
    three = Devices("tensorflow", ("/gpu:0", "/gpu:1", "/gpu:2"), "gpu", "NVIDIA H200")
    with pytest.raises(DistributionError, match="--batch-policy same-global: the published batch of 32 does not"):
        distribution.plan(three, "same-global", 32)


def test_per_device_multiplies_the_batch_and_scales_the_rate_by_sqrt() -> None:
    dist = distribution.plan(TWO_CPUS, "per-device", 32)
    assert (dist.global_batch_size, dist.per_device_batch_size) == (64, 32)
    assert dist.learning_rate_factor == pytest.approx(math.sqrt(2))
    one = distribution.plan(Devices("torch", ("cpu",), "cpu", "cpu"), "per-device", 32)
    assert (one.global_batch_size, one.learning_rate_factor, one.devices.strategy) == (32, 1.0, None)


def test_limits_round_down_to_the_devices() -> None:
    dist = distribution.plan(TWO_CPUS, "same-global", 32)
    assert [dist.even(n) for n in (None, 33, 32, 1)] == [None, 32, 32, 2]


class FakeOptimizer:
    """get_config/from_config as Keras optimizers have them, without importing a framework."""

    def __init__(self, learning_rate: Any) -> None:
        self.learning_rate = learning_rate

    def get_config(self) -> dict[str, Any]:
        return {"name": "fake", "learning_rate": self.learning_rate}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> FakeOptimizer:
        return cls(config["learning_rate"])


def test_learning_rate_is_scaled_and_recorded() -> None:
    dist = distribution.plan(TWO_CPUS, "per-device", 128)
    args, dist = distribution.scale_learning_rate({"optimizer": FakeOptimizer(0.0010000000474974513)}, dist)
    assert args["optimizer"].learning_rate == pytest.approx(0.001 * math.sqrt(2))
    assert (dist.published_learning_rate, dist.learning_rate) == (0.001, pytest.approx(0.001 * math.sqrt(2)))
    assert dist.trained() == {"batch_size": 256, "learning_rate": dist.learning_rate}


def test_a_scaled_optimizer_keeps_the_variables_excluded_from_weight_decay() -> None:
    import keras

    optimizer = keras.optimizers.AdamW(learning_rate=1e-3, weight_decay=0.1)
    optimizer.exclude_from_weight_decay(var_names=["gamma"])
    args, _ = distribution.scale_learning_rate({"optimizer": optimizer}, distribution.plan(TWO_CPUS, "per-device", 64))
    scaled = args["optimizer"]
    assert scaled is not optimizer and float(scaled.learning_rate) == pytest.approx(1e-3 * math.sqrt(2))
    assert not scaled._use_weight_decay(keras.Variable([1.0], name="gamma"))
    assert scaled._use_weight_decay(keras.Variable([[1.0]], name="kernel"))


def test_inverse_time_decay_starts_scaled_and_decays_per_sample_as_published() -> None:
    schedule = {
        "module": "keras.optimizers.schedules",
        "class_name": "InverseTimeDecay",
        "config": {"initial_learning_rate": 1e-4, "decay_steps": 1, "decay_rate": 1e-6, "staircase": False},
    }
    dist = distribution.plan(TWO_CPUS, "per-device", 32)
    args, dist = distribution.scale_learning_rate({"optimizer": FakeOptimizer(schedule)}, dist)
    scaled = args["optimizer"].learning_rate["config"]
    assert scaled["initial_learning_rate"] == pytest.approx(1e-4 * math.sqrt(2))
    assert scaled["decay_rate"] == pytest.approx(2e-6)  # half the steps per epoch
    assert schedule["config"]["decay_rate"] == 1e-6  # the workload's own schedule is left alone
    assert dist.published_learning_rate == 1e-4


def test_an_unknown_schedule_is_refused() -> None:
    dist = distribution.plan(TWO_CPUS, "per-device", 32)
    with pytest.raises(DistributionError, match="no scaling rule for the schedule 'CosineDecay'"):
        distribution.scale_learning_rate({"optimizer": FakeOptimizer({"class_name": "CosineDecay"})}, dist)


def test_one_device_changes_nothing() -> None:
    one = distribution.plan(Devices("jax", ("cpu:0",), "cpu", "cpu"), "same-global", 128)
    optimizer = FakeOptimizer(0.01)
    args, one = distribution.scale_learning_rate({"optimizer": optimizer}, one)
    assert args["optimizer"] is optimizer and one.learning_rate == 0.01
    data = object()
    assert distribution.split_evenly(data, one) == (data, one)  # type: ignore[arg-type]
