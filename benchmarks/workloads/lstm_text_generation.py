"""Character-level LSTM on Nietzsche (Keras example `lstm_text_generation.py`).

As in the original, the model is compiled without metrics and fit without validation; text is generated after
training, outside the timed epochs.
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
    name="lstm_text_generation",
    epochs=10,
    batch_size=128,
    datasets=("nietzsche",),
    hyperparameters={"optimizer": "RMSprop", "learning_rate": 0.01, "maxlen": MAXLEN, "step": STEP, "units": 128},
    # train_limit counts characters of the corpus for this workload.
    quick=Cut(epochs=3, train_limit=20000, val_limit=None),
    short=Cut(epochs=5, train_limit=50_000, val_limit=None),
    validates=False,
    accuracy_key=None,
    reference="keras/examples/lstm_text_generation.py (Keras 2.0)",
)


def windows(text: str, chars: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """One-hot 40-character windows every 3 characters, and the one-hot next character."""
    index = {c: i for i, c in enumerate(chars)}
    codes = np.array([index[c] for c in text], dtype=np.int32)
    starts = np.arange(0, len(text) - MAXLEN, STEP)
    x = np.zeros((len(starts), MAXLEN, len(chars)), dtype="float32")
    rows = np.repeat(np.arange(len(starts)), MAXLEN)
    steps = np.tile(np.arange(MAXLEN), len(starts))
    x[rows, steps, codes[starts[:, None] + np.arange(MAXLEN)].ravel()] = 1
    y = np.zeros((len(starts), len(chars)), dtype="float32")
    y[np.arange(len(starts)), codes[starts + MAXLEN]] = 1
    return x, y


def load_data(request: DataRequest, where: FileLocations) -> Data:
    text = loaders.nietzsche(request, where, request.train_limit)
    chars = sorted(set(text))
    x, y = windows(text, chars)
    info = loaders.info_for(request, "nietzsche", x, None)
    return Data(x, y, None, None, info, extras={"text": text, "chars": chars})


def build_model(data: Data) -> keras.Model:
    chars = len(data.extras["chars"])
    return keras.Sequential(
        [keras.Input(shape=(MAXLEN, chars)), layers.LSTM(128), layers.Dense(chars, activation="softmax")]
    )


def compile_args() -> dict[str, Any]:
    return {"loss": "categorical_crossentropy", "optimizer": keras.optimizers.RMSprop(learning_rate=0.01)}


def after_training(model: keras.Model, data: Data, length: int = 200, temperature: float = 0.5) -> dict[str, Any]:
    """Generate text from a seed of the corpus, as the example does after each iteration."""
    text, chars = data.extras["text"], data.extras["chars"]
    rng = np.random.default_rng(0)
    start = int(rng.integers(0, len(text) - MAXLEN))
    sentence = text[start : start + MAXLEN]
    generated = []
    for _ in range(length):
        x, _ = windows(sentence + " ", chars)
        probs = np.asarray(model.predict_on_batch(x[:1])[0], "float64")
        logits = np.log(np.maximum(probs, 1e-12)) / temperature
        probs = np.exp(logits - logits.max())
        next_char = chars[int(rng.choice(len(chars), p=probs / probs.sum()))]
        generated.append(next_char)
        sentence = sentence[1:] + next_char
    return {"seed": text[start : start + MAXLEN], "generated": "".join(generated), "temperature": temperature}
