"""CIFAR-10 convnet with real-time augmentation (Keras example `cifar10_cnn.py`, as benchmarked in 2017).

The original augmented in its data pipeline with `ImageDataGenerator` (shifts of up to 0.1, nearest pixel and
nearest fill, horizontal flips) and trained with `fit_generator`; the same augmentation runs here in a
`PyDataset` on the CPU, identical on every backend (benchmarks/data/augment.py).
"""

from typing import Any

import keras
import numpy as np
from keras import layers

from benchmarks.data import loaders
from benchmarks.data.augment import ShiftFlipBatches
from benchmarks.data.files import FileLocations
from benchmarks.data.types import Data, DataRequest
from benchmarks.workloads import Cut, WorkloadSpec

SPEC = WorkloadSpec(
    name="cifar10_cnn",
    epochs=20,
    batch_size=32,
    datasets=("cifar10",),
    hyperparameters={
        "optimizer": "RMSprop",
        "learning_rate": 1e-4,
        "decay": 1e-6,
        "augmentation": "CPU pipeline: shift 0.1 (nearest) + horizontal flip, as Keras 2.0 ImageDataGenerator",
    },
    quick=Cut(epochs=3, train_limit=500, val_limit=250),
    short=Cut(epochs=5, train_limit=20_000, val_limit=5_000),
    reference="keras/examples/cifar10_cnn.py (Keras 2.0, data_augmentation=True)",
)


def load_data(request: DataRequest, where: FileLocations) -> Data:
    (x_train, y_train), (x_val, y_val) = loaders.cifar10(request, where)
    batches = ShiftFlipBatches(
        _images(x_train),
        keras.utils.to_categorical(y_train, 10),
        request.batch_size or SPEC.batch_size,
        0.1,
        request.seed,
    )
    return Data(
        batches,
        None,
        _images(x_val),
        keras.utils.to_categorical(y_val, 10),
        loaders.info_for(request, "cifar10", x_train, x_val),
    )


def _images(images: np.ndarray) -> np.ndarray:
    return images.astype("float32") / 255


def _block(filters: int) -> list[layers.Layer]:
    return [
        layers.Conv2D(filters, (3, 3), padding="same", activation="relu"),
        layers.Conv2D(filters, (3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Dropout(0.25),
    ]


def build_model(data: Data) -> keras.Model:
    return keras.Sequential(
        [
            keras.Input(shape=(32, 32, 3)),
            *_block(32),
            *_block(64),
            layers.Flatten(),
            layers.Dense(512, activation="relu"),
            layers.Dropout(0.5),
            layers.Dense(10, activation="softmax"),
        ]
    )


def compile_args() -> dict[str, Any]:
    return {
        "loss": "categorical_crossentropy",
        # Keras 2's `decay=1e-6`: lr / (1 + decay * iterations).
        "optimizer": keras.optimizers.RMSprop(
            learning_rate=keras.optimizers.schedules.InverseTimeDecay(1e-4, decay_steps=1, decay_rate=1e-6)
        ),
        "metrics": ["accuracy"],
    }
