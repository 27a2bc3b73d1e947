"""Real-time image augmentation on the CPU, batch by batch, as Keras 2.0's `ImageDataGenerator` did it.

The 2017 `cifar10_cnn` example augmented in its data pipeline, one worker, with random shifts of up to 10% of
the height and width and random horizontal flips. Keras 2.0 applied shifts with `scipy.ndimage.affine_transform`,
order 0 (nearest pixel) and `fill_mode="nearest"` (edge pixels repeated): for a pure translation that is a gather
of rounded, clamped rows and columns, done here for a whole batch at once. Doing the augmentation in the data
pipeline keeps the work identical on every backend; Keras 3's in-model RandomTranslation is far slower on JAX.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np


class ShiftFlipBatches(keras.utils.PyDataset):
    """Shuffled batches of randomly shifted and flipped images, reshuffled every epoch."""

    def __init__(
        self, x: np.ndarray, y: np.ndarray, batch_size: int, shift: float = 0.1, seed: int = 0, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.x, self.y, self.batch_size, self.shift = x, y, batch_size, shift
        self._rng = np.random.default_rng(seed)
        self._order = self._rng.permutation(len(x))

    def __len__(self) -> int:
        # As the example's `steps_per_epoch = len(x_train) // batch_size`: the remainder is dropped.
        return max(1, len(self.x) // self.batch_size)

    def on_epoch_end(self) -> None:
        self._order = self._rng.permutation(len(self.x))

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        rows = self._order[index * self.batch_size : (index + 1) * self.batch_size]
        return shift_and_flip(self.x[rows], self.shift, self._rng), self.y[rows]


def shift_and_flip(images: np.ndarray, shift: float, rng: np.random.Generator) -> np.ndarray:
    """Each image shifted by up to `shift` of its size (nearest pixel, edges repeated), half of them mirrored."""
    n, height, width = images.shape[:3]
    offsets = rng.uniform(-shift, shift, size=(n, 2)) * (height, width)
    rows = np.clip(np.rint(np.arange(height)[None, :] + offsets[:, :1]), 0, height - 1).astype(np.intp)
    cols = np.clip(np.rint(np.arange(width)[None, :] + offsets[:, 1:]), 0, width - 1).astype(np.intp)
    flip = rng.random(n) < 0.5
    cols[flip] = cols[flip, ::-1]
    return images[np.arange(n)[:, None, None], rows[:, :, None], cols[:, None, :]]
