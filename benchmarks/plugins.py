"""A user's own workload: the built-in workloads' module contract, in a Python file or an installed package.

    python -m benchmarks run --workload-file my_model.py --backend jax      # a file
    [project.entry-points."keras_cloud_bench.workloads"]                     # a package's pyproject.toml
    my_model = "my_package.my_model"

The module defines `SPEC` (a `WorkloadSpec`), `build_model(data)`, `compile_args()` and `load_data(request, where)`;
`load_data` may be left out when `SPEC.shapes` declares the data's shapes, and the runs then train on labelled
synthetic data of those shapes (as they also do with `--dataset synthetic`, or `--allow-synthetic` where the
loader raises `DatasetUnavailable`). Each run records the module file's name and content hash (`plugin` in the
run metadata). `check` (`python -m benchmarks check-workload`) imports it, checks its SPEC, builds the model and
trains one step on a tiny batch, on the CPU, before anything is launched or paid for.

Reading a plug-in's name and SPEC literals (`declared`) needs no framework: the orchestrator plans from them.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

from benchmarks import workloads
from benchmarks.metadata import WorkloadSource
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


@dataclass(frozen=True)
class Plugin:
    name: str
    module: ModuleType  # the adapter the runner trains: SPEC, load_data, build_model, compile_args[, after_training]
    source: WorkloadSource


_REGISTERED: dict[str, Plugin] = {}


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def checked_file(path: str | Path) -> Path:
    """The plug-in file, or BadWorkload naming why it cannot be one."""
    file = Path(path).expanduser()
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


def register_file(path: str | Path) -> Plugin:
    """Import a workload file (Keras is imported with it: set KERAS_BACKEND first) and register it by SPEC.name."""
    file = checked_file(path)
    module_name = "keras_cloud_bench_workload_" + re.sub(r"\W", "_", file.stem)
    spec = importlib.util.spec_from_file_location(module_name, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look modules up by name
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # broad on purpose: whatever the user's file raises is one line naming it
        sys.modules.pop(module_name, None)
        raise BadWorkload(f"{file.name} does not import: {type(exc).__name__}: {_first_line(exc)}") from exc
    source = WorkloadSource(FILE, file.name, sha256_of(file))
    return _register(_adapted(module, file.name), source)


def register_entry_point(name: str) -> Plugin:
    """Import the installed workload registered as `name` under ENTRY_POINT_GROUP, and register it."""
    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not found:
        raise BadWorkload(f"no workload entry point named {name!r} in group {ENTRY_POINT_GROUP}")
    entry = found[0]
    try:
        module = importlib.import_module(entry.value.partition(":")[0])
    except Exception as exc:  # broad on purpose, as for a file
        raise BadWorkload(f"workload {name} ({entry.value}) does not import: {type(exc).__name__}: {exc}") from exc
    origin = Path(module.__file__ or "")
    if not origin.is_file():
        raise BadWorkload(f"workload {name} ({entry.value}) has no module file to record")
    dist = f"{entry.dist.name} {entry.dist.version}" if entry.dist is not None else None
    source = WorkloadSource(ENTRY_POINT, origin.name, sha256_of(origin), f"{name} = {entry.value}", dist)
    plugin = _register(_adapted(module, entry.value), source)
    if plugin.name != name:
        raise BadWorkload(f"workload entry point {name!r} ({entry.value}) declares SPEC.name={plugin.name!r}")
    return plugin


def registered(name: str) -> Plugin | None:
    """The plug-in of that name: registered in this process from a file, else an installed entry point."""
    if name not in _REGISTERED and name in entry_point_names():
        register_entry_point(name)
    return _REGISTERED.get(name)


def names() -> list[str]:
    return [*_REGISTERED, *(n for n in entry_point_names() if n not in _REGISTERED)]


def entry_point_names() -> list[str]:
    return sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))


def source_of(name: str) -> WorkloadSource | None:
    """What the run metadata records of a workload's origin: None for a built-in one."""
    plugin = _REGISTERED.get(name)
    return plugin.source if plugin is not None else None


def _register(module: ModuleType, source: WorkloadSource) -> Plugin:
    spec: WorkloadSpec = module.SPEC
    known = _REGISTERED.get(spec.name)
    if known is not None and known.source != source:
        raise BadWorkload(f"{source.file}: workload {spec.name!r} is already registered from {known.source.file}")
    plugin = Plugin(spec.name, module, source)
    _REGISTERED[spec.name] = plugin
    workloads.register(spec.name, module)  # so that the runner loads it as it loads a built-in workload
    return plugin


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
        if request.dataset == SYNTHETIC_NAME:
            if spec.shapes is None:
                raise BadWorkload(f"workload {spec.name} declares no SPEC.shapes: no synthetic data can stand in")
            return synthetic_data(spec.name, spec.shapes, request)
        if user_loader is None:
            raise BadWorkload(f"workload {spec.name} has no load_data: it runs on synthetic data of SPEC.shapes only")
        return user_loader(request, where)

    return load_data


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


def trial_data(plugin: Plugin, where: Any, samples: int) -> Any:
    """The tiny batch's data a check trains on: synthetic where the SPEC declares shapes, else the first dataset."""
    from benchmarks.data.files import DatasetUnavailable
    from benchmarks.data.loaders import SYNTHETIC_NAME
    from benchmarks.data.types import DataRequest

    module, spec, label = plugin.module, plugin.module.SPEC, plugin.source.file
    dataset = SYNTHETIC_NAME if spec.shapes is not None else spec.datasets[0]
    request = DataRequest(dataset=dataset, train_limit=samples, val_limit=samples, batch_size=samples)
    return step(label, "load_data", lambda: module.load_data(request, where), DatasetUnavailable)


def trial_step(plugin: Plugin, where: Any, samples: int = 4) -> str:
    """Build the model and train one step on a tiny batch in this process (the caller chose the device: the CPU);
    BadWorkload names the step that failed. Returns a one-line account of what ran."""
    import keras
    import numpy as np

    from benchmarks.data.types import head, is_multi_input

    module, spec, label = plugin.module, plugin.module.SPEC, plugin.source.file
    data = trial_data(plugin, where, samples)
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
        f"{label}: workload {spec.name}, sha256 {plugin.source.sha256[:12]}: imports, SPEC complete, model built "
        f"({model.count_params():,} parameters), one step on {count} {data.info.dataset} samples trained on the CPU "
        f"({keras.backend.backend()}), {spec.loss_key} {loss:.4g}"
    )


def step(label: str, what: str, call: Callable[[], Any], *unavailable: type[BaseException]) -> Any:
    try:
        return call()
    except unavailable as exc:
        raise BadWorkload(
            f"{label}: its data is unavailable here ({_first_line(exc)}); pass --data-dir, or declare "
            "SPEC.shapes to check and run on synthetic data"
        ) from exc
    except Exception as exc:  # broad on purpose: the user's code fails in one line naming the step
        raise BadWorkload(f"{label}: {what} failed: {type(exc).__name__}: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    """The line of an exception's message that says what is wrong (Keras heads its layer errors with a line that
    names only the call)."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))  # Keras makes parts of its messages bold on a terminal
    lines = [line.strip() for line in plain.splitlines() if line.strip()]
    telling = [line for line in lines if not line.startswith("Exception encountered when calling")]
    return (telling or lines or ["(no message)"])[0]


# --- read without importing: the orchestrator and the report plan from these -------------------------------


@dataclass(frozen=True)
class Declared:
    """A plug-in file's SPEC literals, read from its source (no framework is imported)."""

    name: str
    file: str
    sha256: str
    epochs: int
    batch_size: int
    cuts: dict[str, Cut | None]
    train_samples: int | None  # SPEC.shapes.train_samples, where declared


def declared(path: str | Path) -> Declared:
    """The name, epochs, batch size, cuts and declared sample count of a workload file's `SPEC = WorkloadSpec(...)`,
    each a literal in the source; BadWorkload names the first that is not."""
    file = checked_file(path)
    try:
        tree = ast.parse(file.read_text(), filename=file.name)
    except SyntaxError as exc:
        raise BadWorkload(f"{file.name} does not import: SyntaxError: {exc.msg} (line {exc.lineno})") from exc
    call = _spec_call(tree, file.name)
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    values: dict[str, Any] = {}
    for name in ("name", "epochs", "batch_size"):
        if name not in keywords:
            raise BadWorkload(f"{file.name}: SPEC = WorkloadSpec(...) has no {name}=")
        values[name] = _literal(keywords[name], f"{file.name}: SPEC.{name}")
    if not isinstance(values["name"], str) or not NAME_PATTERN.fullmatch(values["name"]):
        raise BadWorkload(
            f"{file.name}: SPEC.name {values['name']!r}: use lower-case letters, digits and '_', a letter first"
        )
    if values["name"] in WORKLOADS:
        raise BadWorkload(f"{file.name}: SPEC.name {values['name']!r} is a built-in workload's; choose another name")
    cuts: dict[str, Cut | None] = {}
    for name in ("quick", "short", "bounded"):
        if name in keywords:
            cuts[name] = _cut(keywords[name], f"{file.name}: SPEC.{name}")
    samples = None
    shapes = keywords.get("shapes")
    if isinstance(shapes, ast.Call):
        for keyword in shapes.keywords:
            if keyword.arg == "train_samples":
                samples = _literal(keyword.value, f"{file.name}: SPEC.shapes.train_samples")
    return Declared(values["name"], file.name, sha256_of(file), values["epochs"], values["batch_size"], cuts, samples)


def spec_call(tree: ast.Module) -> ast.Call | None:
    """A workload module's `SPEC = WorkloadSpec(...)` call, read without importing it; None where it has none."""
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "SPEC" for t in node.targets)
            and isinstance(node.value, ast.Call)
        ):
            return node.value
    return None


def _spec_call(tree: ast.Module, where: str) -> ast.Call:
    call = spec_call(tree)
    if call is None:
        raise BadWorkload(f"{where}: missing SPEC (a module-level `SPEC = WorkloadSpec(...)`; docs/workloads.md)")
    return call


def _literal(node: ast.expr, where: str) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise BadWorkload(f"{where}: write it as a literal, not {ast.unparse(node)}") from None


def _cut(node: ast.expr, where: str) -> Cut | None:
    if isinstance(node, ast.Constant) and node.value is None:
        return None
    if not isinstance(node, ast.Call):
        raise BadWorkload(f"{where}: write it as Cut(...) with literal values, not {ast.unparse(node)}")
    named = {k.arg: _literal(k.value, where) for k in node.keywords if k.arg}
    positional = dict(zip([f.name for f in fields(Cut)], [_literal(a, where) for a in node.args], strict=False))
    try:
        return Cut(**positional, **named)
    except TypeError as exc:
        raise BadWorkload(f"{where}: {exc}") from None
