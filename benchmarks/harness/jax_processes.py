"""Keras on JAX across the processes of a data-parallel job (`benchmarks.harness.processes`: torchrun-style
variables or Slurm's): one model trained on every process's devices, as one SPMD program.

- Every process joins JAX's distributed runtime (`jax.distributed.initialize`) at the rank-0 process's address and
  port (MASTER_ADDR, MASTER_PORT) before JAX starts its devices; on a GPU node each process takes the GPU of its
  local rank. Cross-process collectives then run over NCCL between GPUs, over gloo between CPU processes (set here:
  `jax_cpu_collectives_implementation`).
- `jax.devices()` then lists the devices of the whole job, and `keras.distribution.DataParallel` over all of them
  replicates the weights and shards every global batch over the devices, with `auto_shard_dataset=False`: each
  process feeds only its own share of each batch (`process_shares`), and `fit` assembles the global batch from the
  processes' shares (`jax.make_array_from_process_local_data`).
- The shares come in the order a one-process `fit` takes the batches: arrays reshuffled at each epoch's start by
  the same NumPy draw Keras's array adapter makes (`np.random.permutation`, seeded alike in every process), each
  process taking its contiguous rows of every global batch; a workload that batches its own data (a PyDataset)
  gives each process its rows of each of its batches. So the job trains the one-process steps of the same global
  batch, and the losses Keras reports are the job's.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from benchmarks.data.types import Data
from benchmarks.harness.processes import Place, node_name

CPU_COLLECTIVES = "jax_cpu_collectives_implementation"  # gloo, the pinned JAX's default, set all the same
NODE_NAME_BYTES = 255  # a host name's longest (RFC 1035), the width each process's name is gathered at


@functools.cache
def join(place: Place) -> None:
    """Join the job's JAX runtime, once per process and before any JAX computation (its devices are fixed then)."""
    import jax

    jax.config.update(CPU_COLLECTIVES, "gloo")
    jax.distributed.initialize(
        coordinator_address=f"{place.master_addr}:{place.master_port}",
        num_processes=place.world,
        process_id=place.rank,
        local_device_ids=[place.local_rank],  # on GPUs: one per process; CPU processes ignore it
    )


def collectives(device_type: str) -> str:
    """What carries the job's cross-process collectives."""
    if device_type == "gpu":
        return "nccl"
    import jax

    return str(getattr(jax.config, CPU_COLLECTIVES))


def _gathered(values: np.ndarray) -> np.ndarray:
    """`values` of every process, stacked in rank order (a collective: every process calls it)."""
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(values))


def job_nodes() -> list[str]:
    """Each process's node, in rank order (a collective)."""
    encoded = node_name().encode()[:NODE_NAME_BYTES]
    padded = np.zeros(NODE_NAME_BYTES, dtype=np.uint8)
    padded[: len(encoded)] = np.frombuffer(encoded, dtype=np.uint8)
    return [bytes(row).rstrip(b"\0").decode() for row in _gathered(padded)]


def gather_times(times: list[float]) -> list[list[float]]:
    """Every process's epoch times, in rank order (a collective; every process trained the same epochs)."""
    return [[round(float(t), 4) for t in row] for row in _gathered(np.asarray(times, dtype=np.float64))]


def process_shares(data: Data, batch_size: int, place: Place) -> tuple[Any, Any, bool]:
    """This process's share of the training and validation batches, as PyDatasets for `fit` (validation None where
    the data has none), and whether `fit` should shuffle the training batches' order (a workload's own PyDataset,
    as in a one-process run; every process draws the same order from its alike-seeded generator)."""
    if data.y_train is None:  # a PyDataset that batches itself
        train, shuffle = _dataset_shares_class()(data.x_train, place), True
    else:
        train, shuffle = _array_shares_class()(data.x_train, data.y_train, batch_size, place, True), False
    if not data.has_validation:
        return train, None, shuffle
    if data.y_val is None:
        return train, _dataset_shares_class()(data.x_val, place), shuffle
    return train, _array_shares_class()(data.x_val, data.y_val, batch_size, place, False), shuffle


def _rows(size: int, place: Place) -> slice:
    share = size // place.world
    return slice(place.rank * share, (place.rank + 1) * share)


@functools.cache
def _array_shares_class() -> type:
    """Made on first use: keras is imported once KERAS_BACKEND is set."""
    import keras

    class ArrayShares(keras.utils.PyDataset):
        """This process's rows of every global batch of arrays, in a one-process `fit`'s order."""

        def __init__(self, x: Any, y: Any, batch_size: int, place: Place, shuffle: bool) -> None:
            super().__init__()
            self.x, self.y, self.batch_size, self.place, self.shuffle = x, y, batch_size, place, shuffle
            self.count = len(keras.tree.flatten(x)[0])
            self.order: np.ndarray | None = None

        def __len__(self) -> int:
            return -(-self.count // self.batch_size)

        def on_epoch_begin(self) -> None:
            if self.shuffle:  # Keras's array adapter draws this permutation as each epoch starts
                self.order = np.random.permutation(self.count)

        def __getitem__(self, index: int) -> tuple[Any, Any]:
            start, stop = index * self.batch_size, min((index + 1) * self.batch_size, self.count)
            batch = self.order[start:stop] if self.order is not None else np.arange(start, stop)
            rows = batch[_rows(len(batch), self.place)]
            share: tuple[Any, Any] = keras.tree.map_structure(lambda a: a[rows], (self.x, self.y))
            return share

    return ArrayShares


@functools.cache
def _dataset_shares_class() -> type:
    import keras

    class DatasetShares(keras.utils.PyDataset):
        """This process's rows of each batch of a PyDataset that batches itself."""

        def __init__(self, inner: keras.utils.PyDataset, place: Place) -> None:
            super().__init__()
            self.inner, self.place = inner, place

        def __len__(self) -> int:
            return len(self.inner)

        def __getitem__(self, index: int) -> Any:
            batch = self.inner[index]
            rows = _rows(len(keras.tree.flatten(batch)[0]), self.place)
            return keras.tree.map_structure(lambda a: a[rows], batch)

        def on_epoch_begin(self) -> None:
            self.inner.on_epoch_begin()

        def on_epoch_end(self) -> None:
            self.inner.on_epoch_end()

    return DatasetShares
