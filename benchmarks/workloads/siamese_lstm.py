"""Siamese LSTM deciding whether two utterances have the same speaker (home-server study, January 2018).

"Building and benchmarking my own Deep-Learning server" trained it with Keras on TensorFlow: 1000 VoxCeleb
speakers, "Train on 300000 samples, validate on 120000 samples", 20 epochs, on a GTX 1070 Ti and a p2.xlarge.
The post gives neither the code nor the layer sizes, so this version is our reading of it: one LSTM(128) encoder
shared by both utterances, the absolute difference of the two encodings, Dense(1, sigmoid), binary crossentropy,
Adam, and Keras's default batch size of 32 (the post names none). The features are described in
`benchmarks.data.voxceleb`.
"""

from typing import Any

import keras
from keras import layers

from benchmarks.data import voxceleb
from benchmarks.data.files import FileLocations
from benchmarks.data.types import Data, DataRequest
from benchmarks.workloads import Cut, WorkloadSpec

SPEC = WorkloadSpec(
    name="siamese_lstm",
    epochs=20,
    batch_size=32,
    datasets=(voxceleb.DATASET,),
    hyperparameters={
        "optimizer": "Adam",
        "learning_rate": 0.001,
        "lstm_units": 128,
        "merge": "absolute difference",
        "train_pairs": voxceleb.TRAIN_PAIRS,
        "val_pairs": voxceleb.VAL_PAIRS,
        "val_speaker_fraction": voxceleb.VAL_SPEAKER_FRACTION,
    },
    quick=Cut(epochs=3, train_limit=1024, val_limit=512),
    short=Cut(epochs=5, train_limit=10_000, val_limit=4_000),
    # 300,000 pairs for 20 epochs is 190k steps: the bounded suite keeps the epochs and draws a tenth of the pairs.
    bounded=Cut(epochs=20, train_limit=30_000, val_limit=12_000),
    reference="'Building and benchmarking my own Deep-Learning server' (blog post, 2018-01-21); no code published",
    notes=(
        "The published losses are not cross-entropies: epoch 1's val_loss 0.1836 at val_acc 0.7135 is below the "
        "0.199 (ln 2 for each of the 28.65% misclassified pairs) that any cross-entropy costs; they fit mean "
        "squared error or a contrastive loss. Compare times and accuracies with the published log, not losses."
    ),
)


def load_data(request: DataRequest, where: FileLocations) -> Data:
    return voxceleb.load(request, where, request.batch_size or SPEC.batch_size)


def build_model(data: Data) -> keras.Model:
    shape = data.extras["utterance_shape"]
    first, second = keras.Input(shape=shape, name="utterance_a"), keras.Input(shape=shape, name="utterance_b")
    # One layer object called twice: the two branches share its weights, and it is a top-level layer of the model.
    encoder = layers.LSTM(128, name="encoder")
    distance = keras.ops.abs(layers.subtract([encoder(first), encoder(second)]))
    same = layers.Dense(1, activation="sigmoid", name="same_speaker")(distance)
    return keras.Model([first, second], same)


def compile_args() -> dict[str, Any]:
    return {"loss": "binary_crossentropy", "optimizer": keras.optimizers.Adam(), "metrics": ["accuracy"]}
