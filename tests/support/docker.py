"""The Docker engine and the project's images, for tests that need them.

    from tests.support.docker import require_engine, require_image, containers_of_run, CPU_IMAGE

The engine and images are real; a missing one FAILS the test with the command that provides it (CI runs
them first): `bash ../shared/tools/docker-offline.sh` starts dockerd, `make image-cpu` builds the CPU image.
"""

from __future__ import annotations

import os
import subprocess

import pytest

CPU_IMAGE = os.environ.get("KCB_TEST_CPU_IMAGE", "keras-cloud-bench:cpu")
ENGINE_HINT = "start one with: bash ../shared/tools/docker-offline.sh"


def require_engine() -> None:
    try:
        done = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, timeout=60
        )
    except FileNotFoundError:
        pytest.fail(f"no docker client on PATH; {ENGINE_HINT}")
    if done.returncode != 0:
        pytest.fail(f"no Docker engine answers ({done.stderr.decode().strip()}); {ENGINE_HINT}")


def require_image(ref: str = CPU_IMAGE) -> str:
    """The image's ID; fails when the image is missing (build it: make image-cpu)."""
    require_engine()
    done = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", ref], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.fail(f"image {ref} is missing: build it with `make image-cpu` (docs/images.md)")
    return done.stdout.strip()


def containers_of_run(run_id: str) -> list[str]:
    """Names of containers (running or not) whose name starts with the run id."""
    done = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"name=^{run_id}-", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split()


def remove_containers_of_run(run_id: str) -> None:
    """Test cleanup only: whatever a failed assertion left behind."""
    for name in containers_of_run(run_id):
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
