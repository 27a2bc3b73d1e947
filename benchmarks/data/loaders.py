"""Loaders the workloads share: real files when asked for by name, labelled synthetic data when asked for that.

Each returns the train and validation splits cut to the request's limits, and the DataInfo the metadata records.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from benchmarks.data import real, synthetic
from benchmarks.data.files import FileLocations, file_records
from benchmarks.data.types import REAL, SYNTHETIC, DataInfo, DataRequest, head, sample_count

SYNTHETIC_NAME = "synthetic"
# Sizes of the real datasets, which the synthetic stand-ins copy when no limit is given.
MNIST_SIZES = (60000, 10000)
CIFAR10_SIZES = (50000, 10000)
IMDB_SIZES = (25000, 25000)
NIETZSCHE_CHARS = 600893

Part = tuple[Any, Any]  # (x, y): arrays, or lists of token-id lists
Splits = tuple[Part, Part]  # training, validation


def _sizes(request: DataRequest, full: tuple[int, int]) -> tuple[int, int]:
    return (
        min(request.train_limit or full[0], full[0]),
        min(request.val_limit or full[1], full[1]),
    )


def info_for(request: DataRequest, stands_for: str, x_train: Any, x_val: Any, reason: str | None = None) -> DataInfo:
    """DataInfo for real data (named by the request) or for synthetic data standing in for `stands_for`."""
    n_val = sample_count(x_val) if x_val is not None else 0
    if request.dataset == SYNTHETIC_NAME:
        return DataInfo(
            f"{SYNTHETIC_NAME}:{stands_for}", SYNTHETIC, sample_count(x_train), n_val, synthetic_reason=reason
        )
    return DataInfo(request.dataset, REAL, sample_count(x_train), n_val, files=file_records(request.dataset))


def digits_like(request: DataRequest, where: FileLocations) -> Splits:
    """MNIST or Fashion-MNIST (same shapes), or synthetic 28x28 images; uint8 images and labels."""
    if request.dataset == SYNTHETIC_NAME:
        make = partial(synthetic.images, shape=(28, 28), classes=10, seed=request.seed)
        train, val = _synthetic_split(make, request, MNIST_SIZES)
    else:
        loader = {"mnist": real.load_mnist, "fashion_mnist": real.load_fashion_mnist}[request.dataset]
        train, val = loader(where)
    return _cut(train, val, request)


def cifar10(request: DataRequest, where: FileLocations) -> Splits:
    if request.dataset == SYNTHETIC_NAME:
        make = partial(synthetic.images, shape=(32, 32, 3), classes=10, seed=request.seed)
        train, val = _synthetic_split(make, request, CIFAR10_SIZES)
    else:
        train, val = real.load_cifar10(where)
    return _cut(train, val, request)


def imdb(request: DataRequest, where: FileLocations, num_words: int) -> Splits:
    """Token-id lists as `keras.datasets.imdb.load_data(num_words=...)` returns them."""
    if request.dataset == SYNTHETIC_NAME:
        # Real reviews are 10 to 2,500 tokens, most 100 to 300.
        make = partial(synthetic.token_sequences, vocab=num_words, min_len=30, max_len=500, seed=request.seed)
        train, val = _synthetic_split(make, request, IMDB_SIZES)
    else:
        train, val = real.load_imdb(where, num_words)
    return _cut(train, val, request)


def nietzsche(request: DataRequest, where: FileLocations, max_chars: int | None) -> str:
    """The Nietzsche corpus, lowercased as the examples do, cut to `max_chars` for cut-down suites."""
    if request.dataset == SYNTHETIC_NAME:
        text = synthetic.text(min(max_chars or NIETZSCHE_CHARS, NIETZSCHE_CHARS), request.seed)
    else:
        text = real.load_nietzsche(where).lower()
    return text[:max_chars] if max_chars else text


def _synthetic_split(make: Callable[[int], Part], request: DataRequest, full: tuple[int, int]) -> Splits:
    """One synthetic draw (so both parts share the class signal), split into training and validation."""
    n_train, n_val = _sizes(request, full)
    x, y = make(n_train + n_val)
    return (x[:n_train], y[:n_train]), (x[n_train:], y[n_train:])


def _cut(train: Part, val: Part, request: DataRequest) -> Splits:
    (x_train, y_train), (x_val, y_val) = train, val
    return (
        (head(x_train, request.train_limit), head(np.asarray(y_train), request.train_limit)),
        (head(x_val, request.val_limit), head(np.asarray(y_val), request.val_limit)),
    )
