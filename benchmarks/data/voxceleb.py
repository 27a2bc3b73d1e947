"""Same/different-speaker pairs of VoxCeleb utterances for the siamese LSTM (home-server study, January 2018).

VoxCeleb cannot be downloaded here, and the study published neither its features nor its code. The user supplies
features they computed from VoxCeleb1 as one file, `voxceleb_features.npz` (see docs/datasets.md), in the offline
data folder (`--data-dir` / `BENCH_DATA_DIR`) or Keras's cache folder (`$KERAS_HOME/datasets`):

- `features`: float32 (utterances, frames, n_features), e.g. log-mel energies, cropped or padded to fixed frames;
- `speakers`: integer (utterances,), the speaker of each utterance.

The speakers are split at random (seeded) into 80% for training and 20% for validation, so validation asks about
voices the model has never heard. From each side pairs are drawn (300,000 for training and 120,000 for validation,
as the study's "Train on 300000 samples, validate on 120000 samples"), half of them two different utterances of
one speaker (label 1), half utterances of two different speakers (label 0), speakers chosen uniformly.
Pairs are kept as utterance indices and gathered batch by batch (`PairBatches`): materialised they would be GBs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import keras
import numpy as np

from benchmarks.data.files import DatasetUnavailable, FileLocations, sha256_of
from benchmarks.data.loaders import SYNTHETIC_NAME, info_for
from benchmarks.data.types import REAL, Data, DataInfo, DataRequest

DATASET = "voxceleb"
FILE = "voxceleb_features.npz"
TRAIN_PAIRS = 300_000
VAL_PAIRS = 120_000
VAL_SPEAKER_FRACTION = 0.2
SPEAKERS = 1000  # the study's "1000 VoxCeleb speakers"
# The study did not say which features it used; the stand-in has 50 frames of 40 log-mel energies, small enough
# that its 420,000 pairs, held as float32 arrays the way Keras 2 printed "Train on 300000 samples", fit the
# home server's 16 GB (6.7 GB).
FRAMES = 50
N_FEATURES = 40
SYNTHETIC_UTTERANCES_PER_SPEAKER = 20


@dataclass(frozen=True)
class Utterances:
    features: np.ndarray  # float32 (utterances, frames, n_features)
    speakers: np.ndarray  # int (utterances,)


def read(path: Path) -> Utterances:
    """The user's feature file, checked against the documented layout."""
    with np.load(path, allow_pickle=False) as archive:
        missing = {"features", "speakers"} - set(archive.files)
        if missing:
            raise ValueError(f"{path}: missing array(s) {', '.join(sorted(missing))}; see docs/datasets.md")
        features, speakers = archive["features"], archive["speakers"]
    if features.ndim != 3 or features.dtype != np.float32:
        raise ValueError(
            f"{path}: 'features' must be float32 (utterances, frames, n_features), got "
            f"{features.dtype} {features.shape}"
        )
    if speakers.shape != features.shape[:1] or not np.issubdtype(speakers.dtype, np.integer):
        raise ValueError(
            f"{path}: 'speakers' must be integers, one per utterance ({len(features)}), got "
            f"{speakers.dtype} {speakers.shape}"
        )
    return Utterances(features, speakers)


def find(where: FileLocations) -> Path:
    folders = where.folders
    for folder in folders:
        if (folder / FILE).is_file():
            return folder / FILE
    raise DatasetUnavailable(
        f"{DATASET}: {FILE} (arrays 'features' float32 (utterances, frames, n_features) and 'speakers' int) "
        f"not found in {', '.join(map(str, folders))}; make it from VoxCeleb1 as docs/datasets.md shows and put "
        f"it into --data-dir (BENCH_DATA_DIR) or {where.cache_dir}"
    )


def split_speakers(speakers: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the training and the validation utterances, whose speakers do not overlap."""
    voices = rng.permutation(np.unique(speakers))
    held_out = max(2, round(len(voices) * VAL_SPEAKER_FRACTION))
    if len(voices) - held_out < 2:
        raise ValueError(f"{DATASET}: {len(voices)} speakers are too few; pairs need 2 per side")
    validation = np.isin(speakers, voices[:held_out])
    return np.flatnonzero(~validation), np.flatnonzero(validation)


def draw_pairs(
    utterances: np.ndarray, speakers: np.ndarray, n: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """`n` pairs of the given utterance indices: (n, 2) indices and float32 labels, 1 = same speaker.

    Half (rounded down) are same-speaker pairs of two different utterances; the rest pair two different speakers.
    """
    order = utterances[np.argsort(speakers[utterances], kind="stable")]
    _, starts, counts = np.unique(speakers[order], return_index=True, return_counts=True)
    repeated = np.flatnonzero(counts >= 2)
    if len(repeated) == 0:
        raise ValueError(f"{DATASET}: no speaker has two utterances, so no same-speaker pair exists")
    n_same = n // 2
    labels = np.zeros(n, dtype=np.float32)
    labels[:n_same] = 1

    voice = rng.choice(repeated, size=n_same)
    first = rng.integers(0, counts[voice])
    second = rng.integers(0, counts[voice] - 1)
    second += second >= first  # a different utterance of the same speaker
    same = np.stack([starts[voice] + first, starts[voice] + second], axis=1)

    voice_a = rng.integers(0, len(counts), size=n - n_same)
    voice_b = rng.integers(0, len(counts) - 1, size=n - n_same)
    voice_b += voice_b >= voice_a  # a different speaker
    different = np.stack(
        [starts[voice_a] + rng.integers(0, counts[voice_a]), starts[voice_b] + rng.integers(0, counts[voice_b])],
        axis=1,
    )
    mixed = rng.permutation(n)
    return order[np.concatenate([same, different])[mixed]], labels[mixed]


class PairBatches(keras.utils.PyDataset):
    """Batches of ((utterance A, utterance B), label) gathered from the feature table by pair index.

    Training batches are reshuffled after every epoch, as Keras 2's fit shuffled in-memory arrays.
    """

    def __init__(
        self,
        features: np.ndarray,
        pairs: np.ndarray,
        labels: np.ndarray,
        batch_size: int,
        shuffle: np.random.Generator | None = None,  # reshuffles the pairs after every epoch when given
    ) -> None:
        super().__init__()
        self.features, self.pairs, self.labels, self.batch_size = features, pairs, labels, batch_size
        self._rng = shuffle
        self._order = np.arange(len(pairs))

    def __len__(self) -> int:
        return math.ceil(len(self.pairs) / self.batch_size)

    def __getitem__(self, index: int) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
        rows = self._order[index * self.batch_size : (index + 1) * self.batch_size]
        first, second = self.pairs[rows].T
        return (self.features[first], self.features[second]), self.labels[rows]

    def on_epoch_end(self) -> None:
        if self._rng is not None:
            self._order = self._rng.permutation(len(self.pairs))


def synthetic_utterances(seed: int) -> Utterances:
    """1000 speakers, each a mean log-mel profile; each utterance adds a session offset and per-frame noise."""
    rng = np.random.default_rng(seed)
    speakers = np.repeat(np.arange(SPEAKERS), SYNTHETIC_UTTERANCES_PER_SPEAKER)
    profiles = rng.normal(0.0, 1.0, size=(SPEAKERS, 1, N_FEATURES))
    sessions = rng.normal(0.0, 0.5, size=(len(speakers), 1, N_FEATURES))
    # Per-frame noise of unit variance, drawn in float32 to halve the peak memory of its 160 MB.
    features = rng.standard_normal(size=(len(speakers), FRAMES, N_FEATURES), dtype=np.float32)
    features += (profiles[speakers] + sessions).astype(np.float32)
    return Utterances(features, speakers)


def load(request: DataRequest, where: FileLocations, batch_size: int) -> Data:
    """Training and validation PairBatches (x_train, x_val; y_* are None: the batches carry the labels)."""
    synthetic = request.dataset == SYNTHETIC_NAME
    path = None if synthetic else find(where)
    utterances = synthetic_utterances(request.seed) if path is None else read(path)
    split_rng, train_rng, val_rng, shuffle_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(request.seed).spawn(4)
    )
    train_utts, val_utts = split_speakers(utterances.speakers, split_rng)
    # Draw the full published sets and keep the first N, so a cut run trains on a prefix of the full one.
    train_pairs, train_labels = draw_pairs(train_utts, utterances.speakers, TRAIN_PAIRS, train_rng)
    val_pairs, val_labels = draw_pairs(val_utts, utterances.speakers, VAL_PAIRS, val_rng)
    train_pairs, train_labels = train_pairs[: request.train_limit], train_labels[: request.train_limit]
    val_pairs, val_labels = val_pairs[: request.val_limit], val_labels[: request.val_limit]
    train = PairBatches(utterances.features, train_pairs, train_labels, batch_size, shuffle=shuffle_rng)
    val = PairBatches(utterances.features, val_pairs, val_labels, batch_size)
    if path is None:
        info = info_for(request, DATASET, train_pairs, val_pairs)
    else:
        files = [{"name": path.name, "sha256": sha256_of(path)}]
        info = DataInfo(request.dataset, REAL, len(train_pairs), len(val_pairs), files=files)
    extras = {"utterance_shape": utterances.features.shape[1:], "speakers": len(np.unique(utterances.speakers))}
    return Data(train, None, val, None, info, extras=extras)
