"""What a workload's data loader hands to the harness."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

REAL = "real"
SYNTHETIC = "synthetic"


@dataclass(frozen=True)
class DataRequest:
    """What the harness asks a workload's loader for."""

    dataset: str  # one of the workload's datasets, or "synthetic"
    train_limit: int | None = None  # cut-down suites train on the first N samples
    val_limit: int | None = None
    seed: int = 1337
    batch_size: int | None = None  # the global batch, for loaders that batch themselves; None: the published one


@dataclass
class DataInfo:
    dataset: str
    source: str  # REAL or SYNTHETIC
    train_samples: int
    val_samples: int
    files: list[dict[str, str]] = field(default_factory=list)
    synthetic_reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Data:
    """Arrays (or lists of arrays for multi-input models) in the layout `model.fit` takes."""

    x_train: Any
    y_train: Any
    x_val: Any | None
    y_val: Any | None
    info: DataInfo
    extras: dict[str, Any] = field(default_factory=dict)  # e.g. vocabulary, for post-training generation

    @property
    def has_validation(self) -> bool:
        return self.x_val is not None


def is_multi_input(x: Any) -> bool:
    """A list or tuple of per-input arrays (e.g. the two sides of a siamese pair), not a list of samples."""
    return isinstance(x, list | tuple) and bool(x) and all(isinstance(a, np.ndarray) for a in x)


def head(array: Any, limit: int | None) -> Any:
    """The first `limit` samples of an array, of a list of samples, or of each array of a multi-input."""
    if limit is None:
        return array
    if is_multi_input(array):
        return type(array)(a[:limit] for a in array)
    return array[:limit]


def sample_count(array: Any) -> int:
    return len(array[0]) if is_multi_input(array) else len(array)
