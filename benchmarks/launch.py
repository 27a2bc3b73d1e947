"""`--gpus N` on the torch-native backend: this process starts the job's N processes on this host, one per
device, as torchrun would (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; benchmarks.harness.processes),
each running this command again, and waits for them. Rank 0 prints and writes the run's logs; if one process
fails, the others are stopped (they would wait for it in their next all-reduce) and the exit status is the
failure's. Ctrl-C or SIGTERM reaches every process, so each records what it finished.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from types import FrameType

from benchmarks.harness.processes import free_port, local_places

POLL_S = 0.2
STOP_GRACE_S = 10.0
FINISH_GRACE_S = 30.0


def device_count() -> int:
    """The GPUs this host offers PyTorch; CPU processes where it has none (each takes one share of the CPU)."""
    import torch

    return torch.cuda.device_count()


def launch_processes(argv: Sequence[str], gpus: int | str, run_id: str) -> int:
    from benchmarks.harness.distribution import ALL

    available = device_count()
    world = (available or 1) if gpus == ALL else int(gpus)
    if available and world > available:
        print(f"error: --gpus {gpus}: this machine has {available} GPU(s) for torch-native", file=sys.stderr)
        return 2
    command = [sys.executable, "-m", "benchmarks", *_with_run_id(argv, run_id)]
    port = free_port()
    children = [
        subprocess.Popen(command, env={**os.environ, **place.environment()}) for place in local_places(world, port)
    ]
    previous = {sig: signal.signal(sig, _forward(children)) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _wait(children)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _with_run_id(argv: Sequence[str], run_id: str) -> list[str]:
    """Every process writes into one run folder: the run id is fixed here when the user gave none."""
    if "--run-id" in argv or any(a.startswith("--run-id=") for a in argv):
        return list(argv)
    return [*argv, "--run-id", run_id]


def _forward(children: list[subprocess.Popen[bytes]]) -> Callable[[int, FrameType | None], None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    return handler


def _wait(children: list[subprocess.Popen[bytes]]) -> int:
    """Each child's exit; the first failure stops the rest. The job's status: 0, or the first failure's. Once rank 0
    has finished (its log complete), the others get FINISH_GRACE_S to end, and are then stopped."""
    finished_at: float | None = None
    while True:
        codes = [child.poll() for child in children]
        failed = [code for code in codes if code not in (None, 0)]
        if failed:
            _stop(children)
            return failed[0] or 1
        if all(code == 0 for code in codes):
            return 0
        if codes[0] == 0:
            finished_at = finished_at or time.monotonic()
            if time.monotonic() - finished_at > FINISH_GRACE_S:
                print("note: rank 0 finished; stopping the processes that did not end with it", file=sys.stderr)
                _stop(children)
                return 0
        time.sleep(POLL_S)


def _stop(children: list[subprocess.Popen[bytes]]) -> None:
    for child in children:
        if child.poll() is None:
            child.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for child in children:
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
