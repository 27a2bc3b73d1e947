"""A machine fingerprint: a calibration of seconds at the start of each process, recorded beside every result, so
that two "identical" machines that give different times can be told apart by what they measure.

- a float32 GEMM in TFLOP/s on the run's device, with the run's matmul precision (TF32 or full float32);
- the device memory bandwidth (read + write of a large array, GB/s);
- the host-to-device bandwidth on accelerators (GB/s);
- a single-thread host score: a fixed pure-Python loop, in millions of iterations per second (Keras's training
  loop is Python on one host thread, so this is what bounds host-bound workloads).

Each figure is the best of a few timed repetitions after a warm-up, as is usual for throughput probes: the best is
the machine's capability, the spread belongs to the run's stability figures.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from benchmarks.harness.backends import framework

REPEATS = 3
HOST_LOOP = 300_000
# Sizes keep the whole calibration to about a second on a GPU and on a 2-core CPU alike.
GEMM_N = {"gpu": 8192, "cpu": 512}
BANDWIDTH_BYTES = {"gpu": 1 << 30, "cpu": 64 << 20}
H2D_BYTES = 256 << 20


def _best_seconds(action: Callable[[], Any], repeats: int = REPEATS) -> float:
    action()  # warm-up: compilation, allocation, clocks ramping up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def host_single_thread_score() -> float:
    """Millions of iterations per second of a fixed integer loop."""

    def loop() -> int:
        total = 0
        for i in range(HOST_LOOP):
            total += i * i % 7
        return total

    return HOST_LOOP / _best_seconds(loop) / 1e6


class _Probe(ABC):
    """The three device measurements, in one backend's terms: each returns an action that finishes its work
    (device synchronized) before it returns."""

    def __init__(self, device: str) -> None:
        self.device = device

    @abstractmethod
    def gemm(self, n: int) -> Callable[[], Any]: ...

    @abstractmethod
    def scale(self, elements: int) -> Callable[[], Any]: ...

    @abstractmethod
    def to_device(self, host: np.ndarray) -> Callable[[], Any]: ...


class _JaxProbe(_Probe):
    def gemm(self, n: int) -> Callable[[], Any]:
        import jax
        import jax.numpy as jnp

        a = jnp.ones((n, n), jnp.float32)
        matmul = jax.jit(jnp.matmul)
        return lambda: matmul(a, a).block_until_ready()

    def scale(self, elements: int) -> Callable[[], Any]:
        import jax
        import jax.numpy as jnp

        x = jnp.ones((elements,), jnp.float32)
        double = jax.jit(lambda v: v * 2.0)
        return lambda: double(x).block_until_ready()

    def to_device(self, host: np.ndarray) -> Callable[[], Any]:
        import jax

        return lambda: jax.device_put(host).block_until_ready()


class _TorchProbe(_Probe):
    def _sync(self) -> None:
        import torch

        if self.device == "gpu":
            torch.cuda.synchronize()

    def _synced(self, action: Callable[[], object]) -> Callable[[], None]:
        def run() -> None:
            action()
            self._sync()

        return run

    def _where(self) -> str:
        return "cuda" if self.device == "gpu" else "cpu"

    def gemm(self, n: int) -> Callable[[], Any]:
        import torch

        a = torch.ones((n, n), dtype=torch.float32, device=self._where())
        return self._synced(lambda: torch.matmul(a, a))

    def scale(self, elements: int) -> Callable[[], Any]:
        import torch

        x = torch.ones((elements,), dtype=torch.float32, device=self._where())
        return self._synced(lambda: x * 2.0)

    def to_device(self, host: np.ndarray) -> Callable[[], Any]:
        import torch

        source = torch.from_numpy(host)
        return self._synced(lambda: source.to("cuda"))


class _TensorFlowProbe(_Probe):
    def _synced(self, action: Callable[[], Any]) -> Callable[[], Any]:
        import tensorflow as tf

        return lambda: (action(), tf.test.experimental.sync_devices())

    def gemm(self, n: int) -> Callable[[], Any]:
        import tensorflow as tf

        a = tf.ones((n, n), tf.float32)
        return self._synced(lambda: tf.matmul(a, a))

    def scale(self, elements: int) -> Callable[[], Any]:
        import tensorflow as tf

        x = tf.ones((elements,), tf.float32)
        return self._synced(lambda: x * 2.0)

    def to_device(self, host: np.ndarray) -> Callable[[], Any]:
        import tensorflow as tf

        def copy() -> Any:
            with tf.device("/GPU:0"):
                return tf.identity(host)

        return self._synced(copy)


PROBES: dict[str, type[_Probe]] = {"jax": _JaxProbe, "torch": _TorchProbe, "tensorflow": _TensorFlowProbe}


@cache
def fingerprint(backend: str, gpu: bool) -> dict[str, Any]:
    """The `fingerprint` block of the run metadata (computed once per process)."""
    started = time.perf_counter()
    device = "gpu" if gpu else "cpu"
    probe = PROBES[framework(backend)](device)
    result: dict[str, Any] = {
        "device": device,
        "backend": backend,
        "host_single_thread_score": host_single_thread_score(),
        "host_single_thread_unit": "million loop iterations/s",
        "gemm_tflops": None,
        "device_memory_gbps": None,
        "host_to_device_gbps": None,
        "error": None,
    }
    try:
        n = GEMM_N[device]
        result["gemm_tflops"] = 2 * n**3 / _best_seconds(probe.gemm(n)) / 1e12
        elements = BANDWIDTH_BYTES[device] // 4
        result["device_memory_gbps"] = 2 * elements * 4 / _best_seconds(probe.scale(elements)) / 1e9
        if gpu:
            host = np.ones(H2D_BYTES // 4, np.float32)
            result["host_to_device_gbps"] = H2D_BYTES / _best_seconds(probe.to_device(host)) / 1e9
    except Exception as exc:  # a calibration that cannot run must not stop the benchmark; it says why
        result["error"] = f"{type(exc).__name__}: {exc}"[:200]
    result["seconds"] = time.perf_counter() - started
    return result
