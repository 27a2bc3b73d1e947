"""Data-parallel training over several devices of one machine: `--gpus N|all` and `--batch-policy`.

Every device holds a full copy of the model, takes an equal share of each batch, and the gradients are summed
before every update, so one step is the published step on a batch split N ways:

- JAX: `keras.distribution.DataParallel` over the first N devices, set before the model is built; in a job of
  several processes (a launcher's variables, benchmarks.harness.processes) over every device of the job, each
  process feeding its share of every batch (benchmarks.harness.jax_processes);
- TensorFlow: a `tf.distribute.MirroredStrategy` scope around build and compile (the model keeps it for fit);
- PyTorch: none. Keras 3.15's torch backend has no distribution library (`keras/src/backend/__init__.py` sets
  `distribution_lib = None` for torch), so `fit` cannot split a batch over GPUs; see docs/distribution.md.
- torch-native: one process per device, DistributedDataParallel (benchmarks.harness.native); `--gpus N` starts the
  N processes (benchmarks.cli), or a launcher does (torchrun, Slurm's srun: benchmarks.harness.processes).

Batch policies:
- `same-global` keeps the published batch (and learning rate), split over the devices: the comparison the 2018
  provider study made with `multi_gpu_model`;
- `per-device` gives every device the published batch (global batch x N) and scales the learning rate by
  sqrt(N). Every workload here trains with an adaptive optimizer (Adam, RMSprop, Adadelta). For RMSprop and Adam
  the stochastic-differential-equation analysis of Malladi et al. (NeurIPS 2022, "On the SDEs and Scaling Rules
  for Adaptive Gradient Algorithms") gives a square-root rule; the linear rule of Goyal et al. (2017) was derived
  and validated for SGD with momentum (and needed a warm-up there, which the published scripts lack). Only the
  learning rate is scaled (their rule also adjusts the moment decays and epsilon); docs/distribution.md says why.

On a machine without GPUs the devices are logical CPU devices, for tests: JAX's come from
`XLA_FLAGS=--xla_force_host_platform_device_count=N` (set before JAX starts), TensorFlow's are made here.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
from dataclasses import dataclass, replace
from typing import Any

from benchmarks.data.types import Data
from benchmarks.harness.processes import Place

ALL = "all"
SAME_GLOBAL = "same-global"
PER_DEVICE = "per-device"
BATCH_POLICIES = (SAME_GLOBAL, PER_DEVICE)
LEARNING_RATE_RULE = "sqrt"  # per-device policy: learning rate x sqrt(devices); see the module docstring
NATIVE = "torch-native"
STRATEGIES = {
    "jax": "keras.distribution.DataParallel",
    "tensorflow": "tf.distribute.MirroredStrategy",
    NATIVE: "torch.nn.parallel.DistributedDataParallel, one process per device",
}
SINGLE_DEVICE_BACKENDS = frozenset({"torch"})  # Keras has no data-parallel fit for these (module docstring)
TORCH_SINGLE_DEVICE = (
    "the torch backend trains on one device only (Keras 3.15 has no data-parallel fit on PyTorch; "
    "see docs/distribution.md)"
)
TORCH_UNSUPPORTED = f"--gpus: {TORCH_SINGLE_DEVICE}; run --gpus N on jax or tensorflow"
XLA_DEVICES_FLAG = "--xla_force_host_platform_device_count"


class DistributionError(ValueError):
    """A --gpus or --batch-policy value that cannot be honoured; the one-line message names the flag."""


def parse_gpus(text: str) -> int | str:
    """`--gpus`: a positive device count, or "all" (argparse names the flag in its error)."""
    if text == ALL:
        return ALL
    try:
        value = int(text)
    except ValueError:
        raise DistributionError(f"expected a positive integer or 'all', got {text!r}") from None
    if value < 1:
        raise DistributionError(f"expected a positive integer or 'all', got {value}")
    return value


def check_request(backend: str, gpus: int | str, batch_policy: str) -> None:
    """What can be refused before a framework is imported."""
    if batch_policy not in BATCH_POLICIES:
        raise DistributionError(f"--batch-policy: expected one of {', '.join(BATCH_POLICIES)}, got {batch_policy!r}")
    if backend in SINGLE_DEVICE_BACKENDS and gpus != 1 and gpus != ALL:
        raise DistributionError(TORCH_UNSUPPORTED)


@dataclass(frozen=True)
class Devices:
    """The devices one process trains on."""

    backend: str
    names: tuple[str, ...]  # as the framework names them, e.g. "gpu:0" (JAX) or "/gpu:0" (TensorFlow)
    device_type: str  # "gpu" or "cpu"
    device_kind: str  # the model, e.g. "NVIDIA H200"; "cpu" for (logical) CPU devices
    processes: int = 1  # the job's processes these devices belong to (JAX across processes; torch-native: one each)

    @property
    def count(self) -> int:
        return len(self.names)

    @property
    def strategy(self) -> str | None:
        if self.count == 1:
            return None
        if self.backend == "jax" and self.processes > 1:
            return f"{STRATEGIES['jax']} across {self.processes} processes (jax.distributed)"
        return STRATEGIES[self.backend]


@functools.cache
def resolve_devices(backend: str, gpus: int | str, place: Place | None = None) -> Devices:
    """The first `gpus` devices of this machine (all of them for "all"); once per process, because TensorFlow's
    logical devices can be configured only before its runtime starts. torch-native: the devices of the job's
    processes, one each (`place`: where this process stands among them); JAX in a job of several processes: every
    device of the job, once this process has joined it."""
    place = place or Place()
    if backend == NATIVE:
        return _native_devices(gpus, place)
    if backend == "jax" and place.several:
        return _jax_job_devices(gpus, place)
    if backend == "tensorflow":
        found = _tensorflow_devices(gpus)
    else:
        found = _jax_devices() if backend == "jax" else _torch_devices()
    wanted = found.count if gpus == ALL else int(gpus)
    if wanted > found.count:
        raise DistributionError(f"--gpus {gpus}: {_available(found)}")
    if backend in SINGLE_DEVICE_BACKENDS and wanted > 1:
        raise DistributionError(TORCH_UNSUPPORTED)
    return replace(found, names=found.names[:wanted])


def _available(found: Devices) -> str:
    text = f"this machine has {found.count} {found.device_type} device(s) for {found.backend}"
    if found.device_type == "cpu" and found.backend == "jax":
        text += f"; without GPUs, start with XLA_FLAGS={XLA_DEVICES_FLAG}=N to split the CPU into N logical devices"
    return text


def _jax_devices() -> Devices:
    import jax
    import keras

    devices = jax.devices()  # the default platform's: GPUs where there are any, else the (logical) CPU devices
    names = tuple(keras.distribution.list_devices(devices[0].platform))
    return Devices("jax", names, devices[0].platform, devices[0].device_kind)


def _jax_job_devices(gpus: int | str, place: Place) -> Devices:
    """Every device of the job's processes: a model replicated over only some of them would leave a process
    without a share of the batch, so `--gpus` counts them all (or is "all")."""
    from benchmarks.harness import jax_processes

    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        raise DistributionError(
            "--backend jax under torchrun: its agent holds MASTER_PORT, where JAX's coordinator would listen; "
            "start each process with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT, or with srun"
        )
    jax_processes.join(place)
    found = replace(_jax_devices(), processes=place.world)
    if gpus != ALL and int(gpus) != found.count:
        raise DistributionError(
            f"--gpus {gpus}: this process is one of {place.world} (its launcher's environment), whose devices "
            f"number {found.count}; give --gpus {found.count} or all"
        )
    return found


def _tensorflow_devices(gpus: int | str) -> Devices:
    import tensorflow as tf

    gpu_list = tf.config.list_physical_devices("GPU")
    if gpu_list:
        name = tf.config.experimental.get_device_details(gpu_list[0]).get("device_name", "gpu")
        return Devices("tensorflow", tuple(f"/gpu:{i}" for i in range(len(gpu_list))), "gpu", name)
    if gpus != ALL and int(gpus) > 1:
        # No GPU: split the CPU into logical devices, as XLA_FLAGS does for JAX (must precede the runtime's start).
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * int(gpus))
    count = len(tf.config.list_logical_devices("CPU"))
    return Devices("tensorflow", tuple(f"/cpu:{i}" for i in range(count)), "cpu", "cpu")


def _native_devices(gpus: int | str, place: Place) -> Devices:
    """One device per process: this process's (cuda:LOCAL_RANK, or the CPU) and its peers'."""
    import torch

    wanted = place.world if gpus == ALL else int(gpus)
    if wanted != place.world:
        raise DistributionError(
            f"--gpus {gpus}: this process is one of {place.world} (its launcher's environment); "
            "`python -m benchmarks run --backend torch-native --gpus N` starts the N processes itself"
        )
    if torch.cuda.is_available():
        names = tuple(f"cuda:{rank}" for rank in range(place.world))
        return Devices(NATIVE, names, "gpu", torch.cuda.get_device_name(place.local_rank), place.world)
    return Devices(NATIVE, tuple(f"cpu:{rank}" for rank in range(place.world)), "cpu", "cpu", place.world)


def _torch_devices() -> Devices:
    import torch

    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        return Devices("torch", tuple(f"cuda:{i}" for i in range(count)), "gpu", torch.cuda.get_device_name(0))
    return Devices("torch", ("cpu",), "cpu", "cpu")


@dataclass(frozen=True)
class Distribution:
    """How one workload is spread over the devices; recorded in the run metadata under "distribution"."""

    devices: Devices
    batch_policy: str
    published_batch_size: int
    global_batch_size: int
    learning_rate_factor: float  # applied to the published learning rate (and its schedule's start)
    published_learning_rate: float | None = None  # read from the workload's optimizer at compile time
    learning_rate: float | None = None
    # (train, validation) samples of array inputs cut so that every batch splits evenly; a PyDataset's short last
    # batch is cut as it is drawn and not counted here
    dropped_samples: tuple[int, int] = (0, 0)
    replicas: int | None = None  # devices holding a copy of the built model, as the framework reports them

    @property
    def per_device_batch_size(self) -> int:
        return self.global_batch_size // self.devices.count

    @property
    def parallel(self) -> bool:
        return self.devices.count > 1

    def even(self, limit: int | None) -> int | None:
        """A sample limit rounded down to a multiple of the devices, so that loaders which batch the data
        themselves (VoxCeleb pairs) end on a batch that splits evenly."""
        return None if limit is None else max(limit - limit % self.devices.count, self.devices.count)

    def trained(self) -> dict[str, Any]:
        """The hyperparameters this run trained with where they differ from the published ones."""
        scaled = {"learning_rate": self.learning_rate} if self.learning_rate_factor != 1.0 else {}
        return {"batch_size": self.global_batch_size, **scaled}

    def as_dict(self) -> dict[str, Any]:
        return {
            "devices": self.devices.count,
            "device_names": list(self.devices.names),
            "device_type": self.devices.device_type,
            "device_kind": self.devices.device_kind,
            "strategy": self.devices.strategy,
            "processes": self.devices.processes,
            "batch_policy": self.batch_policy,
            "published_batch_size": self.published_batch_size,
            "global_batch_size": self.global_batch_size,
            "per_device_batch_size": self.per_device_batch_size,
            "published_learning_rate": self.published_learning_rate,
            "learning_rate": self.learning_rate,
            "learning_rate_rule": LEARNING_RATE_RULE if self.batch_policy == PER_DEVICE else "none",
            "learning_rate_factor": self.learning_rate_factor,
            "dropped_samples": {"train": self.dropped_samples[0], "val": self.dropped_samples[1]},
            "replicas": self.replicas,
        }


def plan(devices: Devices, batch_policy: str, published_batch_size: int) -> Distribution:
    """Batch sizes and learning-rate factor of one workload under a policy; refuses an uneven split."""
    n = devices.count
    if batch_policy == PER_DEVICE:
        return Distribution(devices, batch_policy, published_batch_size, published_batch_size * n, math.sqrt(n))
    if published_batch_size % n:
        raise DistributionError(
            f"--batch-policy {SAME_GLOBAL}: the published batch of {published_batch_size} does not split evenly "
            f"over {n} devices; use --batch-policy {PER_DEVICE} or another --gpus"
        )
    return Distribution(devices, batch_policy, published_batch_size, published_batch_size, 1.0)


def activate(dist: Distribution) -> contextlib.AbstractContextManager[None]:
    """The context to build and compile the model in.

    JAX: sets Keras's global distribution for the rest of the workload (fit reads it at every step to shard the
    batch; the next workload's `clear_session` removes it), so the context itself does nothing.
    TensorFlow: the MirroredStrategy's scope; the model records the strategy and fit runs under it.
    """
    if not dist.parallel:
        return contextlib.nullcontext()
    if dist.devices.backend == "jax":
        import keras

        # across processes each feeds its own share of every batch (benchmarks.harness.jax_processes)
        keras.distribution.set_distribution(
            keras.distribution.DataParallel(
                devices=list(dist.devices.names), auto_shard_dataset=dist.devices.processes == 1
            )
        )
        return contextlib.nullcontext()
    scope: contextlib.AbstractContextManager[None] = _mirrored_strategy(dist.devices.names).scope()
    return scope


@functools.cache
def _mirrored_strategy(names: tuple[str, ...]) -> Any:
    """One strategy per process: a second one numbers its collective operations from the same start, and its
    all-reduces then meet the first model's (seen as "Shape mismatch in the collective instance 100")."""
    import tensorflow as tf

    return tf.distribute.MirroredStrategy(devices=list(names))


def observe(model: Any, dist: Distribution) -> Distribution:
    """`dist` with the number of devices the framework placed the compiled model's weights on: a check that the
    strategy took effect, not a restatement of the request."""
    backend = dist.devices.backend
    if backend == "jax":
        replicas = len(model.trainable_variables[0].value.sharding.device_set)
    elif backend == "tensorflow":
        replicas = model.distribute_strategy.num_replicas_in_sync
    else:
        replicas = 1  # one device: see TORCH_UNSUPPORTED
    return replace(dist, replicas=replicas)


def scale_learning_rate(compile_args: dict[str, Any], dist: Distribution) -> tuple[dict[str, Any], Distribution]:
    """The workload's compile arguments with its optimizer's learning rate scaled by the policy, and `dist` with
    the published and the used learning rates filled in.

    An `InverseTimeDecay` schedule (Keras 2's `decay`) starts at the scaled rate and decays N times faster per
    step, so that the rate as a function of samples seen is the published one times the factor: with a batch N
    times larger there are N times fewer steps.
    """
    optimizer = compile_args["optimizer"]
    config = optimizer.get_config()
    rate = config["learning_rate"]
    steps_factor = dist.global_batch_size / dist.published_batch_size
    if isinstance(rate, dict):
        published, config["learning_rate"] = _scaled_schedule(rate, dist.learning_rate_factor, steps_factor)
    else:
        published = _float32(rate)
        config["learning_rate"] = published * dist.learning_rate_factor
    scaled = published * dist.learning_rate_factor
    if dist.learning_rate_factor == 1.0 and steps_factor == 1.0:
        return compile_args, replace(dist, published_learning_rate=published, learning_rate=published)
    rebuilt = type(optimizer).from_config(config)
    # Variables kept out of weight decay (`exclude_from_weight_decay`) are no part of an optimizer's config.
    for attribute in ("_exclude_from_weight_decay", "_exclude_from_weight_decay_pattern"):
        if hasattr(optimizer, attribute):
            setattr(rebuilt, attribute, getattr(optimizer, attribute))
    new_args = {**compile_args, "optimizer": rebuilt}
    return new_args, replace(dist, published_learning_rate=published, learning_rate=scaled)


def _scaled_schedule(schedule: dict[str, Any], factor: float, steps_factor: float) -> tuple[float, dict[str, Any]]:
    if schedule.get("class_name") != "InverseTimeDecay":
        raise DistributionError(f"--batch-policy: no scaling rule for the schedule {schedule.get('class_name')!r}")
    inner = dict(schedule["config"])
    published = _float32(inner["initial_learning_rate"])
    inner["initial_learning_rate"] = published * factor
    inner["decay_rate"] = float(inner["decay_rate"]) * steps_factor
    return published, {**schedule, "config": inner}


def _float32(value: float) -> float:
    """A rate as written in the workload (0.001), not as its float32 variable reads back (0.0010000000474974513)."""
    return float(f"{float(value):.7g}")


def split_evenly(data: Data, dist: Distribution) -> tuple[Data, Distribution]:
    """`data` with every batch divisible by the device count, the last short one included (JAX refuses to shard
    a batch of 49 over 2 devices): array inputs lose at most N-1 samples, recorded as dropped; a PyDataset's
    batches are cut as they are drawn."""
    if not dist.parallel:
        return data, dist
    n = dist.devices.count
    x_train, y_train, dropped_train = _split(data.x_train, data.y_train, n)
    x_val, y_val, dropped_val = _split(data.x_val, data.y_val, n)
    info = replace(
        data.info,
        train_samples=data.info.train_samples - dropped_train,
        val_samples=data.info.val_samples - dropped_val,
    )
    even = replace(data, x_train=x_train, y_train=y_train, x_val=x_val, y_val=y_val, info=info)
    return even, replace(dist, dropped_samples=(dropped_train, dropped_val))


def _split(x: Any, y: Any, n: int) -> tuple[Any, Any, int]:
    import keras

    if x is None:
        return x, y, 0
    if isinstance(x, keras.utils.PyDataset):
        return _even_batches_class()(x, n), y, 0
    count = len(keras.tree.flatten(x)[0])
    keep = count - count % n
    cut = functools.partial(keras.tree.map_structure, lambda a: a[:keep])
    return cut(x), None if y is None else cut(y), count - keep


@functools.cache
def _even_batches_class() -> type:
    """Made on first use: this module is imported before KERAS_BACKEND is set, so it imports keras late."""
    import keras

    class _EvenBatches(keras.utils.PyDataset):
        """A PyDataset's batches cut to a multiple of the device count; only a short last batch loses samples."""

        def __init__(self, inner: keras.utils.PyDataset, devices: int) -> None:
            super().__init__()
            self.inner, self.devices = inner, devices

        def __len__(self) -> int:
            return len(self.inner)

        def __getitem__(self, index: int) -> Any:
            batch = self.inner[index]
            size = len(keras.tree.flatten(batch)[0])
            keep = size - size % self.devices
            if keep == 0:
                raise DistributionError(
                    f"--gpus {self.devices}: batch {index} has {size} sample(s), fewer than the devices; "
                    "give --train-limit and --val-limit"
                )
            return batch if keep == size else keras.tree.map_structure(lambda a: a[:keep], batch)

        def on_epoch_end(self) -> None:
            self.inner.on_epoch_end()

    return _EvenBatches
