"""The workload registry. Each workload is one short module: SPEC, load_data, build_model, compile_args.

A workload module defines:
- `SPEC`: a WorkloadSpec with the published hyperparameters;
- `load_data(request: DataRequest, where: FileLocations) -> Data`;
- `build_model(data: Data) -> keras.Model` (uncompiled);
- `compile_args() -> dict` (optimizer, loss, metrics, ...: the harness adds jit and steps-per-execution);
- optionally `after_training(model, data) -> dict`, run outside the timed epochs.

A user's own workload keeps the same contract in a file or an installed package (benchmarks.plugins); the
workloads a command knows, built-in and the user's, are one `benchmarks.workload_set.Workloads`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

WORKLOADS: tuple[str, ...] = (
    "mnist_mlp",
    "mnist_cnn",
    "cifar10_cnn",
    "imdb_fasttext",
    "imdb_bidirectional_lstm",
    "lstm_text_generation",
    "text_generator_keras",
    "twitter_sentiment_bilstm",
    "siamese_lstm",
    "resnet50",
    "gpt_nietzsche",
)
# Today's kind of model, sized to load a current GPU (the 2017-2018 scripts before them leave it mostly idle).
REFERENCE_WORKLOADS: tuple[str, ...] = ("resnet50", "gpt_nietzsche")
# The workloads built on LSTM layers (their kernel, cuDNN or Keras's generic loop, is a setting that changes their
# time). Here, not in each SPEC, so that planners without Keras (the GPU session tool) read the same list.
LSTM_WORKLOADS: frozenset[str] = frozenset(
    {
        "imdb_bidirectional_lstm",
        "lstm_text_generation",
        "text_generator_keras",
        "twitter_sentiment_bilstm",
        "siamese_lstm",
    }
)


@dataclass(frozen=True)
class Cut:
    """How a cut-down suite shrinks a workload: fewer epochs and the first N samples."""

    epochs: int
    train_limit: int | None
    val_limit: int | None


@dataclass(frozen=True)
class Shapes:
    """A workload's data as shapes: what labelled synthetic data of it is made of, and how many samples a full epoch
    trains on. Plug-ins declare it (`WorkloadSpec.shapes`) to run without their files, or with none at all."""

    inputs: tuple[int, ...]  # one sample's input shape, e.g. (28, 28, 1)
    train_samples: int
    val_samples: int = 0
    classes: int | None = None  # integer labels in [0, classes); None: float targets of shape `targets`
    targets: tuple[int, ...] = ()  # one sample's target shape (with classes: () for one label per sample)
    vocabulary: int | None = None  # inputs are integer token ids below this; None: float inputs


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    epochs: int  # as published
    batch_size: int
    datasets: tuple[str, ...]  # real datasets it accepts; the first is the default
    hyperparameters: dict[str, Any]  # recorded in the metadata
    quick: Cut
    # The "bounded" suite: published epochs and hyperparameters, with the sample count capped only where a full
    # run would take hours even on a current GPU (None: the full published run).
    bounded: Cut | None = None
    # The "short" suite, for repeats on GPUs: 5 epochs (1 compiling + 4 steady) on a slice sized for epochs of about
    # 1-3 s on an H200, so that several fresh-process repeats of every workload fit in minutes.
    short: Cut | None = None
    validates: bool = True  # False where the published script fit without validation data
    # Built in mixed_float16 where the backend sees a GPU (benchmarks.harness.backends.build_model), float32 else.
    mixed_precision: bool = False
    loss_key: str = "loss"  # the Keras log key written to the CSV's `loss` column
    accuracy_key: str | None = "accuracy"
    reference: str = ""  # where the published version of this workload is described
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    shapes: Shapes | None = None  # a plug-in's declared data shapes (None: its loader alone knows them)

    @property
    def uses_lstm(self) -> bool:
        return self.name in LSTM_WORKLOADS


class UnknownWorkload(ValueError):
    pass


def load(name: str, native: bool = False) -> ModuleType:
    """A built-in workload's module, or with `native` its native PyTorch twin's (benchmarks.workloads.native); a
    user's workload is loaded through benchmarks.workload_set."""
    if name not in WORKLOADS:
        raise UnknownWorkload(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}")
    if native:
        from benchmarks.workloads import native as native_workloads

        return native_workloads.load(name)
    return importlib.import_module(f"benchmarks.workloads.{name}")


def spec(name: str) -> WorkloadSpec:
    found: WorkloadSpec = load(name).SPEC
    return found
