"""Character-level text generator with an auxiliary head (minimaxir's `text_generator_keras.py`, 2017).

The published script declared a second hidden layer (Dense 256) that it never connected to an output; this
version follows the intended main head, Dense 512 -> BN -> ReLU -> Dense 256 -> BN -> ReLU -> softmax, with a
300-dimensional character embedding. Its CSV `loss` column is the main head's loss, as in the published logs.
"""

from typing import Any

import keras
import numpy as np
from keras import layers

from benchmarks.data import loaders
from benchmarks.data.files import FileLocations
from benchmarks.data.types import Data, DataRequest
from benchmarks.workloads import Cut, WorkloadSpec

MAXLEN = 40
STEP = 3

SPEC = WorkloadSpec(
    name="text_generator_keras",
    epochs=10,
    batch_size=128,
    datasets=("nietzsche",),
    hyperparameters={
        "optimizer": "Adam",
        "learning_rate": 0.001,
        "decay": 1e-4,
        "embedding_dims": 300,
        "units": 128,
        "loss_weights": {"main_out": 1.0, "aux_out": 0.2},
    },
    quick=Cut(epochs=3, train_limit=12000, val_limit=None),
    short=Cut(epochs=5, train_limit=50_000, val_limit=None),
    validates=False,
    loss_key="main_out_loss",
    accuracy_key=None,
    reference="minimaxir/keras-cntk-benchmark test_files/text_generator_keras.py",
)


def load_data(request: DataRequest, where: FileLocations) -> Data:
    text = loaders.nietzsche(request, where, request.train_limit)
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    codes = np.array([index[c] for c in text], dtype=np.int32)
    starts = np.arange(0, len(text) - MAXLEN, STEP)
    x = codes[starts[:, None] + np.arange(MAXLEN)]
    y = keras.utils.to_categorical(codes[starts + MAXLEN], len(chars))
    info = loaders.info_for(request, "nietzsche", x, None)
    return Data(x, {"main_out": y, "aux_out": y}, None, None, info, extras={"chars": chars})


def _dense_bn_relu(units: int) -> list[keras.Layer]:
    return [layers.Dense(units, use_bias=False), layers.BatchNormalization(), layers.Activation("relu")]


def build_model(data: Data) -> keras.Model:
    chars = len(data.extras["chars"])
    inputs = keras.Input(shape=(MAXLEN,), dtype="int32")
    rnn = layers.LSTM(128)(layers.Embedding(chars, 300)(inputs))
    aux = layers.Activation("softmax", name="aux_out")(layers.Dense(chars)(rnn))
    hidden = rnn
    for layer in _dense_bn_relu(512) + _dense_bn_relu(256):
        hidden = layer(hidden)
    main = layers.Activation("softmax", name="main_out")(layers.Dense(chars)(hidden))
    return keras.Model(inputs, {"main_out": main, "aux_out": aux})


def compile_args() -> dict[str, Any]:
    # Keras 2's `decay` argument is lr / (1 + decay * iterations): InverseTimeDecay with decay_steps=1.
    schedule = keras.optimizers.schedules.InverseTimeDecay(0.001, decay_steps=1, decay_rate=1e-4)
    return {
        "loss": {"main_out": "categorical_crossentropy", "aux_out": "categorical_crossentropy"},
        "loss_weights": {"main_out": 1.0, "aux_out": 0.2},
        "optimizer": keras.optimizers.Adam(learning_rate=schedule),
    }
