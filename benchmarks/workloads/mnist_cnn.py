"""MNIST convnet (Keras example `mnist_cnn.py`, as benchmarked in 2017)."""

from typing import Any

import keras
import numpy as np
from keras import layers

from benchmarks.data import loaders
from benchmarks.data.files import FileLocations
from benchmarks.data.types import Data, DataRequest
from benchmarks.workloads import Cut, WorkloadSpec

SPEC = WorkloadSpec(
    name="mnist_cnn",
    epochs=12,
    batch_size=128,
    datasets=("mnist", "fashion_mnist"),
    hyperparameters={"optimizer": "Adadelta", "learning_rate": 1.0},
    quick=Cut(epochs=3, train_limit=1000, val_limit=500),
    short=Cut(epochs=5, train_limit=None, val_limit=None),
    reference="keras/examples/mnist_cnn.py (Keras 2.0; Adadelta's Keras 2 default learning rate 1.0)",
)


def load_data(request: DataRequest, where: FileLocations) -> Data:
    (x_train, y_train), (x_val, y_val) = loaders.digits_like(request, where)
    return Data(
        _images(x_train),
        keras.utils.to_categorical(y_train, 10),
        _images(x_val),
        keras.utils.to_categorical(y_val, 10),
        loaders.info_for(request, "mnist", x_train, x_val),
    )


def _images(images: np.ndarray) -> np.ndarray:
    return images.reshape(len(images), 28, 28, 1).astype("float32") / 255


def build_model(data: Data) -> keras.Model:
    return keras.Sequential(
        [
            keras.Input(shape=(28, 28, 1)),
            layers.Conv2D(32, (3, 3), activation="relu"),
            layers.Conv2D(64, (3, 3), activation="relu"),
            layers.MaxPooling2D(pool_size=(2, 2)),
            layers.Dropout(0.25),
            layers.Flatten(),
            layers.Dense(128, activation="relu"),
            layers.Dropout(0.5),
            layers.Dense(10, activation="softmax"),
        ]
    )


def compile_args() -> dict[str, Any]:
    return {
        "loss": "categorical_crossentropy",
        "optimizer": keras.optimizers.Adadelta(learning_rate=1.0),
        "metrics": ["accuracy"],
    }
