"""Fake clouds for the provider tests: moto's EC2 server (with AWS-side faults) and the Compute Engine fake.

Both are real HTTP servers on loopback; the providers reach them through their production configuration
(`AWS_ENDPOINT_URL`, `KCB_GCE_API_ENDPOINT`) and their standard credential chains (AWS keys in the environment,
a Google service-account key file whose token endpoint is the fake).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.clouds.aws_faults import FaultyMotoServer
from tests.clouds.gce_fake import GCEFake
from tests.support.sshd import sshd  # noqa: F401 - the fixture, for the tests here

INGRESS_CIDR = "198.51.100.7/32"  # TEST-NET-2: stands in for checkip.amazonaws.com's answer
SERVICE_ACCOUNT = "bench-runner@kcb-test-project.iam.gserviceaccount.com"


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


def aws_environment(endpoint: str, home: Path) -> dict[str, str]:
    """What a user's shell would hold for an AWS account, with the endpoint redirected to moto."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "AKIAKCBTESTKEY000000",
        "AWS_SECRET_ACCESS_KEY": "kcb-test-secret-never-printed",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(home / "aws-config-absent"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "aws-credentials-absent"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "KCB_SSH_INGRESS_CIDR": INGRESS_CIDR,
        "KCB_AWS_REGIONS": "us-east-1,us-west-2",  # where the tests launch; the sweep searches these
        "KCB_STATE_DIR": str(home / "state"),
    }


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


def gce_environment(fake: GCEFake, home: Path) -> dict[str, str]:
    key_file = write_service_account_key(fake, home / "service-account.json")
    return {
        "GOOGLE_APPLICATION_CREDENTIALS": str(key_file),
        "KCB_GCE_API_ENDPOINT": fake.url,
        "CLOUDSDK_CONFIG": str(home / "gcloud-absent"),  # no gcloud ADC from the developer's machine
        "NO_GCE_CHECK": "true",  # no metadata-server probe (this is not a GCE VM)
        "KCB_STATE_DIR": str(home / "state"),
    }


def write_service_account_key(fake: GCEFake, path: Path) -> Path:
    """A service-account key file as the IAM console downloads it, its token_uri the fake's endpoint."""
    private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private_pem = private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public_pem = (
        private_key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    fake.register_service_account(SERVICE_ACCOUNT, public_pem)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": fake.project,
                "private_key_id": "0123456789abcdef",
                "private_key": private_pem,
                "client_email": SERVICE_ACCOUNT,
                "client_id": "100000000000000000001",
                "token_uri": fake.token_uri,
            }
        )
    )
    path.chmod(0o600)
    return path
