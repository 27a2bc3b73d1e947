"""GPU utilisation sampled through NVML while training runs, as the 2018 provider study reported it."""

from __future__ import annotations

import threading
from typing import Any


class GPUMonitor:
    """Samples every visible GPU's utilisation in a background thread; a no-op where NVML is unavailable."""

    def __init__(self, interval_s: float = 0.5) -> None:
        self.interval_s = interval_s
        self._samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handles: list[Any] = []

    def __enter__(self) -> GPUMonitor:
        try:
            import pynvml

            pynvml.nvmlInit()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception:  # no driver, no GPU, or no NVML library: nothing to sample
            self._handles = []
        if self._handles:
            self._thread = threading.Thread(target=self._run, name="gpu-monitor", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        import pynvml

        while not self._stop.wait(self.interval_s):
            # The busiest GPU stands for the run: the workloads train on one device.
            busiest = max(pynvml.nvmlDeviceGetUtilizationRates(h).gpu for h in self._handles)
            self._samples.append(float(busiest))

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            import pynvml

            pynvml.nvmlShutdown()

    def summary(self) -> dict[str, Any] | None:
        if not self._samples:
            return None
        return {
            "mean_pct": sum(self._samples) / len(self._samples),
            "max_pct": max(self._samples),
            "samples": len(self._samples),
            "interval_s": self.interval_s,
        }
