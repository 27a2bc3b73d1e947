"""fastText-style IMDB sentiment with bigram features (Keras example `imdb_fasttext.py`, ngram_range=2)."""

from collections.abc import Sequence
from typing import Any

import keras
import numpy as np
from keras import layers

from benchmarks.data import loaders
from benchmarks.data.files import FileLocations
from benchmarks.data.types import Data, DataRequest
from benchmarks.workloads import Cut, WorkloadSpec

MAX_FEATURES = 20000
MAXLEN = 400
NGRAM_RANGE = 2  # bigrams only, as the published run; add_bigrams relies on it

SPEC = WorkloadSpec(
    name="imdb_fasttext",
    epochs=5,
    batch_size=32,
    datasets=("imdb",),
    hyperparameters={
        "optimizer": "Adam",
        "learning_rate": 0.001,
        "max_features": MAX_FEATURES,
        "maxlen": MAXLEN,
        "ngram_range": NGRAM_RANGE,
        "embedding_dims": 50,
    },
    quick=Cut(epochs=3, train_limit=1000, val_limit=500),
    short=Cut(epochs=5, train_limit=None, val_limit=None),
    reference="keras/examples/imdb_fasttext.py (Keras 2.0, ngram_range=2)",
)


def bigram_index(texts: Sequence[Sequence[int]]) -> np.ndarray:
    """Every distinct bigram of the training texts as one int64 key each, sorted: the example sorts its n-gram set
    and numbers it from MAX_FEATURES + 1, and a key's order is the tuple's order. Vectorised: the example's Python
    loops took 11-20 s of every process on 25,000 reviews, outside the timed epochs but inside the machine's hour."""
    keys = np.sort(_all_keys([np.asarray(t, np.int64) for t in texts])[0])
    return keys[np.concatenate([[True], keys[1:] != keys[:-1]])] if len(keys) else keys


def add_bigrams(texts: Sequence[Sequence[int]], index: np.ndarray) -> list[np.ndarray]:
    """Each text with the id of every known bigram appended, in the order they occur, as the example's
    `add_ngram` does."""
    tokens = [np.asarray(t, np.int64) for t in texts]
    keys, bounds = _all_keys(tokens)
    where = np.searchsorted(index, keys)
    known = where < len(index)
    known[known] = index[where[known]] == keys[known]
    ids = np.split(MAX_FEATURES + 1 + where, bounds)
    return [np.concatenate([t, i[k]]) for t, i, k in zip(tokens, ids, np.split(known, bounds), strict=True)]


def _all_keys(tokens: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The bigram keys of all texts end to end, and where each text's keys end (for np.split)."""
    keys = [_bigram_keys(t) for t in tokens]
    return np.concatenate(keys or [_NO_KEYS]), np.cumsum([len(k) for k in keys])[:-1]


_NO_KEYS = np.empty(0, np.int64)


def _bigram_keys(tokens: np.ndarray) -> np.ndarray:
    # Token ids are below MAX_FEATURES (the loader's num_words), so (a, b) -> a * 2**32 + b keeps the tuple order.
    keys: np.ndarray = (tokens[:-1] << 32) + tokens[1:]
    return keys


def load_data(request: DataRequest, where: FileLocations) -> Data:
    (x_train, y_train), (x_val, y_val) = loaders.imdb(request, where, MAX_FEATURES)
    index = bigram_index(x_train)
    vocabulary = MAX_FEATURES + 1 + len(index)
    pad = keras.utils.pad_sequences
    return Data(
        pad(add_bigrams(x_train, index), maxlen=MAXLEN),
        np.asarray(y_train, "float32"),
        pad(add_bigrams(x_val, index), maxlen=MAXLEN),
        np.asarray(y_val, "float32"),
        loaders.info_for(request, "imdb", x_train, x_val),
        extras={"vocabulary": vocabulary},
    )


def build_model(data: Data) -> keras.Model:
    return keras.Sequential(
        [
            keras.Input(shape=(MAXLEN,), dtype="int32"),
            layers.Embedding(data.extras["vocabulary"], 50),
            layers.GlobalAveragePooling1D(),
            layers.Dense(1, activation="sigmoid"),
        ]
    )


def compile_args() -> dict[str, Any]:
    return {"loss": "binary_crossentropy", "optimizer": keras.optimizers.Adam(), "metrics": ["accuracy"]}
