"""The epoch clock: a Keras callback that reads the time after device synchronization."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import keras

from benchmarks.logs import EpochRecord


class EpochProbe(Protocol):
    """Reads instantaneous counters (energy, CPU time, GC) at an epoch's ends, after device synchronization."""

    def epoch_begin(self, epoch: int) -> None: ...

    def epoch_end(self, epoch: int) -> None: ...


class EpochTimer(keras.callbacks.Callback):
    """Times each epoch from begin to end (validation included, as in the published logs).

    The device is synchronized before the clock starts and before it stops, so queued asynchronous work is
    counted in the epoch that queued it. The first epoch of a fit is marked as the compiling one.
    """

    def __init__(
        self,
        sync: Callable[[], None],
        on_record: Callable[[EpochRecord], None],
        train_samples: int,
        loss_key: str,
        accuracy_key: str | None,
        probe: EpochProbe | None = None,
    ) -> None:
        super().__init__()
        self._sync = sync
        self._on_record = on_record
        self._train_samples = train_samples
        self._loss_key = loss_key
        self._accuracy_key = accuracy_key
        self._probe = probe
        self._fit_start = 0.0
        self._epoch_start = 0.0
        self._first_epoch: int | None = None
        self.hook_seconds = 0.0  # time spent in this callback's own work (device waits excluded): its overhead

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._fit_start = time.perf_counter()
        self._first_epoch = None

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._sync()
        if self._probe is not None:  # read before the clock starts, so its cost stays outside the epoch
            probe_started = time.perf_counter()
            self._probe.epoch_begin(epoch)
            self.hook_seconds += time.perf_counter() - probe_started
        self._epoch_start = time.perf_counter()
        if self._first_epoch is None:
            self._first_epoch = epoch
        self.hook_seconds += time.perf_counter() - self._epoch_start

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._sync()
        stopped = time.perf_counter()
        elapsed = stopped - self._epoch_start
        if self._probe is not None:
            self._probe.epoch_end(epoch)
        logs = logs or {}
        acc = self._accuracy_key
        self._on_record(
            EpochRecord(
                epoch=epoch,
                elapsed=elapsed,
                loss=_number(logs.get(self._loss_key)),
                acc=_number(logs.get(acc)) if acc else None,
                val_loss=_number(logs.get("val_" + self._loss_key)),
                val_acc=_number(logs.get("val_" + acc)) if acc else None,
                samples_per_sec=self._train_samples / elapsed if elapsed > 0 else None,
                compiled=epoch == self._first_epoch,
                train_samples=self._train_samples,
                started_at=self._epoch_start - self._fit_start,
            )
        )
        self.hook_seconds += time.perf_counter() - stopped


def _number(value: Any) -> float | None:
    return None if value is None else float(value)
