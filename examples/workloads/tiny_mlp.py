"""A small classifier of 32 float features into 4 classes: a workload of one's own, as a file.

    python -m benchmarks check-workload --workload-file examples/workloads/tiny_mlp.py
    python -m benchmarks run --workload-file examples/workloads/tiny_mlp.py --backend jax --suite quick

Its real data is `tiny_mlp.npz` (arrays x_train, y_train, x_val, y_val) in the folder given by --data-dir; without
it (or with --dataset synthetic) the runs train on labelled synthetic data of the shapes SPEC.shapes declares.
"""

from typing import Any

import keras
import numpy as np
from keras import layers

from benchmarks.data.files import DatasetUnavailable, FileLocations
from benchmarks.data.types import REAL, Data, DataInfo, DataRequest, head
from benchmarks.workloads import Cut, Shapes, WorkloadSpec

SPEC = WorkloadSpec(
    name="tiny_mlp",
    epochs=10,
    batch_size=64,
    datasets=("tiny_mlp_npz",),
    hyperparameters={"optimizer": "Adam", "learning_rate": 0.001, "hidden_units": 64},
    quick=Cut(epochs=3, train_limit=2048, val_limit=512),
    short=Cut(epochs=5, train_limit=None, val_limit=None),
    shapes=Shapes(inputs=(32,), classes=4, train_samples=8192, val_samples=1024),
    reference="examples/workloads/tiny_mlp.py",
)


def load_data(request: DataRequest, where: FileLocations) -> Data:
    path = where.data_dir / "tiny_mlp.npz" if where.data_dir else None
    if path is None or not path.is_file():
        raise DatasetUnavailable(f"tiny_mlp.npz is not in --data-dir ({where.data_dir or 'none given'})")
    arrays = np.load(path)
    x_train, y_train = head(arrays["x_train"], request.train_limit), head(arrays["y_train"], request.train_limit)
    x_val, y_val = head(arrays["x_val"], request.val_limit), head(arrays["y_val"], request.val_limit)
    info = DataInfo(request.dataset, REAL, len(x_train), len(x_val), files=[{"name": path.name}])
    return Data(x_train, y_train, x_val, y_val, info)


def build_model(data: Data) -> keras.Model:
    return keras.Sequential(
        [
            keras.Input(shape=(32,)),
            layers.Dense(64, activation="relu"),
            layers.Dense(64, activation="relu"),
            layers.Dense(4, activation="softmax"),
        ]
    )


def compile_args() -> dict[str, Any]:
    return {
        "loss": "sparse_categorical_crossentropy",
        "optimizer": keras.optimizers.Adam(learning_rate=0.001),
        "metrics": ["accuracy"],
    }
