"""Readers for the real Keras dataset files, after `files.resolve` has found and checked them."""

from __future__ import annotations

import gzip
import pickle
import tarfile
from pathlib import Path

import numpy as np

from benchmarks.data.files import FileLocations, resolve_dataset

Split = tuple[np.ndarray, np.ndarray]


def load_mnist(where: FileLocations) -> tuple[Split, Split]:
    path = resolve_dataset("mnist", where)["mnist.npz"]
    with np.load(path, allow_pickle=False) as f:
        return (f["x_train"], f["y_train"]), (f["x_test"], f["y_test"])


def _read_idx(path: Path, header: int) -> np.ndarray:
    with gzip.open(path, "rb") as handle:
        return np.frombuffer(handle.read(), np.uint8, offset=header)


def load_fashion_mnist(where: FileLocations) -> tuple[Split, Split]:
    paths = resolve_dataset("fashion_mnist", where)

    def split(prefix: str) -> Split:
        labels = _read_idx(paths[f"fashion-mnist/{prefix}-labels-idx1-ubyte.gz"], 8)
        images = _read_idx(paths[f"fashion-mnist/{prefix}-images-idx3-ubyte.gz"], 16).reshape(len(labels), 28, 28)
        return images, labels

    return split("train"), split("t10k")


def load_imdb(
    where: FileLocations, num_words: int
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Keras's own IMDB preprocessing (index shift, OOV and start tokens, shuffle) on the checked file."""
    from keras.datasets import imdb

    path = resolve_dataset("imdb", where)["imdb.npz"]
    # An absolute path makes Keras use the checked file in place; its own hash check then passes too.
    splits: tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]] = imdb.load_data(
        path=str(path), num_words=num_words
    )  # each x an object array of token-id lists
    return splits


def load_cifar10(where: FileLocations) -> tuple[Split, Split]:
    path = resolve_dataset("cifar10", where)["cifar-10-python.tar.gz"]
    batches: dict[str, dict[bytes, object]] = {}
    with tarfile.open(path, "r:gz") as archive:
        for member in archive.getmembers():
            name = Path(member.name).name
            if name.startswith("data_batch_") or name == "test_batch":
                handle = archive.extractfile(member)
                assert handle is not None
                # The checksum above pins the archive, so unpickling these batches is safe.
                batches[name] = pickle.load(handle, encoding="bytes")

    def stack(names: list[str]) -> Split:
        x = np.concatenate([np.asarray(batches[n][b"data"], np.uint8) for n in names])
        y = np.concatenate([np.asarray(batches[n][b"labels"], np.uint8) for n in names])
        return x.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), y

    return stack([f"data_batch_{i}" for i in range(1, 6)]), stack(["test_batch"])


def load_nietzsche(where: FileLocations) -> str:
    return resolve_dataset("nietzsche", where)["nietzsche.txt"].read_text(encoding="utf-8")
