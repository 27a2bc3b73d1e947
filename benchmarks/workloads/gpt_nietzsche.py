"""A GPT-style decoder-only character language model on the Nietzsche text, at nanoGPT's shakespeare-char scale.

A reference workload that loads a current GPU with today's kind of model: 6 transformer blocks (pre-norm causal
self-attention with 6 heads and a 4x GELU MLP), 384 wide, a context of 256 characters, dropout 0.2, no biases (as
nanoGPT's `config/train_shakespeare_char.py` with `train.py`'s defaults), about 10.8 M parameters, built from Keras
layers alone (keras.layers.MultiHeadAttention with use_causal_mask=True).

Data. The corpus of `lstm_text_generation` (benchmarks/data: nietzsche.txt, lowercased), its first 90 % for
training and the last 10 % for validation as nanoGPT splits its text. A sample is a window of 256 characters and
the same window shifted by one as its targets: training windows start every 64 characters (8,400 of them, each
character seen at 4 positions an epoch, where nanoGPT draws random offsets), validation windows every 256. The
harness counts samples, so tokens per second are its samples per second times 256 (`tokens_per_sample` in the
recorded hyperparameters). The vocabulary is the whole corpus's characters, whatever the slice, so every slice
trains the same model. `--dataset synthetic` trains on text of the same length from a character model.

Precision (`SPEC.mixed_precision`, applied by the harness's `build_model`). mixed_bfloat16 where the backend sees a
GPU, as nanoGPT autocasts (`--precision float16`: mixed_float16, for GPUs without bfloat16), float32 on CPUs;
`settings.dtype_policy` records which. The token embedding computes in float32 in either (the harness sets it, as
PyTorch's autocast leaves embeddings): in half precision its gradient is a scatter-add that made the step 5.6 times
slower on an H200 (docs/timing.md).

Hyperparameters. AdamW, learning rate 1e-3, betas (0.9, 0.99), weight decay 0.1 on the matrices and embeddings
(not the layer norms' scales), gradients clipped to a global norm of 1, batch 64, weights drawn from N(0, 0.02).
nanoGPT's 100-step warm-up and cosine decay to 1e-4 are left out (they change no step's time), as are its tied
input and output embeddings (65 characters: 25 k parameters) and its scaled initialisation of the projections.
`full` and `bounded`: 38 epochs of 132 steps, about nanoGPT's 5,000 iterations. `quick`: 8 windows, one step per
epoch, seconds on a CPU. `short`: 50 steps of 64 windows (3,200) and 5 of validation, about 1-3 s per epoch on
an H100.
"""

from typing import Any

import keras
import numpy as np
from keras import layers, ops

from benchmarks.data import loaders
from benchmarks.data.files import FileLocations
from benchmarks.data.types import Data, DataRequest
from benchmarks.workloads import Cut, WorkloadSpec

CONTEXT = 256
LAYERS = 6
HEADS = 6
WIDTH = 384
DROPOUT = 0.2
TRAIN_STRIDE = 64
TRAIN_SHARE = 0.9
INIT = 0.02

SPEC = WorkloadSpec(
    name="gpt_nietzsche",
    epochs=38,
    batch_size=64,
    datasets=("nietzsche",),
    hyperparameters={
        "layers": LAYERS,
        "heads": HEADS,
        "width": WIDTH,
        "context": CONTEXT,
        "tokens_per_sample": CONTEXT,
        "dropout": DROPOUT,
        "optimizer": "AdamW",
        "learning_rate": 1e-3,
        "betas": [0.9, 0.99],
        "weight_decay": 0.1,
        "global_clipnorm": 1.0,
        "train_stride": TRAIN_STRIDE,
        "precision": "mixed_bfloat16 on GPUs (mixed_float16 with --precision float16), float32 on CPUs",
    },
    # train_limit and val_limit count windows of 256 characters for this workload; literals, which dry runs read.
    quick=Cut(epochs=3, train_limit=8, val_limit=4),
    short=Cut(epochs=5, train_limit=3_200, val_limit=320),  # 50 and 5 steps of 64
    accuracy_key=None,
    mixed_precision=True,
    reference="karpathy/nanoGPT config/train_shakespeare_char.py (6 layers, 6 heads, 384 wide, context 256)",
)


def windows(codes: np.ndarray, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """Windows of CONTEXT codes every `stride` codes, and the same windows one code later (the targets)."""
    starts = np.arange(0, len(codes) - CONTEXT, stride)
    rows = starts[:, None] + np.arange(CONTEXT)
    return codes[rows], codes[rows + 1]


def load_data(request: DataRequest, where: FileLocations) -> Data:
    text = loaders.nietzsche(request, where, None)
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    codes = np.array([index[c] for c in text], dtype=np.int32)
    split = int(len(codes) * TRAIN_SHARE)
    x_train, y_train = (a[: request.train_limit] for a in windows(codes[:split], TRAIN_STRIDE))
    x_val, y_val = (a[: request.val_limit] for a in windows(codes[split:], CONTEXT))
    info = loaders.info_for(request, "nietzsche", x_train, x_val)
    return Data(x_train, y_train, x_val, y_val, info, extras={"chars": chars})


class AddPositions(layers.Layer):
    """A learned embedding of each position of the context, added to the token embeddings."""

    def build(self, input_shape: tuple[int, ...]) -> None:
        self.positions = self.add_weight(
            shape=tuple(input_shape[-2:]), initializer=keras.initializers.RandomNormal(stddev=INIT), name="positions"
        )

    def call(self, x: Any) -> Any:
        return x + ops.cast(self.positions, x.dtype)


def _dense(units: int, **kwargs: Any) -> layers.Dense:
    return layers.Dense(
        units, use_bias=False, kernel_initializer=keras.initializers.RandomNormal(stddev=INIT), **kwargs
    )


def _block(x: Any) -> Any:
    h = layers.LayerNormalization(epsilon=1e-5, center=False)(x)
    h = layers.MultiHeadAttention(
        HEADS,
        WIDTH // HEADS,
        dropout=DROPOUT,
        use_bias=False,
        kernel_initializer=keras.initializers.RandomNormal(stddev=INIT),
    )(h, h, use_causal_mask=True)
    x = layers.Add()([x, layers.Dropout(DROPOUT)(h)])
    h = layers.LayerNormalization(epsilon=1e-5, center=False)(x)
    h = _dense(WIDTH)(_dense(4 * WIDTH, activation="gelu")(h))
    return layers.Add()([x, layers.Dropout(DROPOUT)(h)])


def build_model(data: Data) -> keras.Model:
    vocab = len(data.extras["chars"])
    tokens = keras.Input(shape=(CONTEXT,), dtype="int32")
    x = layers.Embedding(vocab, WIDTH, embeddings_initializer=keras.initializers.RandomNormal(stddev=INIT))(tokens)
    x = layers.Dropout(DROPOUT)(AddPositions()(x))
    for _ in range(LAYERS):
        x = _block(x)
    x = layers.LayerNormalization(epsilon=1e-5, center=False)(x)
    logits = _dense(vocab)(x)  # the softmax is the loss's, in float32
    return keras.Model(tokens, logits, name="gpt")


def compile_args() -> dict[str, Any]:
    optimizer = keras.optimizers.AdamW(
        learning_rate=1e-3, beta_1=0.9, beta_2=0.99, weight_decay=0.1, global_clipnorm=1.0
    )
    optimizer.exclude_from_weight_decay(var_names=["gamma"])  # layer norms' scales, as nanoGPT's 1-D parameters
    return {"loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True), "optimizer": optimizer}
