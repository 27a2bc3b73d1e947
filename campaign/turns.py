"""Taking turns on one device: the children of a staged parent (campaign.preload --staged) train their first
epochs side by side, then their steady epochs one at a time.

A child says it is ready by writing one byte to its `ready` pipe once its first epoch is recorded, then waits for
one byte on its `go` pipe; its parent sends it only after every child is ready or gone, and the previous child has
ended. The wait falls between the timer's end of the first epoch and its start of the second, so no timed epoch
holds it, and it is recorded next to the times (metadata timing.turn_wait_s).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import keras


@dataclass
class Turn:
    """A child's ends of its two pipes, from the parent that forked it."""

    ready_fd: int
    go_fd: int
    waited_s: float | None = None  # from ready to go; None until it has waited

    def wait(self) -> None:
        started = time.perf_counter()
        os.write(self.ready_fd, b"r")
        os.close(self.ready_fd)
        os.read(self.go_fd, 1)  # b"" where the parent has gone: the parent-death signal ends this child anyway
        os.close(self.go_fd)
        self.waited_s = round(time.perf_counter() - started, 3)

    def callbacks(self, quiet: Callable[[], AbstractContextManager[None]]) -> list[keras.callbacks.Callback]:
        """The runner's extra callbacks for this child (benchmarks.harness.runner.CallbackFactory)."""
        return [WaitForTurn(self, quiet)]


class WaitForTurn(keras.callbacks.Callback):
    """After the first epoch's end is recorded (list it after the epoch timer), wait for this child's turn, inside
    `quiet` (the run's telemetry paused: a waiting child polling the driver would slow the sibling being timed)."""

    def __init__(self, turn: Turn, quiet: Callable[[], AbstractContextManager[None]]) -> None:
        super().__init__()
        self.turn = turn
        self.quiet = quiet

    @property
    def waited_s(self) -> float | None:
        """What the runner records as the run's wait between timed epochs (timing.turn_wait_s)."""
        return self.turn.waited_s

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if self.turn.waited_s is None:
            with self.quiet():
                self.turn.wait()
