"""Bidirectional LSTM on tweet sentiment (RaRe Technologies' GPU-provider benchmark, February 2018).

RaRe-Technologies/benchmark_GPU_platforms `benchmark.py` (Keras 2.1.3, TensorFlow): Embedding(len(vocabulary), 128)
-> Bidirectional(CuDNNLSTM(64)) -> Dropout(0.5) -> Dense(1, sigmoid), `compile('adam', 'binary_crossentropy')`,
batch size 32, validated on the held-out 10%; its README runs `--epochs 4 --data_ratio 1.0`. The vocabulary is
every token of the corpus (274,562 in the study) and the sequence length the longest cleaned tweet; the corpus
and its preprocessing are described in `benchmarks.data.tweets`. Keras 3 runs the LSTM on cuDNN where it can,
as CuDNNLSTM did. Seeds: the split uses the study's 123; weights use the run's seed.
"""

from typing import Any

import keras
from keras import layers

from benchmarks.data import tweets
from benchmarks.data.files import FileLocations
from benchmarks.data.types import Data, DataRequest
from benchmarks.workloads import Cut, WorkloadSpec

SPEC = WorkloadSpec(
    name="twitter_sentiment_bilstm",
    epochs=4,
    batch_size=32,
    datasets=(tweets.DATASET,),
    hyperparameters={
        "optimizer": "Adam",
        "learning_rate": 0.001,
        "embedding_dims": 128,
        "lstm_units": 64,
        "dropout": 0.5,
        "validation_fraction": tweets.VAL_FRACTION,
        "split_seed": tweets.SPLIT_SEED,
    },
    # Every step updates the whole 274,562 x 128 embedding (Adam's dense update), so the cut is small.
    quick=Cut(epochs=3, train_limit=256, val_limit=128),
    short=Cut(epochs=5, train_limit=10_000, val_limit=2_000),
    # The full corpus is 1.42M training tweets (44k steps an epoch): the bounded suite trains on 160,000 of them
    # and validates on 16,000, keeping the published epochs and hyperparameters.
    bounded=Cut(epochs=4, train_limit=160_000, val_limit=16_000),
    reference="RaRe-Technologies/benchmark_GPU_platforms benchmark.py + data_helpers.py (2018-02)",
)


def load_data(request: DataRequest, where: FileLocations) -> Data:
    return tweets.load(request, where)


def build_model(data: Data) -> keras.Model:
    return keras.Sequential(
        [
            keras.Input(shape=(data.extras["maxlen"],), dtype="int32"),
            layers.Embedding(data.extras["vocabulary_size"], 128),
            layers.Bidirectional(layers.LSTM(64)),
            layers.Dropout(0.5),
            layers.Dense(1, activation="sigmoid"),
        ]
    )


def compile_args() -> dict[str, Any]:
    return {"loss": "binary_crossentropy", "optimizer": keras.optimizers.Adam(), "metrics": ["accuracy"]}
