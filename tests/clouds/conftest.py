"""Fake clouds for the provider tests: moto's EC2 server (with AWS-side faults) and the Compute Engine fake.

Both are real HTTP servers on loopback; the providers reach them through their production configuration
(`AWS_ENDPOINT_URL`, `KCB_GCE_API_ENDPOINT`) and their standard credential chains (AWS keys in the environment,
a Google service-account key file whose token endpoint is the fake).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from orchestrate.testing.sshd import sshd  # noqa: F401 - the fixture, for the tests here
from tests.clouds.aws_faults import FaultyMotoServer
from tests.clouds.environments import aws_environment, gce_environment
from tests.clouds.gce_fake import GCEFake


@pytest.fixture(scope="session")
def moto_server() -> Iterator[FaultyMotoServer]:
    server = FaultyMotoServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def aws(moto_server: FaultyMotoServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FaultyMotoServer:
    """A fresh moto account, with this process's AWS configuration pointing at it and nowhere else."""
    requests.post(f"{moto_server.url}/moto-api/reset", timeout=10).raise_for_status()
    moto_server.injector.clear()
    for name, value in aws_environment(moto_server.url, tmp_path).items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE"):
        monkeypatch.delenv(name, raising=False)
    return moto_server


@pytest.fixture
def gce_fake() -> Iterator[GCEFake]:
    fake = GCEFake()
    fake.add_image(
        "deeplearning-platform-release",
        "common-cu128-ubuntu-2204-nvidia-570",
        "common-cu128-ubuntu-2204-nvidia-570-v20250101",
    )
    fake.add_image("debian-cloud", "debian-12", "debian-12-bookworm-v20250101")
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def gce(gce_fake: GCEFake, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> GCEFake:
    """The fake with a service-account key registered and this process's Google configuration using it."""
    for name, value in gce_environment(gce_fake, tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)  # the key file's project_id is the project
    return gce_fake
