"""fastText-style IMDB sentiment with bigram features (Keras example `imdb_fasttext.py`, ngram_range=2)."""

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
NGRAM_RANGE = 2

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


def _ngrams(tokens: list[int], n: int) -> set[tuple[int, ...]]:
    return set(zip(*[tokens[i:] for i in range(n)], strict=False))


def _add_ngrams(texts: list[list[int]], index: dict[tuple[int, ...], int]) -> list[list[int]]:
    """Append the id of every known n-gram to each text, as the example's `add_ngram` does."""
    out = []
    for tokens in texts:
        extended = list(tokens)
        for n in range(2, NGRAM_RANGE + 1):
            for i in range(len(tokens) - n + 1):
                gram = tuple(tokens[i : i + n])
                if gram in index:
                    extended.append(index[gram])
        out.append(extended)
    return out


def load_data(request: DataRequest, where: FileLocations) -> Data:
    (x_train, y_train), (x_val, y_val) = loaders.imdb(request, where, MAX_FEATURES)
    grams: set[tuple[int, ...]] = set()
    for tokens in x_train:
        for n in range(2, NGRAM_RANGE + 1):
            grams |= _ngrams(list(tokens), n)
    # Sorted so the n-gram ids do not depend on set iteration order.
    index = {gram: MAX_FEATURES + 1 + i for i, gram in enumerate(sorted(grams))}
    vocabulary = MAX_FEATURES + 1 + len(index)
    pad = keras.utils.pad_sequences
    return Data(
        pad(_add_ngrams([list(t) for t in x_train], index), maxlen=MAXLEN),
        np.asarray(y_train, "float32"),
        pad(_add_ngrams([list(t) for t in x_val], index), maxlen=MAXLEN),
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
