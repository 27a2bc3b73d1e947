"""A user's own workload: the built-in workloads' module contract, in a Python file or an installed package.

    python -m benchmarks run --workload-file my_model.py --backend jax      # a file
    [project.entry-points."keras_cloud_bench.workloads"]                     # a package's pyproject.toml
    my_model = "my_package.my_model"

The module defines `SPEC` (a `WorkloadSpec`), `build_model(data)`, `compile_args()` and `load_data(request, where)`;
`load_data` may be left out when `SPEC.shapes` declares the data's shapes, and the runs then train on labelled
synthetic data of those shapes (as they also do with `--dataset synthetic`, or `--allow-synthetic` where the
loader raises `DatasetUnavailable`). Each run records the module file's name and content hash (`plugin` in the
run metadata). `trial_step` (`python -m benchmarks check-workload`) imports it, checks its SPEC, builds the model and
trains one step on a tiny batch, on the CPU, before anything is launched or paid for.

This is the side that imports a plug-in, where it trains or is checked; which plug-ins a command has, and their
SPEC literals read without importing them, are benchmarks.workload_set's.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

from benchmarks.workloads import WORKLOADS, Cut, Shapes, WorkloadSpec

ENTRY_POINT_GROUP = "keras_cloud_bench.workloads"
FILE = "file"
ENTRY_POINT = "entry point"
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,63}")  # a log file stem, a container name part and a CLI word
REQUIRED = ("SPEC", "build_model", "compile_args")
NATIVE_REQUIRED = ("SPEC", "build_training")  # a native PyTorch workload (benchmarks.workloads.native)
MAX_FILE_BYTES = 256 * 1024  # it rides in a detached machine's boot script and in a shell command


class BadWorkload(ValueError):
    """A plug-in that cannot run; the message is one line naming the file and what is wrong."""


def checked_file(path: str | Path) -> Path:
    """The plug-in file, or BadWorkload naming why it cannot be one."""
    file = Path(path).expanduser()
    try:
        file.resolve(strict=True)
    except FileNotFoundError:
        raise BadWorkload(f"--workload-file {path}: no such file") from None
    except (OSError, RuntimeError) as exc:  # a symbolic link loop (RuntimeError before Python 3.13), no permission
        plain = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        reason = "a symbolic link loop" if "loop" in str(exc).lower() else plain
        raise BadWorkload(f"--workload-file {path}: {reason}") from None
    if not file.is_file():
        raise BadWorkload(f"--workload-file {path}: no such file")
    if file.suffix != ".py":
        raise BadWorkload(f"--workload-file {path}: expected a Python file (.py)")
    if file.stat().st_size > MAX_FILE_BYTES:
        raise BadWorkload(
            f"--workload-file {path}: {file.stat().st_size} bytes; a workload file holds at most "
            f"{MAX_FILE_BYTES // 1024} KiB (put large data in --data-dir)"
        )
    return file


def import_file(path: Path) -> ModuleType:
    """A workload file imported (Keras is imported with it: set KERAS_BACKEND first), checked and adapted."""
    file = checked_file(path)
    module_name = "keras_cloud_bench_workload_" + re.sub(r"\W", "_", file.stem)
    spec = importlib.util.spec_from_file_location(module_name, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look modules up by name
    try:
        with refusing_exit(f"{file.name} does not import"):
            spec.loader.exec_module(module)
    except Exception as exc:  # broad on purpose: whatever the user's file raises is one line naming it
        sys.modules.pop(module_name, None)
        if isinstance(exc, BadWorkload):
            raise
        raise BadWorkload(f"{file.name} does not import: {type(exc).__name__}: {_first_line(exc)}") from exc
    return _adapted(module, file.name)


def import_entry_point(module_name: str, where: str) -> ModuleType:
    """An installed workload's module imported, checked and adapted."""
    try:
        with refusing_exit(f"workload {where} does not import"):
            module = importlib.import_module(module_name)
    except BadWorkload:
        raise
    except Exception as exc:  # broad on purpose, as for a file
        raise BadWorkload(f"workload {where} does not import: {type(exc).__name__}: {_first_line(exc)}") from exc
    return _adapted(module, where)


@contextmanager
def refusing_exit(where: str) -> Iterator[None]:
    """A workload that ends the process (`sys.exit`, `os._exit`) while it is imported or checked is a bad workload,
    said in one line (`where` heads it): the process must not end silently, least of all with status 0 as if the
    check had passed. A process forked meanwhile still ends as it asks."""
    real_exit, pid = os._exit, os.getpid()

    def refused(status: int) -> NoReturn:
        if os.getpid() != pid:
            real_exit(status)
        raise BadWorkload(f"{where}: it calls os._exit({status}), which would end this process")

    os._exit = refused
    try:
        yield
    except SystemExit as exc:
        raise BadWorkload(f"{where}: it calls sys.exit({exc.code!r}), which would end this process") from None
    finally:
        os._exit = real_exit


def _adapted(module: ModuleType, where: str) -> ModuleType:
    """The contract checked, and a module the runner trains: the user's functions, with synthetic data of the
    declared shapes where the user's loader is absent or synthetic data is asked for."""
    check_contract(module, where)
    spec: WorkloadSpec = module.SPEC
    user_loader: Callable[..., Any] | None = getattr(module, "load_data", None)
    adapter = ModuleType(f"keras_cloud_bench.plugin.{spec.name}", module.__doc__)
    members: dict[str, Any] = {
        "SPEC": spec if user_loader is not None else replace(spec, datasets=("synthetic",)),
        "load_data": _loader(spec, user_loader),
    }
    for name in (*REQUIRED[1:], *NATIVE_REQUIRED[1:]):
        if hasattr(module, name):
            members[name] = getattr(module, name)
    if hasattr(module, "after_training"):
        members["after_training"] = module.after_training
    adapter.__dict__.update(members)
    return adapter


def _loader(spec: WorkloadSpec, user_loader: Callable[..., Any] | None) -> Callable[..., Any]:
    from benchmarks.data.loaders import SYNTHETIC_NAME

    def load_data(request: Any, where: Any) -> Any:
        if request.dataset == SYNTHETIC_NAME and spec.shapes is not None:
            return synthetic_data(spec.name, spec.shapes, request)
        if request.dataset == SYNTHETIC_NAME and user_loader is not None:
            # no shapes declared: the loader makes its own synthetic data, as the built-in loaders do (a copied
            # built-in workload runs as the built-in does)
            return _own_synthetic(spec.name, user_loader, request, where)
        if user_loader is None:
            raise BadWorkload(f"workload {spec.name} has no load_data: it runs on synthetic data of SPEC.shapes only")
        return user_loader(request, where)

    return load_data


def _own_synthetic(name: str, user_loader: Callable[..., Any], request: Any, where: Any) -> Any:
    from benchmarks.data.types import SYNTHETIC

    try:
        data = user_loader(request, where)
    except Exception as exc:  # broad on purpose: the user's loader, asked for data it may not make
        raise BadWorkload(
            f"workload {name}: its load_data made no synthetic data ({type(exc).__name__}: {_first_line(exc)}) "
            "and SPEC.shapes declares none: declare SPEC.shapes, or pass --data-dir"
        ) from exc
    if getattr(getattr(data, "info", None), "source", None) != SYNTHETIC:
        raise BadWorkload(
            f"workload {name}: asked for synthetic data, its load_data returned data not labelled synthetic: "
            "declare SPEC.shapes, or label it (benchmarks.data.loaders.info_for)"
        )
    return data


def check_contract(module: ModuleType, where: str) -> None:
    """Everything that can be checked without training: the names the runner calls and a complete SPEC."""
    native = hasattr(module, "build_training")
    missing = [name for name in (NATIVE_REQUIRED if native else REQUIRED) if not hasattr(module, name)]
    if missing:
        raise BadWorkload(
            f"{where}: missing {', '.join(missing)} (a workload defines SPEC, build_model, compile_args and "
            "load_data, or a native PyTorch one SPEC, build_training and load_data; docs/workloads.md)"
        )
    if native and hasattr(module, "build_model"):
        raise BadWorkload(f"{where}: defines both build_model (Keras) and build_training (native): keep one")
    for name in ("build_model", "compile_args", "build_training", "load_data"):
        if hasattr(module, name) and not callable(getattr(module, name)):
            raise BadWorkload(f"{where}: {name} is not a function")
    spec = module.SPEC
    if not isinstance(spec, WorkloadSpec):
        raise BadWorkload(f"{where}: SPEC is a {type(spec).__name__}; expected benchmarks.workloads.WorkloadSpec")
    check_spec(spec, where, has_loader=hasattr(module, "load_data"))


def check_spec(spec: WorkloadSpec, where: str, has_loader: bool) -> None:
    if not isinstance(spec.name, str) or not NAME_PATTERN.fullmatch(spec.name):
        raise BadWorkload(f"{where}: SPEC.name {spec.name!r}: use lower-case letters, digits and '_', a letter first")
    if spec.name in WORKLOADS:
        raise BadWorkload(f"{where}: SPEC.name {spec.name!r} is a built-in workload's; choose another name")
    for field_name in ("epochs", "batch_size"):
        value = getattr(spec, field_name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise BadWorkload(f"{where}: SPEC.{field_name} {value!r}: expected a positive integer")
    for cut_name in ("quick", "short", "bounded"):
        cut = getattr(spec, cut_name)
        if cut is not None and not isinstance(cut, Cut):
            raise BadWorkload(f"{where}: SPEC.{cut_name} is a {type(cut).__name__}; expected Cut(...) or None")
    if not isinstance(spec.quick, Cut):
        raise BadWorkload(f"{where}: SPEC.quick: expected Cut(epochs, train_limit, val_limit)")
    if spec.shapes is not None:
        _check_shapes(spec.shapes, where)
    if not has_loader and spec.shapes is None:
        raise BadWorkload(f"{where}: no load_data and no SPEC.shapes: define one so the runs have data")
    if has_loader and not (
        isinstance(spec.datasets, tuple) and spec.datasets and all(isinstance(d, str) and d for d in spec.datasets)
    ):
        raise BadWorkload(f"{where}: SPEC.datasets {spec.datasets!r}: expected a tuple of dataset names")


def _check_shapes(shapes: Shapes, where: str) -> None:
    if not isinstance(shapes, Shapes):
        raise BadWorkload(f"{where}: SPEC.shapes is a {type(shapes).__name__}; expected Shapes(...)")
    for name in ("inputs", "targets"):
        dims = getattr(shapes, name)
        if not isinstance(dims, tuple) or not all(isinstance(d, int) and d > 0 for d in dims):
            raise BadWorkload(f"{where}: SPEC.shapes.{name} {dims!r}: expected a tuple of positive integers")
    if not shapes.inputs:
        raise BadWorkload(f"{where}: SPEC.shapes.inputs is empty: give one sample's input shape")
    for name in ("train_samples", "classes", "vocabulary"):
        value = getattr(shapes, name)
        if value is not None and (not isinstance(value, int) or value < 1):
            raise BadWorkload(f"{where}: SPEC.shapes.{name} {value!r}: expected a positive integer")
    if not isinstance(shapes.val_samples, int) or shapes.val_samples < 0:
        raise BadWorkload(f"{where}: SPEC.shapes.val_samples {shapes.val_samples!r}: expected 0 or more")
    if shapes.classes is None and not shapes.targets:
        raise BadWorkload(f"{where}: SPEC.shapes: give classes (integer labels) or targets (a float target's shape)")


def synthetic_data(name: str, shapes: Shapes, request: Any) -> Any:
    """Labelled synthetic data of the declared shapes, with a learnable signal: each class (or target) is a linear
    function of the inputs plus noise, so a model's loss falls as it would on data with structure."""
    import numpy as np

    from benchmarks.data.types import SYNTHETIC, Data, DataInfo

    n_train = min(request.train_limit or shapes.train_samples, shapes.train_samples)
    n_val = min(request.val_limit or shapes.val_samples, shapes.val_samples)
    rng = np.random.default_rng(request.seed)
    width = int(np.prod(shapes.inputs))
    outputs = shapes.classes or int(np.prod(shapes.targets))
    weights = rng.normal(0, 1 / np.sqrt(width), size=(width, outputs)).astype("float32")

    def split(n: int) -> tuple[Any, Any]:
        if shapes.vocabulary is not None:
            x = rng.integers(0, shapes.vocabulary, size=(n, *shapes.inputs), dtype=np.int32)
            signal = (x.reshape(n, width) / shapes.vocabulary - 0.5).astype("float32") @ weights
        else:
            x = rng.normal(0, 1, size=(n, *shapes.inputs)).astype("float32")
            signal = x.reshape(n, width) @ weights
        noisy = signal + rng.normal(0, 0.1, size=signal.shape).astype("float32")
        if shapes.classes is None:
            return x, noisy.reshape(n, *shapes.targets)
        labels = noisy.argmax(axis=1).astype(np.int32).reshape(n, *[1] * len(shapes.targets))
        y = np.broadcast_to(labels, (n, *shapes.targets)).copy()  # one label per sample, or per target position
        return x, y

    x_train, y_train = split(n_train)
    x_val, y_val = split(n_val) if n_val else (None, None)
    info = DataInfo(f"synthetic:{name}", SYNTHETIC, n_train, n_val, synthetic_reason=None)
    return Data(x_train, y_train, x_val, y_val, info)


def trial_step(module: ModuleType, label: str, sha256: str, where: Any, samples: int = 4) -> str:
    """Build the model of a loaded workload (`label`: its file's name) and train one step on a tiny batch in this
    process (the caller chose the device: the CPU); BadWorkload names the step that failed. Returns a one-line
    account of what ran."""
    import keras
    import numpy as np

    from benchmarks.data.loaders import SYNTHETIC_NAME
    from benchmarks.data.types import DataRequest, head, is_multi_input

    spec = module.SPEC
    dataset = SYNTHETIC_NAME if spec.shapes is not None else spec.datasets[0]
    request = DataRequest(dataset=dataset, train_limit=samples, val_limit=samples, batch_size=samples)
    data = trial_data(module, label, request, where)
    x, y = head(data.x_train, samples), head(data.y_train, samples)
    model = step(label, "build_model", lambda: module.build_model(data))
    if not isinstance(model, keras.Model):
        raise BadWorkload(f"{label}: build_model returned a {type(model).__name__}; expected a keras.Model")
    step(label, "compile_args", lambda: model.compile(**module.compile_args()))
    history = step(label, "one training step", lambda: model.fit(x, y, batch_size=samples, epochs=1, verbose=0))
    loss = history.history.get(spec.loss_key, [float("nan")])[-1]
    if not np.isfinite(loss):
        raise BadWorkload(f"{label}: one training step gave {spec.loss_key}={loss}")
    count = len(x[0]) if is_multi_input(x) else len(x)
    return (
        f"{label}: workload {spec.name}, sha256 {sha256[:12]}: imports, SPEC complete, model built "
        f"({model.count_params():,} parameters), one step on {count} {data.info.dataset} samples trained on the CPU "
        f"({keras.backend.backend()}), {spec.loss_key} {loss:.4g}"
    )


def trial_data(module: ModuleType, label: str, request: Any, where: Any) -> Any:
    """The step's data: the real data where it is here, else synthetic data as a run would train on with
    --allow-synthetic (of SPEC.shapes, or the loader's own, as the built-in loaders make)."""
    from benchmarks.data.files import DatasetUnavailable
    from benchmarks.data.loaders import SYNTHETIC_NAME

    try:
        return step(label, "load_data", lambda: module.load_data(request, where), DatasetUnavailable)
    except DatasetUnavailable as exc:
        unavailable = exc
    try:
        return module.load_data(replace(request, dataset=SYNTHETIC_NAME), where)
    except Exception:  # broad on purpose: what is wrong is the data that is not here
        raise BadWorkload(
            f"{label}: its data is unavailable here ({_first_line(unavailable)}); pass --data-dir, or declare "
            "SPEC.shapes to check and run on synthetic data"
        ) from unavailable


def step(label: str, what: str, call: Callable[[], Any], *passed: type[BaseException]) -> Any:
    """`call()`, its failure one line naming the step; exceptions of the `passed` kinds, and a BadWorkload already
    said in one line, go through as they are."""
    kept: tuple[type[BaseException], ...] = (BadWorkload, *passed)
    try:
        return call()
    except kept:
        raise
    except Exception as exc:  # broad on purpose: the user's code fails in one line naming the step
        raise BadWorkload(f"{label}: {what} failed: {type(exc).__name__}: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    """The line of an exception's message that says what is wrong (Keras heads its layer errors with a line that
    names only the call)."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))  # Keras makes parts of its messages bold on a terminal
    lines = [line.strip() for line in plain.splitlines() if line.strip()]
    telling = [line for line in lines if not line.startswith("Exception encountered when calling")]
    return (telling or lines or ["(no message)"])[0]
