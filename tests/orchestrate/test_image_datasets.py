"""`make image-cpu` (DATASETS=keras) takes the datasets from this machine's Keras cache into the image, so a build
without network still bakes what the host holds (it once stopped at the first unreachable download)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.datasets import prefill_keras_cache
from tests.support.docker import BASE_IMAGE, build_cpu_image

pytestmark = [pytest.mark.slow, pytest.mark.docker]

ROOT = Path(__file__).resolve().parents[2]
TAG = "keras-cloud-bench-orchestrate-test:cpu-datasets"


def test_the_image_bakes_the_hosts_datasets(tmp_path: Path) -> None:
    build_cpu_image(tmp_path / "base.log")  # the shared layers, from Docker's cache after the first build
    keras_home = tmp_path / "keras"
    prefill_keras_cache(keras_home)
    done = subprocess.run(
        ["make", "-f", "mk/images.mk", "image-cpu", f"IMAGE_CPU={TAG}", "DATASETS=keras", f"BASE_IMAGE={BASE_IMAGE}",
         f"KERAS_HOME={keras_home}"],
        cwd=ROOT, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    listed = subprocess.run(
        ["docker", "run", "--rm", "--entrypoint", "sh", TAG, "-c",
         "cd /data/keras/datasets && sha256sum nietzsche.txt fashion-mnist/train-labels-idx1-ubyte.gz"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    host = subprocess.run(
        ["sha256sum", "nietzsche.txt", "fashion-mnist/train-labels-idx1-ubyte.gz"],
        cwd=keras_home / "datasets", capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert listed.stdout == host.stdout
    subprocess.run(["docker", "rmi", TAG], capture_output=True)
