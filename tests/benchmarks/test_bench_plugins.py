"""A user's workload as a plug-in (benchmarks.plugins): the check that refuses a bad one in one line, the
example trained end to end on the CPU through `python -m benchmarks`, an installed entry point, and what its runs
record. None of them reads a Keras dataset: each process gets an empty KERAS_HOME."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from benchmarks import plugins
from benchmarks.data.files import FileLocations
from benchmarks.metadata import RunMetadata, WorkloadSource
from benchmarks.plugins import BadWorkload, import_file, trial_step
from benchmarks.workload_set import installed_names, read_declared, sha256_of, workloads_of
from tests.benchmarks.conftest import REPO, run_benchmarks

EXAMPLE = REPO / "examples" / "workloads" / "tiny_mlp.py"

GOOD = """
import keras
from keras import layers
from benchmarks.workloads import Cut, Shapes, WorkloadSpec

SPEC = WorkloadSpec(
    name="NAME", epochs=2, batch_size=8, datasets=("mine",), hyperparameters={},
    quick=Cut(epochs=1, train_limit=32, val_limit=8),
    shapes=Shapes(inputs=(6,), classes=3, train_samples=64, val_samples=16),
)


def build_model(data):
    return keras.Sequential([keras.Input(shape=(6,)), layers.Dense(3, activation="softmax")])


def compile_args():
    return {"loss": "sparse_categorical_crossentropy", "optimizer": "sgd"}
"""

SHAPES_LINE = "    shapes=Shapes(inputs=(6,), classes=3, train_samples=64, val_samples=16),\n"


def _workload(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(text.replace("NAME", name))
    return path


# (what is wrong, how the file is changed, what the one-line error says)
BAD_CASES = [
    ("syntax", lambda t: t + "\ndef broken(:\n", "does not import: SyntaxError"),
    ("import", lambda t: "import no_such_module_here\n" + t, "does not import: ModuleNotFoundError"),
    ("no_spec", lambda t: t.replace("SPEC = WorkloadSpec(", "OTHER = WorkloadSpec("), "missing SPEC"),
    ("spec_type", lambda t: t + "\nSPEC = {'name': 'x'}\n", "SPEC is a dict; expected"),
    ("bad_name", lambda t: t.replace('name="NAME"', 'name="My Model"'), "SPEC.name 'My Model'"),
    ("builtin_name", lambda t: t.replace('name="NAME"', 'name="mnist_mlp"'), "is a built-in workload's"),
    ("epochs", lambda t: t.replace("epochs=2,", "epochs=0,"), "SPEC.epochs 0: expected a positive integer"),
    ("no_build", lambda t: t.replace("def build_model(", "def other_model("), "missing build_model"),
    ("no_data", lambda t: t.replace(SHAPES_LINE, ""), "no load_data and no SPEC.shapes"),
    ("shapes", lambda t: t.replace("inputs=(6,)", "inputs=()"), "SPEC.shapes.inputs is empty"),
    (
        "build_raises",
        lambda t: t.replace(
            "    return keras.Sequential", "    raise RuntimeError('no GPU')\n    return keras.Sequential"
        ),
        "build_model failed: RuntimeError: no GPU",
    ),
    (
        "not_model",
        lambda t: t.replace("    return keras.Sequential", "    return 42\n    return keras.Sequential"),
        "build_model returned a int; expected a keras.Model",
    ),
    (
        "compile",
        lambda t: t.replace("    return {", "    raise KeyError('lr')\n    return {"),
        "compile_args failed: KeyError",
    ),
    ("loss", lambda t: t.replace('"sparse_categorical_crossentropy"', '"no_such_loss"'), "step failed: ValueError"),
    (
        "step",
        lambda t: t.replace("keras.Input(shape=(6,))", "keras.Input(shape=(7,))"),
        "one training step failed: ValueError: Input 0",
    ),
    (
        "nan",
        lambda t: t.replace(
            '"loss": "sparse_categorical_crossentropy"', '"loss": lambda y, p: keras.ops.mean(p) * float("nan")'
        ),
        "one training step gave loss=nan",
    ),
    (
        "data_missing",
        lambda t: (
            t.replace(SHAPES_LINE, "")
            + "\nfrom benchmarks.data.files import DatasetUnavailable\n\n\ndef load_data(request, where):\n"
            + "    raise DatasetUnavailable('mine.npz is not in --data-dir')\n"
        ),
        "its data is unavailable here (mine.npz is not in --data-dir)",
    ),
]


@pytest.mark.parametrize(("case", "change", "said"), BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_a_bad_workload_is_refused_in_one_line_naming_what_is_wrong(
    tmp_path: Path, case: str, change: object, said: str
) -> None:
    path = _workload(tmp_path, f"bad_{case}", change(GOOD))  # type: ignore[operator]
    with pytest.raises(BadWorkload) as refused:
        trial_step(import_file(path), path.name, sha256_of(path), FileLocations(tmp_path, None, offline=True))
    message = str(refused.value)
    assert said in message and "\n" not in message, message
    assert message.startswith(path.name) or "SPEC" in message
    assert "\x1b" not in message and "Exception encountered" not in message  # what is wrong, not Keras's header


def test_a_good_workload_trains_one_step_and_says_so(tmp_path: Path) -> None:
    path = _workload(tmp_path, "good_one", GOOD)
    line = trial_step(import_file(path), path.name, sha256_of(path), FileLocations(tmp_path, None, offline=True))
    assert line.startswith("good_one.py: workload good_one, sha256 ") and "one step on 4 synthetic:good_one" in line


@pytest.mark.parametrize(
    ("path", "said"),
    [("nowhere/model.py", "no such file"), ("examples/workloads", "no such file"), ("pyproject.toml", ".py")],
)
def test_a_path_that_is_no_workload_file_is_refused(path: str, said: str) -> None:
    with pytest.raises(BadWorkload, match=said):
        workloads_of([REPO / path])


def test_the_declared_spec_is_read_without_importing(tmp_path: Path) -> None:
    path = _workload(tmp_path, "plan_me", "import no_such_framework\n" + GOOD)  # would fail if imported
    found = read_declared(path, path.name)
    assert (found.name, found.epochs, found.batch_size, found.train_samples) == ("plan_me", 2, 8, 64)
    assert found.cuts["quick"] is not None and found.cuts["quick"].train_limit == 32


def test_synthetic_data_of_the_declared_shapes_is_labelled_and_learnable() -> None:
    from benchmarks.data.types import DataRequest
    from benchmarks.workloads import Shapes

    shapes = Shapes(inputs=(4, 5), classes=3, train_samples=600, val_samples=100)
    data = plugins.synthetic_data("mine", shapes, DataRequest("synthetic", train_limit=500, seed=3))
    assert data.x_train.shape == (500, 4, 5) and data.y_train.shape == (500,) and data.x_val.shape == (100, 4, 5)
    assert data.info.source == "synthetic" and data.info.dataset == "synthetic:mine"
    # a linear read-out of the inputs recovers the labels well above chance (1/3): there is something to learn
    x = data.x_train.reshape(500, 20)
    weights, *_ = np.linalg.lstsq(x, np.eye(3)[data.y_train], rcond=None)
    assert (np.argmax(x @ weights, axis=1) == data.y_train).mean() > 0.8


def test_the_check_command_exits_2_with_one_line(tmp_path: Path) -> None:
    path = _workload(tmp_path, "cli_bad", GOOD.replace("keras.Input(shape=(6,))", "keras.Input(shape=(9,))"))
    done = run_benchmarks(["check-workload", "--workload-file", str(path), "--backend", "jax"], tmp_path / "keras", 300)
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert errors[-1].startswith("error: cli_bad.py: one training step failed"), done.stderr


def test_a_workload_file_trains_end_to_end_and_records_its_file_and_hash(tmp_path: Path) -> None:
    """The docs' example on the CPU: its real data from --data-dir, then synthetic data of its shapes, labelled."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(600, 32)).astype("float32"), rng.integers(0, 4, 600)
    np.savez(data_dir / "tiny_mlp.npz", x_train=x[:500], y_train=y[:500], x_val=x[500:], y_val=y[500:])
    common = ["--workload-file", str(EXAMPLE), "--backend", "jax", "--out", str(tmp_path / "logs"), "--epochs", "2"]
    real = run_benchmarks(["run", *common, "--run-id", "real", "--data-dir", str(data_dir)], tmp_path / "keras")
    assert real.returncode == 0, real.stdout + real.stderr
    synthetic = run_benchmarks(["run", *common, "--run-id", "synth", "--allow-synthetic"], tmp_path / "keras")
    assert synthetic.returncode == 0, synthetic.stdout + synthetic.stderr
    assert "tiny_mlp.npz is not in --data-dir" in synthetic.stderr

    digest = sha256_of(EXAMPLE)
    real_meta = RunMetadata.from_dict(json.loads((tmp_path / "logs/local/real/tiny_mlp_jax.json").read_text()))
    assert real_meta.plugin == WorkloadSource("file", "tiny_mlp.py", digest)
    assert (real_meta.data.source, real_meta.data.train_samples, real_meta.epochs_completed) == ("real", 500, 2)
    path = tmp_path / "logs/local/synth/tiny_mlp_jax_synthetic.json"
    synth_meta = RunMetadata.from_dict(json.loads(path.read_text()))
    assert synth_meta.plugin == real_meta.plugin and synth_meta.status == "complete"
    assert (synth_meta.data.source, synth_meta.data.dataset) == ("synthetic", "synthetic:tiny_mlp")
    assert synth_meta.data.train_samples == 8192  # SPEC.shapes: a full epoch of the declared size


def test_an_installed_entry_point_is_a_workload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A package that declares `[project.entry-points."keras_cloud_bench.workloads"] tiny_ep = "tiny_ep_pkg"`."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "tiny_ep_pkg.py").write_text(EXAMPLE.read_text().replace('name="tiny_mlp"', 'name="tiny_ep"'))
    dist = site / "tiny_ep_pkg-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-ep-pkg\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[keras_cloud_bench.workloads]\ntiny_ep = tiny_ep_pkg\n")
    monkeypatch.syspath_prepend(str(site))
    assert "tiny_ep" in installed_names()
    found = workloads_of(entry_points=["tiny_ep"])["tiny_ep"]
    assert found.source is not None and found.source.kind == "entry point"
    assert (found.source.entry_point, found.source.distribution) == ("tiny_ep = tiny_ep_pkg", "tiny-ep-pkg 1.0")
    assert found.source.sha256 == sha256_of(site / "tiny_ep_pkg.py") and "tiny_ep_pkg" not in sys.modules
    line = trial_step(found.load(), found.path.name, found.sha256, FileLocations(tmp_path, None, offline=True))
    assert "one step on 4 synthetic:tiny_ep" in line


def test_a_suite_with_a_workload_file_runs_it_alone(tmp_path: Path) -> None:
    copy = tmp_path / "tiny_mlp.py"
    shutil.copy(EXAMPLE, copy)
    done = run_benchmarks(
        ["suite", "--workload-file", str(copy), "--backends", "torch", "--out", str(tmp_path / "logs"),
         "--run-id", "s1", "--epochs", "2", "--train-limit", "256", "--val-limit", "64"],
        tmp_path / "keras",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in (tmp_path / "logs/local/s1").glob("*.csv")) == ["tiny_mlp_torch_synthetic.csv"]
    assert "tiny_mlp" in done.stdout and "synthetic" in done.stdout
    # Its step costs are recorded beside the logs (JAX measures them, whatever backends the suite runs), once:
    # the report and the estimate price the file on a GPU from them.
    (record,) = (tmp_path / "logs" / "step-costs").glob("tiny_mlp-*.json")
    assert done.stdout.startswith("step costs: tiny_mlp: ") and str(record) in done.stdout


def test_the_image_entrypoint_form_reads_any_name_as_a_workload() -> None:
    """`python -m benchmarks NAME ...` is `run --workload NAME` for any name, a plug-in's too (not a subcommand)."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "not_registered_anywhere", "--backend", "jax"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "unknown workload 'not_registered_anywhere'" in done.stderr


def _non_utf8(path: Path) -> Path:
    path.write_bytes(b"# caf\xe9\n" + GOOD.replace("NAME", path.stem).encode())
    return path


def _loop(path: Path) -> Path:
    (path.parent / "other.py").symlink_to(path)
    path.symlink_to(path.parent / "other.py")
    return path


# (what is wrong, how the file is made, what the one-line error says)
UNREADABLE_OR_ENDING = [
    ("non_utf8", _non_utf8, "is not utf-8 text: byte 0xe9 at offset 5; save it as UTF-8"),
    ("sys_exit", lambda p: _workload(p.parent, p.stem, "import sys\nsys.exit(0)\n" + GOOD), "calls sys.exit(0)"),
    ("os_exit", lambda p: _workload(p.parent, p.stem, "import os\nos._exit(0)\n" + GOOD), "calls os._exit(0)"),
    ("loop", _loop, "a symbolic link loop"),
]


@pytest.mark.parametrize(("case", "make", "said"), UNREADABLE_OR_ENDING, ids=[c[0] for c in UNREADABLE_OR_ENDING])
def test_a_file_that_is_not_text_ends_the_process_or_loops_is_one_line_and_exit_2(
    tmp_path: Path, case: str, make: Callable[[Path], Path], said: str
) -> None:
    """`check-workload` never ends with status 0 without its "ok" line, whatever the file does at import."""
    path = make(tmp_path / f"mine_{case}.py")
    done = run_benchmarks(["check-workload", "--workload-file", str(path), "--backend", "jax"], tmp_path / "k", 120)
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(errors) == 1 and said in errors[0], done.stdout + done.stderr
    assert errors[0].startswith(("error: mine_", f"error: --workload-file {path}")) and "ok:" not in done.stdout


def test_a_copy_of_a_built_in_workload_runs_on_its_loaders_synthetic_data_as_the_built_in_does(tmp_path: Path) -> None:
    """mnist_mlp.py copied under a new name (no SPEC.shapes: its loader makes labelled synthetic data itself), run
    offline with --allow-synthetic and no MNIST file anywhere."""
    source = (REPO / "benchmarks" / "workloads" / "mnist_mlp.py").read_text()
    copy = tmp_path / "my_mlp.py"
    copy.write_text(source.replace('name="mnist_mlp"', 'name="my_mlp"'))
    done = run_benchmarks(
        ["run", "--workload-file", str(copy), "--backend", "jax", "--offline", "--allow-synthetic", "--epochs", "2",
         "--train-limit", "256", "--val-limit", "64", "--out", str(tmp_path / "logs"), "--run-id", "copy"],
        tmp_path / "empty-keras-home",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "using labelled synthetic data instead" in done.stderr and "Traceback" not in done.stderr
    meta = RunMetadata.from_dict(json.loads((tmp_path / "logs/local/copy/my_mlp_jax_synthetic.json").read_text()))
    assert (meta.data.source, meta.data.dataset, meta.epochs_completed) == ("synthetic", "synthetic:mnist", 2)
    assert meta.plugin == WorkloadSource("file", "my_mlp.py", sha256_of(copy))
