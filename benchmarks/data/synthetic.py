"""Synthetic stand-ins with the real data's shapes and a learnable signal.

Used only when the real files are unavailable (and the user allowed it) or asked for by name. Every run on
synthetic data says so in its file name, its metadata and the printed table.
"""

from __future__ import annotations

import bisect

import numpy as np


def images(n: int, shape: tuple[int, ...], classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """uint8 images: a per-class template plus noise, so a classifier can learn the classes.

    The templates depend on `seed` only: make the training and validation splits from one call.
    """
    rng = np.random.default_rng(seed)
    templates = rng.uniform(0, 255, size=(classes, *shape))
    labels = rng.integers(0, classes, size=n)
    noise = rng.normal(0, 60, size=(n, *shape))
    pixels = np.clip(0.5 * templates[labels] + 0.5 * rng.uniform(0, 255, size=(n, *shape)) + noise, 0, 255)
    return pixels.astype(np.uint8), labels.astype(np.uint8)


def token_sequences(
    n: int, vocab: int, min_len: int, max_len: int, seed: int, classes: int = 2
) -> tuple[np.ndarray, np.ndarray]:
    """Ragged token-id lists like Keras's IMDB (ids from 3 up, Zipf-like), with class-indicative words.

    The marker words depend on `seed` only: make the training and validation splits from one call.
    """
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, size=n)
    # Each class has its own few hundred marker words that appear more often in its texts.
    markers = rng.choice(np.arange(3, vocab), size=(classes, 200), replace=False)
    lengths = rng.integers(min_len, max_len + 1, size=n)
    texts = []
    for label, length in zip(labels, lengths, strict=True):
        words = np.minimum(rng.zipf(1.3, size=length) + 2, vocab - 1)
        marked = rng.random(length) < 0.15
        words[marked] = rng.choice(markers[label], size=int(marked.sum()))
        texts.append([1, *words.tolist()])  # 1 = start token, as Keras's IMDB
    return _object_array(texts), labels.astype(np.int32)


def _object_array(texts: list[list[int]]) -> np.ndarray:
    """A 1-D array of lists, the container Keras's IMDB loader returns (np.array would make it 2-D if equal)."""
    out = np.empty(len(texts), dtype=object)
    for i, tokens in enumerate(texts):
        out[i] = tokens
    return out


def text(n_chars: int, seed: int) -> str:
    """Text from a small order-2 character model, so next-character prediction has something to learn."""
    rng = np.random.default_rng(seed)
    alphabet = np.array(list("abcdefghijklmnopqrstuvwxyz .,;!?'\n"))
    transitions = rng.dirichlet(np.full(len(alphabet), 0.1), size=(len(alphabet), len(alphabet)))
    cumulative = transitions.cumsum(axis=-1).tolist()
    draws = rng.random(n_chars).tolist()
    out = [0, 1]
    for u in draws[2:]:
        row = cumulative[out[-2]][out[-1]]
        out.append(min(bisect.bisect_left(row, u), len(alphabet) - 1))
    return "".join(alphabet[out])


def imagenet_like(n: int, size: int, classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """uint8 images of `size` x `size` x 3 and int32 labels: a coarse per-class pattern (7 x 7 cells, ResNet's last
    feature-map grid at 224 px) plus uniform noise, so the classes can be learned. Cheap enough for thousands of
    ImageNet-sized images: no float intermediates the size of the batch.

    The patterns depend on `seed` only: make the training and validation splits from one call.
    """
    rng = np.random.default_rng(seed)
    patterns = rng.integers(0, 128, size=(classes, 7, 7, 3), dtype=np.uint8)
    labels = rng.integers(0, classes, size=n).astype(np.int32)
    cells = np.arange(size) * 7 // size  # the pattern cell of each pixel row (and column)
    images = np.empty((n, size, size, 3), dtype=np.uint8)
    for start in range(0, n, 256):  # in batches: the noise and the upsampled patterns stay small
        chunk = labels[start : start + 256]
        noise = rng.integers(0, 128, size=(len(chunk), size, size, 3), dtype=np.uint8)
        images[start : start + len(chunk)] = noise + patterns[chunk][:, cells][:, :, cells]
    return images, labels
