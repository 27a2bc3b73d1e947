"""A workload's cost per training step, measured on the CPU before anything is rented: what the estimator's
physics basis (estimator.physics) scales to a GPU it has never run on.

From the JAX program of the Keras train step (`jax.make_jaxpr(model.train_step)`, traced on the CPU, recurrent
layers written out step by step as campaign.model_costs does for XLA's count):

- `matmul_flops` and `conv_flops`: the floating-point operations of its matrix products (`dot_general`) and of its
  convolutions (`conv_general_dilated`), forward and backward, from their shapes: the work tensor cores do;
- `operations`: its primitive operations, each a kernel launch or a host dispatch where nothing fuses them: the
  work of small layers and recurrent steps, which latency bounds rather than arithmetic.

And from the host, the part of a step that stays on the CPU whatever the GPU:

- `host_data_s`: the data pipeline's time per batch, Keras's own data adapter (a `PyDataset`'s augmentation
  included) iterated over the workload's data, the best of three passes;
- `host_score`: this host's single-thread score (benchmarks.harness.fingerprint), so that the data time can be
  scaled to another host's CPU.

    python -m benchmarks step-costs --workload-file my_model.py        # -> logs/step-costs/<name>-<sha>.json

Reading a record needs no framework (`read_step_costs`); measuring one needs Keras on JAX (`measure`).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

FOLDER = "step-costs"  # under the log root: logs/step-costs/<workload>-<sha256[:12]>.json
HOW = (
    "jax.make_jaxpr(model.train_step) on the CPU, recurrent layers written out: dot_general and "
    "conv_general_dilated FLOPs from their shapes, primitive operations counted; host data time: Keras's data "
    "adapter over the data, best of 3 passes"
)
DATA_BATCHES = 24  # batches per timed pass of the data pipeline
DATA_PASSES = 3


@dataclass(frozen=True)
class StepCosts:
    workload: str
    batch_size: int
    matmul_flops: float
    conv_flops: float
    operations: int
    host_data_s: float
    host_score: float  # million loop iterations/s (benchmarks.harness.fingerprint.host_single_thread_score)
    parameters: int
    data: str  # the dataset its shapes came from
    jax: str
    keras: str
    sha256: str = ""  # a workload file's content hash ("" for a built-in workload)
    epoch_samples: int | None = None  # its full epoch's training samples, as SPEC.shapes declares them
    how: str = HOW

    @property
    def flops(self) -> float:
        return self.matmul_flops + self.conv_flops


def record_path(logs: Path, workload: str, sha256: str) -> Path:
    return logs / FOLDER / f"{workload}-{sha256[:12]}.json"


def write_step_costs(costs: StepCosts, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(costs), indent=1) + "\n")
    return path


def read_step_costs(path: Path) -> StepCosts | None:
    """A record as written by `write_step_costs`; None for a file that is not one."""
    try:
        raw = json.loads(path.read_text())
        known = {f.name for f in fields(StepCosts)}
        return StepCosts(**{k: v for k, v in raw.items() if k in known})
    except (OSError, ValueError, TypeError):
        return None


def recorded(logs: Path) -> list[StepCosts]:
    """Every step-cost record under `logs/step-costs/`."""
    folder = logs / FOLDER
    found = (read_step_costs(p) for p in sorted(folder.glob("*.json"))) if folder.is_dir() else iter(())
    return [c for c in found if c is not None]


# ---- measuring (Keras on JAX, on the CPU) ----------------------------------------------------------------------


def measure(module: Any, data: Any, sha256: str = "") -> StepCosts:
    """The step costs of a workload module (SPEC, build_model, compile_args) trained on `data` (a benchmarks
    `Data`); the process must run Keras on JAX."""
    import jax
    import keras

    from benchmarks.harness.fingerprint import host_single_thread_score

    size = module.SPEC.batch_size
    model, state, batch = built_train_step(module, data)
    counts = _count(jax.make_jaxpr(model.train_step)(state, batch).jaxpr, {"ops": 0, "dot": 0.0, "conv": 0.0})
    return StepCosts(
        workload=module.SPEC.name,
        batch_size=size,
        matmul_flops=counts["dot"],
        conv_flops=counts["conv"],
        operations=int(counts["ops"]),
        host_data_s=host_data_seconds(data, size),
        host_score=host_single_thread_score(),
        parameters=int(model.count_params()),
        data=data.info.dataset,
        jax=jax.__version__,
        keras=keras.__version__,
        sha256=sha256,
    )


def measure_plugin(module: Any, label: str, sha256: str, where: Any) -> StepCosts:
    """A workload file's step costs (`module`: as benchmarks.workload_set loads it) on enough of its data for the
    data pipeline's passes: its own data where `where` has it, else labelled synthetic data of its declared shapes
    (the costs follow the shapes); BadWorkload names the step that failed."""
    from benchmarks.data.files import DatasetUnavailable
    from benchmarks.data.loaders import SYNTHETIC_NAME
    from benchmarks.data.types import DataRequest
    from benchmarks.plugins import BadWorkload

    spec = module.SPEC
    samples = spec.batch_size * DATA_BATCHES
    request = DataRequest(spec.datasets[0], train_limit=samples, val_limit=spec.batch_size, batch_size=spec.batch_size)
    try:
        try:
            data = module.load_data(request, where)
        except DatasetUnavailable:
            if spec.shapes is None:
                raise
            data = module.load_data(replace(request, dataset=SYNTHETIC_NAME), where)
        declared = spec.shapes.train_samples if spec.shapes is not None else None
        return replace(measure(module, data, sha256), epoch_samples=declared)
    except DatasetUnavailable as exc:
        raise BadWorkload(
            f"{label}: its data is unavailable here ({exc}); pass --data-dir or declare SPEC.shapes"
        ) from None
    except BadWorkload:
        raise
    except Exception as exc:  # broad on purpose: the user's code fails in one line naming the step
        raise BadWorkload(f"{label}: the step-cost analysis failed: {type(exc).__name__}: {exc}") from exc


def built_train_step(module: Any, data: Any) -> tuple[Any, tuple[Any, ...], tuple[Any, Any]]:
    """The compiled Keras model of a workload, the state its `train_step` takes (the variables of the model,
    optimizer and metrics, as fit builds them) and its first batch: what tracing or lowering one step needs."""
    import keras

    from benchmarks.harness import backends

    batch = _first_batch(data, module.SPEC.batch_size)
    model = backends.build_model(module, data)
    model.compile(**module.compile_args())
    for layer in model._flatten_layers():
        if isinstance(layer, keras.layers.RNN):
            layer.unroll = True  # every time step its own operations, as the GPU runs them one after another
    model._symbolic_build(data_batch=batch)
    return model, train_state(model), batch


def train_state(model: Any) -> tuple[list[Any], ...]:
    """The state a built Keras model's JAX `train_step` takes: the values of its trainable, non-trainable,
    optimizer and metrics variables, in that order."""
    groups = (model.trainable_variables, model.non_trainable_variables, model.optimizer.variables)
    return tuple([v.value for v in group] for group in (*groups, model.metrics_variables))


def _first_batch(data: Any, size: int) -> tuple[Any, Any]:
    import jax
    import keras

    from benchmarks.data.types import head

    if isinstance(data.x_train, keras.utils.PyDataset):  # batches itself, e.g. augmentation on the CPU
        found = data.x_train[0]
        return found[0], found[1]
    return head(data.x_train, size), jax.tree.map(lambda y: head(y, size), data.y_train)


def _count(jaxpr: Any, counts: dict[str, float]) -> dict[str, float]:
    """Operations and FLOPs of a jaxpr, its nested programs (jit, custom derivatives, loops' bodies) included."""
    for equation in jaxpr.eqns:
        inner = [p for p in equation.params.values() if hasattr(p, "eqns") or hasattr(p, "jaxpr")]
        if inner:
            for program in inner:
                _count(program.jaxpr if hasattr(program, "jaxpr") else program, counts)
            continue
        counts["ops"] += 1
        name = equation.primitive.name
        if name == "dot_general":
            (contracting, _), _ = equation.params["dimension_numbers"]
            shape = equation.invars[0].aval.shape
            counts["dot"] += 2.0 * _size(equation.outvars[0].aval.shape) * _size(shape[i] for i in contracting)
        elif name == "conv_general_dilated":
            kernel = equation.invars[1].aval.shape
            out_features = kernel[equation.params["dimension_numbers"].rhs_spec[0]]
            counts["conv"] += 2.0 * _size(equation.outvars[0].aval.shape) * _size(kernel) / out_features
    return counts


def _size(dims: Iterable[int]) -> float:
    return float(math.prod(int(d) for d in dims))


def host_data_seconds(data: Any, size: int) -> float:
    """Seconds per batch of Keras's data adapter over the training data (what `fit` iterates), best of a few
    passes: the least the host spends feeding a step, on this CPU."""
    import keras
    from keras.src.trainers.data_adapters import get_data_adapter

    def one_pass() -> float:
        if isinstance(data.x_train, keras.utils.PyDataset):
            adapter = get_data_adapter(data.x_train)
        else:
            adapter = get_data_adapter(data.x_train, data.y_train, batch_size=size, shuffle=True)
        batches, started = 0, time.perf_counter()
        for _ in adapter.get_numpy_iterator():
            batches += 1
            if batches >= DATA_BATCHES:
                break
        return (time.perf_counter() - started) / max(batches, 1)

    return min(one_pass() for _ in range(DATA_PASSES))
