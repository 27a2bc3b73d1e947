"""The GPU image.

Always: its lock resolves with pip inside the base image (Python, glibc, wheel tags) to exactly the pinned
set, installing nothing. Opt-in (BENCH_TEST_GPU_IMAGE=1): the full build, many GB of CUDA wheels, then the
frameworks import (no GPU here: they fall back to the CPU).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from image_helpers import image_labels, lock_pins, make, run, session_image_tag

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_gpu_lock_resolves_in_the_base_image(docker_engine: str, build_logs: Path) -> None:
    tag = session_image_tag("gpu")
    make("image-gpu-resolve", f"IMAGE_GPU={tag}", log=build_logs / "image-gpu-resolve.log")
    report = json.loads(
        run(["docker", "run", "--rm", "--entrypoint", "cat", f"{tag}-resolve", "/build/resolution.json"]).stdout
    )
    chosen = {item["metadata"]["name"].lower(): item for item in report["install"]}
    assert len(chosen) == len(lock_pins("bench-gpu"))
    torch_wheel = chosen["torch"]["download_info"]["url"].rsplit("/", 1)[-1]
    assert torch_wheel.startswith("torch-2.13.0-cp311-cp311-manylinux") and torch_wheel.endswith("x86_64.whl")
    assert "nvidia-cudnn-cu12" in chosen and "nvidia-cudnn-cu13" in chosen


@pytest.mark.skipif(os.environ.get("BENCH_TEST_GPU_IMAGE") != "1", reason="opt-in: BENCH_TEST_GPU_IMAGE=1")
def test_gpu_image_full_build(docker_engine: str, build_logs: Path) -> None:
    tag = session_image_tag("gpu")
    make("image-gpu", f"IMAGE_GPU={tag}", "DATASETS=none", log=build_logs / "image-gpu.log")
    pins = lock_pins("bench-gpu")
    assert image_labels(tag)["io.keras-cloud-bench.torch.version"] == pins["torch"]
    script = "import torch, tensorflow as tf, jax; print(torch.__version__, torch.version.cuda, tf.__version__)"
    result = run(["docker", "run", "--rm", "--entrypoint", "python", tag, "-c", script], timeout=300)
    version, cuda, tensorflow = result.stdout.split()
    assert (version, tensorflow) == (pins["torch"], pins["tensorflow"]) and cuda.startswith("13.")
    assert run(["docker", "run", "--rm", tag, "--help"]).stdout.startswith("usage: python -m benchmarks")
