"""The system description recorded beside every result (in the spirit of MLPerf's system description)."""

from __future__ import annotations

import hashlib
import os
import platform
import socket
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from benchmarks.harness.telemetry import visible_gpu_indices
from benchmarks.metadata import Container, RunSpecRecord


@cache
def cpu() -> dict[str, Any]:
    """py-cpuinfo's description of the CPU. It asks a subprocess (1.1 s), so a preloaded parent asks once for all
    its children."""
    import cpuinfo

    return dict(cpuinfo.get_cpu_info())


@cache
def hardware() -> dict[str, Any]:
    cpu_info = cpu()
    return {
        "cpu_model": cpu_info.get("brand_raw") or platform.processor() or None,
        "cpu_flags": sorted(cpu_info.get("flags", [])),
        "cpu_cores_logical": psutil.cpu_count(logical=True),
        "cpu_cores_physical": psutil.cpu_count(logical=False),
        # Cores this process may use (a container's or taskset's limit), which is what the frameworks use.
        "cpu_cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_bytes": psutil.virtual_memory().total,
        "machine": platform.machine(),
        "os": platform.platform(),
        "host_id": host_id(),
        "gpus": gpus(),
    }


def host_id() -> str:
    """A short, stable id of the machine: the repeats of two machines are told apart by it. The GPUs' UUIDs name
    the physical machine even from inside a container; without GPUs, the machine id or else the hostname does.
    Hashed, so that none of these is published in a log."""
    identity = ",".join(gpu["uuid"] for gpu in gpus(visible_only=False))
    for path in (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id")):
        if not identity and path.is_file():
            identity = path.read_text().strip()
    return hashlib.sha256((identity or socket.gethostname()).encode()).hexdigest()[:12]


def gpus(*, visible_only: bool = True) -> list[dict[str, Any]]:
    """The GPUs this process may use (CUDA_VISIBLE_DEVICES), or with `visible_only=False` every GPU of the machine:
    a run pinned to one GPU of a several-GPU host records the one it trained on."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no NVIDIA driver here
        return []
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        found = []
        count = pynvml.nvmlDeviceGetCount()
        for i in visible_gpu_indices(count) if visible_only else range(count):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            found.append(
                {
                    "name": _text(pynvml.nvmlDeviceGetName(handle)),
                    "driver": driver,
                    "memory_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(handle).total),
                    "uuid": _text(pynvml.nvmlDeviceGetUUID(handle)),
                }
            )
        return found
    finally:
        pynvml.nvmlShutdown()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def software(framework: dict[str, Any]) -> dict[str, Any]:
    import keras

    return {
        "python": platform.python_version(),
        "keras": keras.__version__,
        "numpy": np.__version__,
        **framework,
    }


def run_spec() -> RunSpecRecord | None:
    """What the orchestrator's run spec carried, from BENCH_RUN_SPEC: `<spec sha256>[ <payload sha256> <files>
    <bytes>]`; None when the variable is unset or not of that form."""
    words = os.environ.get("BENCH_RUN_SPEC", "").split()
    if len(words) == 1:
        return RunSpecRecord(words[0])
    if len(words) == 4 and words[2].isdigit() and words[3].isdigit():
        return RunSpecRecord(words[0], words[1], int(words[2]), int(words[3]))
    return None


def container() -> Container | None:
    image = os.environ.get("BENCH_IMAGE")
    if not image and not Path("/.dockerenv").exists():
        return None
    return Container(image, os.environ.get("BENCH_IMAGE_DIGEST"))


@cache
def git_commit() -> str | None:
    """The commit the code came from: baked into images at build time, else read from the checkout."""
    if commit := os.environ.get("BENCH_GIT_COMMIT"):
        return commit
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{commit}-dirty" if dirty else commit
