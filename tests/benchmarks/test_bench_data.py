"""Dataset files: checksums, the offline folder, and one-line errors that say how to supply a file."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from benchmarks.data import loaders
from benchmarks.data.files import FILES, ChecksumMismatch, DatasetUnavailable, FileLocations, resolve_dataset
from benchmarks.data.types import DataRequest, head, sample_count


def test_real_fashion_mnist_loads_from_the_cache(keras_home: Path) -> None:
    where = FileLocations(keras_home / "datasets", None, offline=True)
    (x_train, y_train), (x_val, y_val) = loaders.digits_like(DataRequest("fashion_mnist"), where)
    assert x_train.shape == (60000, 28, 28) and x_val.shape == (10000, 28, 28)
    assert sorted(np.unique(y_train)) == list(range(10)) and y_val.dtype == np.uint8
    info = loaders.info_for(DataRequest("fashion_mnist"), "mnist", x_train, x_val)
    assert info.source == "real" and [f["sha256"] for f in info.files] == [s.sha256 for s in FILES["fashion_mnist"]]


def test_offline_data_dir_is_searched_first_flat_or_nested(keras_home: Path, tmp_path: Path) -> None:
    flat = tmp_path / "downloads"
    flat.mkdir()
    shutil.copyfile(keras_home / "datasets/nietzsche.txt", flat / "nietzsche.txt")
    where = FileLocations(tmp_path / "empty-cache", flat, offline=True)
    assert resolve_dataset("nietzsche", where)["nietzsche.txt"] == flat / "nietzsche.txt"


def test_missing_file_offline_is_one_line_naming_file_and_remedy(tmp_path: Path) -> None:
    where = FileLocations(tmp_path / "cache", None, offline=True)
    with pytest.raises(DatasetUnavailable) as error:
        resolve_dataset("mnist", where)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("mnist.npz: not found offline")
    assert "https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz" in message
    assert "--data-dir" in message


def test_checksum_mismatch_is_one_line_naming_the_file(keras_home: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (cache / "fashion-mnist").mkdir(parents=True)
    for spec in FILES["fashion_mnist"]:
        shutil.copyfile(keras_home / "datasets" / spec.relpath, cache / spec.relpath)
    corrupted = cache / "fashion-mnist/t10k-labels-idx1-ubyte.gz"
    content = bytearray(corrupted.read_bytes())
    content[len(content) // 2] ^= 0xFF
    corrupted.write_bytes(bytes(content))
    with pytest.raises(ChecksumMismatch) as error:
        resolve_dataset("fashion_mnist", FileLocations(cache, None, offline=True))
    message = str(error.value)
    assert str(corrupted) in message and "is not the expected" in message and "\n" not in message


def test_download_failure_is_one_line(tmp_path: Path) -> None:
    # An unroutable origin: get_file fails, and the error still says where to put the file by hand.
    from benchmarks.data import files

    spec = files.DatasetFile("nothing.bin", "http://127.0.0.1:9/nothing.bin", "0" * 64)
    with pytest.raises(DatasetUnavailable) as error:
        files.resolve(spec, FileLocations(tmp_path / "cache", None, offline=False))
    assert str(error.value).startswith("nothing.bin: download from http://127.0.0.1:9/nothing.bin failed")
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("load", [loaders.digits_like, loaders.cifar10])
def test_synthetic_images_are_learnable_across_the_split(load) -> None:
    request = DataRequest("synthetic", train_limit=400, val_limit=200)
    (x_train, y_train), (x_val, y_val) = load(request, FileLocations(Path("/nonexistent"), None, offline=True))
    assert len(x_train) == 400 and len(x_val) == 200 and x_train.dtype == np.uint8
    # A nearest-class-mean classifier fitted on the training part must far beat chance (0.1) on validation.
    flat_train = x_train.reshape(len(x_train), -1).astype(float)
    flat_val = x_val.reshape(len(x_val), -1).astype(float)
    means = np.stack([flat_train[y_train == c].mean(axis=0) for c in range(10)])
    predicted = np.argmin(((flat_val[:, None, :] - means[None]) ** 2).sum(-1), axis=1)
    assert (predicted == y_val).mean() > 0.5


def test_synthetic_reviews_are_learnable_across_the_split() -> None:
    request = DataRequest("synthetic", train_limit=400, val_limit=200)
    (x_train, y_train), (x_val, y_val) = loaders.imdb(request, FileLocations(Path("/nonexistent"), None, True), 20000)
    assert len(x_train) == 400 and len(x_val) == 200 and all(t[0] == 1 for t in x_train)
    # Naive Bayes on word counts, fitted on the training part, must beat chance (0.5) on validation.
    counts = np.ones((2, 20000))
    for tokens, label in zip(x_train, y_train, strict=True):
        np.add.at(counts[label], tokens, 1)
    log_odds = np.log(counts[1] / counts[1].sum()) - np.log(counts[0] / counts[0].sum())
    predicted = np.array([log_odds[tokens].sum() > 0 for tokens in x_val])
    assert (predicted == y_val).mean() > 0.75


def test_reviews_are_counted_and_cut_by_review_not_by_token() -> None:
    # Reviews are ragged token lists: a count or a cut must apply to the reviews, never to one review's tokens.
    full = DataRequest("synthetic")
    (x_train, _), (x_val, _) = loaders.imdb(full, FileLocations(Path("/nonexistent"), None, True), 20000)
    info = loaders.info_for(full, "imdb", x_train, x_val)
    assert (info.train_samples, info.val_samples) == (25000, 25000)
    assert len({len(t) for t in x_train[:50]}) > 1  # ragged, as Keras's IMDB
    assert head(x_train, 7).shape == (7,) and list(head(x_train, 7)[0]) == list(x_train[0])
    assert sample_count(list(x_train[:9])) == 9


def test_multi_input_is_counted_and_cut_per_input() -> None:
    pair = [np.zeros((30, 4)), np.ones((30, 4))]
    assert sample_count(pair) == 30
    assert [a.shape for a in head(pair, 5)] == [(5, 4), (5, 4)]
