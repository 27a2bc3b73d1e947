"""A small transformer of one's own: a 4-block encoder over sequences of 128 tokens that classifies each sequence
into 2 classes (a sentiment model's shape), about 3.4 M parameters.

    python -m benchmarks check-workload --workload-file examples/workloads/small_transformer.py
    python -m benchmarks run --workload-file examples/workloads/small_transformer.py --backend jax \
        --suite quick --allow-synthetic

Its real data is `small_transformer.npz` (arrays x_train [N, 128] int token ids below 20,000, y_train [N] int,
x_val, y_val) in the folder given by --data-dir; without it the runs train on labelled synthetic data of the shapes
SPEC.shapes declares (--allow-synthetic).
"""

from typing import Any

import keras
import numpy as np
from keras import layers

from benchmarks.data.files import DatasetUnavailable, FileLocations
from benchmarks.data.types import REAL, Data, DataInfo, DataRequest, head
from benchmarks.workloads import Cut, Shapes, WorkloadSpec

VOCABULARY = 20_000
LENGTH = 128
WIDTH = 128
HEADS = 4
BLOCKS = 4

SPEC = WorkloadSpec(
    name="small_transformer",
    epochs=5,
    batch_size=64,
    datasets=("small_transformer_npz",),
    hyperparameters={"optimizer": "Adam", "learning_rate": 3e-4, "blocks": BLOCKS, "width": WIDTH, "heads": HEADS},
    quick=Cut(epochs=3, train_limit=256, val_limit=128),
    short=Cut(epochs=5, train_limit=12_800, val_limit=1_280),
    shapes=Shapes(inputs=(LENGTH,), classes=2, train_samples=25_000, val_samples=25_000, vocabulary=VOCABULARY),
    reference="examples/workloads/small_transformer.py",
)


def load_data(request: DataRequest, where: FileLocations) -> Data:
    path = where.data_dir / "small_transformer.npz" if where.data_dir else None
    if path is None or not path.is_file():
        raise DatasetUnavailable(f"small_transformer.npz is not in --data-dir ({where.data_dir or 'none given'})")
    arrays = np.load(path)
    x_train, y_train = head(arrays["x_train"], request.train_limit), head(arrays["y_train"], request.train_limit)
    x_val, y_val = head(arrays["x_val"], request.val_limit), head(arrays["y_val"], request.val_limit)
    info = DataInfo(request.dataset, REAL, len(x_train), len(x_val), files=[{"name": path.name}])
    return Data(x_train, y_train, x_val, y_val, info)


class AddPositions(layers.Layer):
    """A learned embedding of each position, added to the token embeddings."""

    def build(self, input_shape: tuple[int, ...]) -> None:
        self.positions = self.add_weight(shape=tuple(input_shape[-2:]), initializer="random_normal", name="positions")

    def call(self, x: Any) -> Any:
        return x + keras.ops.cast(self.positions, x.dtype)


def _block(x: Any) -> Any:
    h = layers.LayerNormalization()(x)
    h = layers.MultiHeadAttention(HEADS, WIDTH // HEADS)(h, h)
    x = layers.Add()([x, h])
    h = layers.LayerNormalization()(x)
    h = layers.Dense(WIDTH, activation=None)(layers.Dense(4 * WIDTH, activation="gelu")(h))
    return layers.Add()([x, h])


def build_model(data: Data) -> keras.Model:
    tokens = keras.Input(shape=(LENGTH,), dtype="int32")
    x = AddPositions()(layers.Embedding(VOCABULARY, WIDTH)(tokens))
    for _ in range(BLOCKS):
        x = _block(x)
    x = layers.GlobalAveragePooling1D()(layers.LayerNormalization()(x))
    outputs = layers.Dense(2, activation="softmax")(x)
    return keras.Model(tokens, outputs, name="small_transformer")


def compile_args() -> dict[str, Any]:
    return {
        "loss": "sparse_categorical_crossentropy",
        "optimizer": keras.optimizers.Adam(learning_rate=3e-4),
        "metrics": ["accuracy"],
    }
