"""Real-time image augmentation on the CPU, batch by batch, as Keras 2's `ImageDataGenerator` did it.

The 2017 `cifar10_cnn` example augmented in its data pipeline (random shifts of up to 10% with bilinear
interpolation and nearest fill, random horizontal flips), not in the model. Doing the same here keeps the work
identical on every backend; Keras 3's in-model RandomTranslation is an order of magnitude slower on JAX.
"""

from __future__ import annotations

import keras
import numpy as np
from scipy import ndimage


class ShiftFlipBatches(keras.utils.PyDataset):
    """Shuffled batches of randomly shifted and flipped images, reshuffled every epoch."""

    def __init__(
        self, x: np.ndarray, y: np.ndarray, batch_size: int, shift: float = 0.1, seed: int = 0, **kwargs
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
        return np.stack([self._augment(image) for image in self.x[rows]]), self.y[rows]

    def _augment(self, image: np.ndarray) -> np.ndarray:
        height, width = image.shape[:2]
        dy, dx = self._rng.uniform(-self.shift, self.shift, size=2) * (height, width)
        shifted = ndimage.shift(image, (dy, dx, 0), order=1, mode="nearest")
        return shifted[:, ::-1] if self._rng.random() < 0.5 else shifted
