"""What the runner trains, a compiled Keras model or a native workload's trainer, as the runner sees it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def _one_process(times: list[float]) -> list[list[float]] | None:
    return None


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class Trainee:
    jit_compile: bool | str
    dtype_policy: str
    lstm_kernel: str | None
    parameters: int
    sync: Callable[[], None]
    train: Callable[[int, list[Any]], None]  # epochs, callbacks (the epoch timer first)
    after_training: Callable[[], dict[str, Any] | None]
    # every process's epoch times, gathered on rank 0 (None: one process); collective, so every rank calls it
    gather: Callable[[list[float]], list[list[float]] | None] = _one_process
    close: Callable[[], None] = _nothing
    cudnn_benchmark: bool | None = None  # PyTorch's cuDNN autotuning, where the trainer set it
    # a job of several processes: its processes, nodes (and each process's) and what carries its collectives
    job: dict[str, Any] | None = None
