"""The object-store contract (`orchestrate.testing.capabilities.ObjectStoreContract`) against each cloud's bucket:
S3 on moto, Cloud Storage on the storage emulator, through the providers' own `open_store`."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from gcp_storage_emulator.server import create_server

from orchestrate.capabilities import ObjectStore
from orchestrate.providers.aws import AWSProvider
from orchestrate.providers.gce import GCEProvider
from orchestrate.providers.gce.storage import GCS_ENDPOINT_ENV
from orchestrate.storage import StorageURL
from orchestrate.testing.capabilities import ObjectStoreContract
from tests.clouds.aws_faults import FaultyMotoServer
from tests.clouds.gce_fake import GCEFake


class TestS3Contract(ObjectStoreContract):
    location = "us-west-2"

    @pytest.fixture(autouse=True)
    def _cloud(self, aws: FaultyMotoServer) -> None:
        """moto, reached as the provider reaches AWS (the `aws` fixture's environment)."""

    def make_store(self) -> ObjectStore:
        return AWSProvider.open_store(StorageURL("s3", "kcb-contract-test", "bench/"))


@pytest.fixture
def gcs(gce: GCEFake, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = create_server("127.0.0.1", port, in_memory=True)
    server.start()
    monkeypatch.setenv(GCS_ENDPOINT_ENV, f"http://127.0.0.1:{port}")
    yield
    server.stop()


class TestCloudStorageContract(ObjectStoreContract):
    location = "us-central1"

    @pytest.fixture(autouse=True)
    def _cloud(self, gcs: None) -> None:
        """The storage emulator, with the `gce` fixture's credentials."""

    def make_store(self) -> ObjectStore:
        return GCEProvider.open_store(StorageURL("gs", "kcb-contract-test", "bench/"))
