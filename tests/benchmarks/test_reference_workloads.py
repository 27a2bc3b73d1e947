"""The GPU-loading reference workloads (resnet50, gpt_nietzsche): registered in the plain suites only, their data's
shapes and labels, the real-image path with generated JPEGs, mixed precision where a GPU is seen, and their quick
slices trained end to end on every backend."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks.data import images
from benchmarks.data.files import DatasetUnavailable, FileLocations
from benchmarks.data.types import DataRequest
from benchmarks.harness import backends
from benchmarks.harness.backends import BACKENDS
from benchmarks.logs import metadata_path, read_epoch_log
from benchmarks.step_costs import train_state
from benchmarks.suites import KERAS_2017, SUITES
from benchmarks.workloads import WORKLOADS, spec
from tests.benchmarks.conftest import run_benchmarks

REFERENCE = ("resnet50", "gpt_nietzsche")


def test_they_are_in_the_plain_suites_and_in_no_study_suite() -> None:
    for name in REFERENCE:
        assert name in WORKLOADS and spec(name).short is not None and spec(name).short.epochs == 5
    for suite in SUITES.values():
        plain = suite.name in ("quick", "short", "bounded", "full")
        assert all((name in suite.workloads) == plain for name in REFERENCE), suite.name
    assert not set(REFERENCE) & set(KERAS_2017)


def test_synthetic_imagenet_batches_are_224_px_uint8_labelled_synthetic() -> None:
    from benchmarks.workloads import resnet50

    data = resnet50.load_data(DataRequest("synthetic", train_limit=20, val_limit=6, batch_size=8), _nowhere())
    assert (data.info.dataset, data.info.source) == ("synthetic:imagenet", "synthetic")
    assert (data.info.train_samples, data.info.val_samples) == (20, 6)
    assert len(data.x_train) == 3 and len(data.x_val) == 1 and data.extras["classes"] == 1000
    x, y = data.x_train[0]
    assert x.shape == (8, 224, 224, 3) and x.dtype == np.uint8 and y.dtype == np.int32
    assert data.x_train[2][0].shape == (4, 224, 224, 3)  # the last batch holds the remainder
    assert y.min() >= 0 and y.max() < 1000


def test_an_epoch_longer_than_the_pool_cycles_through_it() -> None:
    pool, labels = np.arange(5 * 2).reshape(5, 2), np.arange(5)
    batches = images.CyclicBatches(pool, labels, samples=12, batch_size=4)
    assert len(batches) == 3
    assert [batches[i][1].tolist() for i in range(3)] == [[0, 1, 2, 3], [4, 0, 1, 2], [3, 4, 0, 1]]


def test_the_synthetic_classes_carry_a_learnable_pattern() -> None:
    from benchmarks.data import synthetic

    x, y = synthetic.imagenet_like(64, 32, classes=2, seed=3)
    means = [x[y == label].reshape(-1, 3 * 32 * 32).mean(axis=0) for label in (0, 1)]
    assert np.abs(means[0] - means[1]).mean() > 20  # the class patterns differ well beyond the noise's spread


def _nowhere() -> FileLocations:
    return FileLocations(Path("/nonexistent/cache"), None, offline=True)


def write_jpegs(root: Path, split: str, per_class: dict[str, int]) -> None:
    """Small JPEGs of different sizes and modes in class folders, as a user's data would be."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for name, count in per_class.items():
        folder = root / "imagenet" / split / name
        folder.mkdir(parents=True)
        for i in range(count):
            size = (40 + 7 * i, 30 + 5 * i)
            pixels = rng.integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
            image = Image.fromarray(pixels)
            (image.convert("L") if i % 2 else image).save(folder / f"{name}_{i}.JPEG")
        (folder / "notes.txt").write_text("not an image")


def test_real_images_are_read_from_class_folders(tmp_path: Path) -> None:
    from benchmarks.workloads import resnet50

    write_jpegs(tmp_path, "train", {"cat": 3, "dog": 2})
    write_jpegs(tmp_path, "val", {"dog": 2})
    where = FileLocations(tmp_path / "cache", tmp_path, offline=True)
    data = resnet50.load_data(DataRequest("imagenet", batch_size=4), where)
    assert (data.info.dataset, data.info.source, data.info.train_samples, data.info.val_samples) == (
        "imagenet", "real", 5, 2,
    )  # fmt: skip
    assert data.extras["classes"] == 2
    assert data.info.files[0] == {"name": str(tmp_path / "imagenet/train"), "images": "5", "classes": "2"}
    x, y = data.x_train[0]
    assert x.shape == (4, 224, 224, 3) and x.dtype == np.uint8 and data.x_train[1][0].shape == (1, 224, 224, 3)
    folder = images.scan(tmp_path / "imagenet/train", seed=1337)
    expected = [folder.classes.index(path.parent.name) for path in folder.files[:4]]
    assert y.tolist() == expected
    assert data.x_val[0][1].tolist() == [1, 1]  # "dog" is class 1 of the training split's classes
    limited = resnet50.load_data(DataRequest("imagenet", train_limit=2, val_limit=1, batch_size=4), where)
    assert (limited.info.train_samples, limited.info.val_samples) == (2, 1)


def test_real_images_missing_or_mislabelled_are_one_line_errors(tmp_path: Path) -> None:
    from benchmarks.workloads import resnet50

    with pytest.raises(DatasetUnavailable, match=r"^imagenet: no folder imagenet/train .*--data-dir"):
        resnet50.load_data(DataRequest("imagenet"), FileLocations(tmp_path / "cache", tmp_path, offline=True))
    write_jpegs(tmp_path, "train", {"cat": 1})
    write_jpegs(tmp_path, "val", {"cow": 1})
    with pytest.raises(DatasetUnavailable, match=r"class folders cow are not in the training split"):
        resnet50.load_data(DataRequest("imagenet"), FileLocations(tmp_path / "cache", tmp_path, offline=True))


def test_gpt_windows_are_the_text_and_the_text_one_character_on(keras_home: Path) -> None:
    from benchmarks.workloads import gpt_nietzsche

    where = FileLocations(keras_home / "datasets", None, offline=True)
    data = gpt_nietzsche.load_data(DataRequest("nietzsche", train_limit=100, val_limit=10), where)
    assert data.x_train.shape == data.y_train.shape == (100, 256) and data.x_val.shape == (10, 256)
    assert (data.x_train[:, 1:] == data.y_train[:, :-1]).all()
    assert (data.x_train[1, :-64] == data.x_train[0, 64:]).all()  # training windows every 64 characters
    assert (data.info.dataset, data.info.source, data.info.train_samples) == ("nietzsche", "real", 100)
    full = gpt_nietzsche.load_data(DataRequest("nietzsche"), where)
    assert full.extras["chars"] == data.extras["chars"]  # a slice trains the same model
    assert len(full.x_train) == 8447 and full.x_train.max() < len(full.extras["chars"])
    steps = -(-len(full.x_train) // gpt_nietzsche.SPEC.batch_size)
    assert abs(steps * gpt_nietzsche.SPEC.epochs - 5000) < 100  # nanoGPT's 5,000 iterations


def test_on_a_gpu_the_models_build_in_mixed_precision_and_leave_the_global_policy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import keras

    from benchmarks.workloads import gpt_nietzsche

    monkeypatch.setattr(backends, "gpu_available", lambda backend: True)
    data = gpt_nietzsche.load_data(DataRequest("synthetic", train_limit=2, val_limit=1), _nowhere())
    model = backends.build_model(gpt_nietzsche, data)
    model.compile(**gpt_nietzsche.compile_args())
    assert model.dtype_policy.name == "mixed_float16" and keras.config.dtype_policy().name == "float32"
    assert type(model.optimizer).__name__ == "LossScaleOptimizer"  # Keras scales the float16 loss
    monkeypatch.setattr(backends, "gpu_available", lambda backend: False)
    assert backends.build_model(gpt_nietzsche, data).dtype_policy.name == "float32"
    assert gpt_nietzsche.SPEC.mixed_precision and spec("resnet50").mixed_precision
    assert not any(spec(name).mixed_precision for name in WORKLOADS if name not in REFERENCE)


def test_in_mixed_precision_the_embedding_gradient_is_a_float32_scatter() -> None:
    """The GPT's 5.6x on an H200: in mixed_float16 Keras computes an Embedding in float16, so the gradient of its
    lookup is a float16 scatter-add, which XLA runs as colliding half-precision atomics on a GPU. The harness builds
    embeddings in float32 (as PyTorch's autocast leaves them); built without it, the step has the float16 scatter.
    Checked in JAX's lowered train step, in a process of its own (the backend is chosen at import)."""
    script = "from tests.benchmarks.test_reference_workloads import scatter_types_fixed_and_not as f; print(f())"
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "['f32'] ['f16']"


def scatter_types_fixed_and_not() -> str:
    """The scatter-adds' element types in the GPT's train step, built by the harness and built plainly, both in
    mixed_float16 (run with KERAS_BACKEND=jax)."""
    import keras

    from benchmarks.workloads import gpt_nietzsche

    backends.gpu_available = lambda backend: True  # type: ignore[assignment]  # a process of its own
    data = gpt_nietzsche.load_data(DataRequest("synthetic", train_limit=2, val_limit=1), _nowhere())
    fixed = backends.build_model(gpt_nietzsche, data, "float16")
    embedding = next(layer for layer in fixed.layers if isinstance(layer, keras.layers.Embedding))
    assert fixed.dtype_policy.name == "mixed_float16" and embedding.dtype_policy.name == "float32"
    with backends.gpu_mixed_precision("float16"):
        plain = gpt_nietzsche.build_model(data)
    return f"{_scatter_types(fixed, data)} {_scatter_types(plain, data)}"


def _scatter_types(model: Any, data: Any) -> list[str]:
    """The element types of the scatter-adds in the model's lowered JAX train step (traced, not compiled)."""
    import jax

    from benchmarks.workloads import gpt_nietzsche

    model.compile(**gpt_nietzsche.compile_args())
    model.optimizer.build(model.trainable_variables)
    state = train_state(model)
    text = jax.jit(model.train_step).lower(state, (data.x_train, data.y_train)).as_text()
    return sorted(set(re.findall(r"stablehlo.scatter.*?\) -> tensor<\d+x\d+x(\w+)>", text, re.DOTALL)))


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_quick_slices_train_on_the_cpu(keras_home: Path, tmp_path: Path, backend: str) -> None:
    args = ["run", "--workload", ",".join(REFERENCE), "--backend", backend, "--suite", "quick"]
    result = run_benchmarks([*args, "--platform", "ci", "--out", str(tmp_path), "--run-id", "q"], keras_home)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run_dir = tmp_path / "ci" / "q"
    resnet, gpt = run_dir / f"resnet50_{backend}_synthetic.csv", run_dir / f"gpt_nietzsche_{backend}.csv"
    for path, parameters, source in ((resnet, 25_636_712, "synthetic"), (gpt, 10_763_904, "real")):
        meta = json.loads(metadata_path(path).read_text())
        assert (meta["status"], meta["epochs_completed"], meta["cut"]) == ("complete", 3, "quick")
        assert meta["settings"]["dtype_policy"] == "float32"  # on a CPU
        assert meta["parameters"] == parameters and meta["data"]["source"] == source
        assert all(e.loss is not None and np.isfinite(e.loss) for e in read_epoch_log(path).epochs)
    assert json.loads(metadata_path(resnet).read_text())["data"]["train_samples"] == 8


@pytest.mark.slow
def test_resnet50_trains_on_real_jpegs(keras_home: Path, tmp_path: Path) -> None:
    write_jpegs(tmp_path / "data", "train", {"cat": 3, "dog": 3})
    args = ["run", "--workload", "resnet50", "--backend", "jax", "--dataset", "imagenet", "--epochs", "2"]
    args += ["--data-dir", str(tmp_path / "data"), "--platform", "ci", "--out", str(tmp_path), "--run-id", "r"]
    result = run_benchmarks(args, keras_home)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    meta = json.loads(metadata_path(tmp_path / "ci/r/resnet50_jax.csv").read_text())
    assert meta["data"]["dataset"] == "imagenet" and meta["data"]["source"] == "real"
    assert (meta["data"]["train_samples"], meta["data"]["val_samples"], meta["status"]) == (6, 0, "complete")
    assert meta["parameters"] == 23_591_810  # ResNet-50 with a 2-class head


@pytest.mark.slow
def test_the_quick_slices_train_data_parallel_on_two_devices(keras_home: Path, tmp_path: Path) -> None:
    """JAX over 2 logical CPU devices, one batch per device: the self-batching image loader and the GPT's arrays
    split evenly, and the learning rate follows the per-device policy's rule."""
    import os

    from benchmarks.harness import distribution

    args = ["run", "--workload", ",".join(REFERENCE), "--backend", "jax", "--suite", "quick", "--epochs", "2"]
    args += ["--gpus", "2", "--batch-policy", "per-device", "--platform", "ci", "--out", str(tmp_path), "--run-id", "d"]
    flags = f"{os.environ.get('XLA_FLAGS', '')} {distribution.XLA_DEVICES_FLAG}=2".strip()
    os.environ["XLA_FLAGS"], before = flags, os.environ.get("XLA_FLAGS")
    try:
        result = run_benchmarks(args, keras_home)
    finally:
        os.environ.pop("XLA_FLAGS") if before is None else os.environ.update(XLA_FLAGS=before)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for name in ("resnet50_jax_synthetic", "gpt_nietzsche_jax"):
        meta = json.loads(metadata_path(tmp_path / "ci" / "d" / f"{name}.csv").read_text())
        dist = meta["distribution"]
        assert meta["status"] == "complete" and (dist["devices"], dist["batch_policy"]) == (2, "per-device")
        assert dist["learning_rate"] == pytest.approx(dist["published_learning_rate"] * 2**0.5)
        assert meta["data"]["train_samples"] % 2 == 0
