"""MNIST multilayer perceptron (Keras example `mnist_mlp.py`, as benchmarked in 2017)."""

from typing import Any

import keras
import numpy as np
from keras import layers

from benchmarks.data import loaders
from benchmarks.data.files import FileLocations
from benchmarks.data.types import Data, DataRequest
from benchmarks.workloads import Cut, WorkloadSpec

SPEC = WorkloadSpec(
    name="mnist_mlp",
    epochs=20,
    batch_size=128,
    datasets=("mnist", "fashion_mnist"),
    hyperparameters={"optimizer": "RMSprop", "learning_rate": 0.001, "dropout": 0.2, "hidden_units": 512},
    quick=Cut(epochs=3, train_limit=6000, val_limit=1000),
    short=Cut(epochs=5, train_limit=None, val_limit=None),
    reference="keras/examples/mnist_mlp.py (Keras 2.0)",
)


def load_data(request: DataRequest, where: FileLocations) -> Data:
    (x_train, y_train), (x_val, y_val) = loaders.digits_like(request, where)
    return Data(
        _flatten(x_train),
        keras.utils.to_categorical(y_train, 10),
        _flatten(x_val),
        keras.utils.to_categorical(y_val, 10),
        loaders.info_for(request, "mnist", x_train, x_val),
    )


def _flatten(images: np.ndarray) -> np.ndarray:
    return images.reshape(len(images), 784).astype("float32") / 255


def build_model(data: Data) -> keras.Model:
    return keras.Sequential(
        [
            keras.Input(shape=(784,)),
            layers.Dense(512, activation="relu"),
            layers.Dropout(0.2),
            layers.Dense(512, activation="relu"),
            layers.Dropout(0.2),
            layers.Dense(10, activation="softmax"),
        ]
    )


def compile_args() -> dict[str, Any]:
    return {
        "loss": "categorical_crossentropy",
        "optimizer": keras.optimizers.RMSprop(learning_rate=0.001),
        "metrics": ["accuracy"],
    }
