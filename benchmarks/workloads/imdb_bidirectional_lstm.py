"""Bidirectional LSTM on IMDB sentiment (Keras example `imdb_bidirectional_lstm.py`)."""

from typing import Any

import keras
import numpy as np
from keras import layers

from benchmarks.data import loaders
from benchmarks.data.files import FileLocations
from benchmarks.data.types import Data, DataRequest
from benchmarks.workloads import Cut, WorkloadSpec

MAX_FEATURES = 20000
MAXLEN = 100

SPEC = WorkloadSpec(
    name="imdb_bidirectional_lstm",
    epochs=4,
    batch_size=32,
    datasets=("imdb",),
    hyperparameters={
        "optimizer": "Adam",
        "learning_rate": 0.001,
        "max_features": MAX_FEATURES,
        "maxlen": MAXLEN,
        "embedding_dims": 128,
        "lstm_units": 64,
    },
    quick=Cut(epochs=3, train_limit=1000, val_limit=500),
    short=Cut(epochs=5, train_limit=5_000, val_limit=5_000),
    reference="keras/examples/imdb_bidirectional_lstm.py (Keras 2.0)",
)


def load_data(request: DataRequest, where: FileLocations) -> Data:
    (x_train, y_train), (x_val, y_val) = loaders.imdb(request, where, MAX_FEATURES)
    pad = keras.utils.pad_sequences
    return Data(
        pad(x_train, maxlen=MAXLEN),
        np.asarray(y_train, "float32"),
        pad(x_val, maxlen=MAXLEN),
        np.asarray(y_val, "float32"),
        loaders.info_for(request, "imdb", x_train, x_val),
    )


def build_model(data: Data) -> keras.Model:
    return keras.Sequential(
        [
            keras.Input(shape=(MAXLEN,), dtype="int32"),
            layers.Embedding(MAX_FEATURES, 128),
            layers.Bidirectional(layers.LSTM(64)),
            layers.Dropout(0.5),
            layers.Dense(1, activation="sigmoid"),
        ]
    )


def compile_args() -> dict[str, Any]:
    return {"loss": "binary_crossentropy", "optimizer": keras.optimizers.Adam(), "metrics": ["accuracy"]}
