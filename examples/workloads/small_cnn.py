"""A small image classifier of one's own: four convolutions and a dense head on 32x32 colour images, 10 classes.

    python -m benchmarks check-workload --workload-file examples/workloads/small_cnn.py
    python -m benchmarks run --workload-file examples/workloads/small_cnn.py --backend jax --suite quick \
        --allow-synthetic

Its real data is `small_cnn.npz` (arrays x_train [N, 32, 32, 3] float32 in [0, 1], y_train [N] int, x_val, y_val)
in the folder given by --data-dir; without it the runs train on labelled synthetic data of the shapes SPEC.shapes
declares (--allow-synthetic), which time the same as real data of those shapes.
"""

from typing import Any

import keras
import numpy as np
from keras import layers

from benchmarks.data.files import DatasetUnavailable, FileLocations
from benchmarks.data.types import REAL, Data, DataInfo, DataRequest, head
from benchmarks.workloads import Cut, Shapes, WorkloadSpec

SPEC = WorkloadSpec(
    name="small_cnn",
    epochs=10,
    batch_size=128,
    datasets=("small_cnn_npz",),
    hyperparameters={"optimizer": "Adam", "learning_rate": 0.001, "filters": [32, 64, 128, 128]},
    quick=Cut(epochs=3, train_limit=512, val_limit=256),
    short=Cut(epochs=5, train_limit=25_600, val_limit=2_560),
    shapes=Shapes(inputs=(32, 32, 3), classes=10, train_samples=50_000, val_samples=10_000),
    reference="examples/workloads/small_cnn.py",
)


def load_data(request: DataRequest, where: FileLocations) -> Data:
    path = where.data_dir / "small_cnn.npz" if where.data_dir else None
    if path is None or not path.is_file():
        raise DatasetUnavailable(f"small_cnn.npz is not in --data-dir ({where.data_dir or 'none given'})")
    arrays = np.load(path)
    x_train, y_train = head(arrays["x_train"], request.train_limit), head(arrays["y_train"], request.train_limit)
    x_val, y_val = head(arrays["x_val"], request.val_limit), head(arrays["y_val"], request.val_limit)
    info = DataInfo(request.dataset, REAL, len(x_train), len(x_val), files=[{"name": path.name}])
    return Data(x_train, y_train, x_val, y_val, info)


def build_model(data: Data) -> keras.Model:
    inputs = keras.Input(shape=(32, 32, 3))
    x = inputs
    for filters, pool in ((32, True), (64, True), (128, True), (128, False)):  # 32 -> 16 -> 8 -> 4 pixels
        x = layers.Conv2D(filters, 3, padding="same", activation="relu")(x)
        x = layers.BatchNormalization()(x)
        if pool:
            x = layers.MaxPooling2D()(x)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dense(128, activation="relu")(x)
    outputs = layers.Dense(10, activation="softmax")(x)
    return keras.Model(inputs, outputs, name="small_cnn")


def compile_args() -> dict[str, Any]:
    return {
        "loss": "sparse_categorical_crossentropy",
        "optimizer": keras.optimizers.Adam(learning_rate=0.001),
        "metrics": ["accuracy"],
    }
