"""Fixtures for the image tests: a real Docker engine, the base image, BuildKit, builds through `make`.

The engine and the offline base image come from shared/tools/docker-offline.sh (CI runs it first). Without
them the Docker tests fail with the command to run; they never skip.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from image_helpers import BASE_IMAGE, SESSION_TAG, SHARED, TEST_IMAGE_REPO, client_major, make, run, session_image_tag

ENGINE_HINT = "run: bash ../shared/tools/docker-offline.sh (starts dockerd, builds the base image)"


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[str]:
    """The docker client, once an engine answers and the base image exists. At the end, this session's tags
    are removed; their layers stay, as build cache for the next session."""
    if shutil.which("docker") is None:
        pytest.fail(f"no docker client on PATH; {ENGINE_HINT}")
    if subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode != 0:
        pytest.fail(f"no Docker engine answers; {ENGINE_HINT}")
    if subprocess.run(["docker", "image", "inspect", BASE_IMAGE], capture_output=True).returncode != 0:
        pytest.fail(f"base image {BASE_IMAGE} is missing; {ENGINE_HINT}")
    yield "docker"
    listed = run(["docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", TEST_IMAGE_REPO]).stdout
    ours = [tag for tag in listed.split() if f"-{SESSION_TAG}" in tag]
    if ours:
        run(["docker", "image", "rm", "--no-prune", *ours], check=False)


@pytest.fixture(scope="session")
def buildkit_docker(docker_engine: str) -> str:
    """A docker client that builds with BuildKit: one with the buildx plugin, or one older than 23, which
    has BuildKit built in (Debian's docker.io client, beside a newer client that lacks buildx)."""
    found = [shutil.which("docker"), "/usr/bin/docker", "/usr/local/bin/docker"]
    candidates = [client for client in dict.fromkeys(found) if client and Path(client).exists()]
    for client in candidates:
        if subprocess.run([client, "buildx", "version"], capture_output=True).returncode == 0:
            return client
        major = client_major(client)
        if major is not None and major < 23:
            return client
    pytest.fail(f"no docker client with BuildKit among {candidates}: install the buildx plugin")


@pytest.fixture(scope="session")
def build_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("build-logs")


@pytest.fixture(scope="session")
def cpu_image(docker_engine: str, build_logs: Path) -> str:
    """The CPU image, built by `make image-cpu` without baked datasets (no download hosts here)."""
    tag = session_image_tag("cpu")
    make("image-cpu", f"IMAGE_CPU={tag}", "DATASETS=none", log=build_logs / "image-cpu.log")
    return tag


@pytest.fixture
def keras_cache(tmp_path: Path) -> Path:
    """A Keras cache ($KERAS_HOME) holding the real Fashion-MNIST files from shared/datasets."""
    source = SHARED / "datasets" / "fashion-mnist"
    files = sorted(source.glob("*.gz"))
    if len(files) != 4:
        pytest.fail(f"expected 4 Fashion-MNIST files in {source} (set KCB_SHARED_DIR), found {len(files)}")
    target = tmp_path / "keras-cache" / "datasets" / "fashion-mnist"
    target.mkdir(parents=True)
    for file in files:
        shutil.copy2(file, target / file.name)
    return tmp_path / "keras-cache"
