"""ImageNet-shaped images for the image-classification workloads, batch by batch: a labelled synthetic pool, or a
folder of real image files.

Synthetic (the default, as TensorFlow's tf_cnn_benchmarks measured): a pool of at most `POOL_IMAGES` distinct
uint8 images, drawn once, served in order and reused cyclically, so an epoch can be as long as ImageNet's without
its 190 GB in memory. A batch within the pool is a view, not a copy: the host does almost no work per step.

Real: a folder of class subfolders of image files, the layout ImageNet's ILSVRC2012 training set is distributed in
(and its validation set once sorted into class folders):

    DATA_DIR/imagenet/train/<class>/*.JPEG
    DATA_DIR/imagenet/val/<class>/*.JPEG       optional: without it the run validates on nothing

Class names are the subfolder names, sorted; a label is its class's position. Files with the extensions in
`EXTENSIONS` count; others are ignored. Each image is decoded with Pillow, converted to RGB and resized to the
model's input (bilinear, aspect ratio not kept: no crop), in the PyDataset's worker threads (Pillow decodes
without holding the GIL). On a fast GPU the decoding can bound the epoch: the run's telemetry shows it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import keras
import numpy as np

from benchmarks.data.files import DatasetUnavailable, FileLocations

EXTENSIONS = frozenset({".jpg", ".jpeg", ".png"})
POOL_IMAGES = 8192  # distinct synthetic images at most: 1.2 GB at 224 x 224 x 3


class CyclicBatches(keras.utils.PyDataset):
    """`samples` samples a batch at a time, taken in order from a pool of images, cycling through it."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, samples: int, batch_size: int) -> None:
        super().__init__()
        self.images, self.labels, self.samples, self.batch_size = images, labels, samples, batch_size

    def __len__(self) -> int:
        return math.ceil(self.samples / self.batch_size)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        size = min(self.batch_size, self.samples - index * self.batch_size)
        start = index * self.batch_size % len(self.images)
        if start + size <= len(self.images):  # a view of the pool
            return self.images[start : start + size], self.labels[start : start + size]
        rows = (start + np.arange(size)) % len(self.images)
        return self.images[rows], self.labels[rows]


@dataclass(frozen=True)
class ImageFolder:
    """One split of an image folder: its files, in a seeded shuffled order, and their labels."""

    root: Path
    classes: tuple[str, ...]
    files: tuple[Path, ...]
    labels: np.ndarray

    def head(self, limit: int | None) -> ImageFolder:
        if limit is None:
            return self
        return ImageFolder(self.root, self.classes, self.files[:limit], self.labels[:limit])

    def record(self) -> dict[str, str]:
        """What the run's metadata records about it (the files themselves are the user's)."""
        return {"name": str(self.root), "images": str(len(self.files)), "classes": str(len(self.classes))}


def find_folder(where: FileLocations, dataset: str, split: str) -> Path | None:
    """DATA_DIR/<dataset>/<split>, if the user gave a data directory that has it."""
    if where.data_dir is None:
        return None
    folder = where.data_dir / dataset / split
    return folder if folder.is_dir() else None


def scan(root: Path, seed: int, classes: tuple[str, ...] | None = None) -> ImageFolder:
    """The images under `root`'s class subfolders, shuffled with `seed`. `classes`: the training split's class
    list, which a validation split must use (a class it lacks is fine; one the training split lacks is not)."""
    found = tuple(sorted(p.name for p in root.iterdir() if p.is_dir()))
    if classes is None:
        classes = found
    unknown = sorted(set(found) - set(classes))
    if unknown:
        raise DatasetUnavailable(f"{root}: class folders {', '.join(unknown[:5])} are not in the training split")
    index = {name: i for i, name in enumerate(classes)}
    pairs = [
        (path, index[name])
        for name in found
        for path in sorted((root / name).iterdir())
        if path.is_file() and path.suffix.lower() in EXTENSIONS
    ]
    if not pairs:
        raise DatasetUnavailable(
            f"{root}: no images (expected class subfolders of {', '.join(sorted(EXTENSIONS))} files)"
        )
    order = np.random.default_rng(seed).permutation(len(pairs))
    return ImageFolder(
        root,
        classes,
        tuple(pairs[i][0] for i in order),
        np.array([pairs[i][1] for i in order], dtype=np.int32),
    )


class FileBatches(keras.utils.PyDataset):
    """A folder's images, decoded and resized batch by batch in worker threads."""

    def __init__(self, folder: ImageFolder, batch_size: int, size: int, **kwargs: Any) -> None:
        kwargs.setdefault("workers", min(16, os.cpu_count() or 1))
        super().__init__(**kwargs)
        self.folder, self.batch_size, self.size = folder, batch_size, size

    def __len__(self) -> int:
        return math.ceil(len(self.folder.files) / self.batch_size)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        rows = slice(index * self.batch_size, (index + 1) * self.batch_size)
        images = np.stack([decode(path, self.size) for path in self.folder.files[rows]])
        return images, self.folder.labels[rows]


def decode(path: Path, size: int) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as image:
        return np.asarray(image.convert("RGB").resize((size, size), Image.Resampling.BILINEAR), dtype=np.uint8)
