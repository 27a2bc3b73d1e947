"""The capability contracts (`orchestrate.testing.capabilities`) against this project's providers, and the local
object-store double against the object-store contract."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrate.capabilities import ObjectStore
from orchestrate.provider import Provider
from orchestrate.providers.aws import AWSProvider
from orchestrate.providers.gce import GCEProvider
from orchestrate.providers.local import LocalProvider
from orchestrate.providers.ssh import SSHProvider
from orchestrate.storage import StorageError, StorageURL
from orchestrate.testing.capabilities import CapabilityContract, LocalObjectStore, ObjectStoreContract


class TestLocalObjectStore(ObjectStoreContract):
    @pytest.fixture(autouse=True)
    def _root(self, tmp_path: Path) -> None:
        self.root = tmp_path / "buckets"

    def make_store(self) -> ObjectStore:
        return LocalObjectStore(StorageURL("file", "kcb-contract", "bench/"), self.root)


def test_the_local_store_refuses_a_missing_bucket_and_keys_outside_it(tmp_path: Path) -> None:
    store = LocalObjectStore(StorageURL("file", "kcb-missing"), tmp_path)
    with pytest.raises(StorageError, match="does not exist"):
        store.ensure_bucket(False, None)
    store.ensure_bucket(True, None)
    with pytest.raises(StorageError, match="not an object name"):
        store.put("runs/../../escape", b"x")


class TestAWSCapabilities(CapabilityContract):
    def make_provider(self) -> Provider:
        return AWSProvider()

    def make_zone(self) -> str:
        return "us-east-1a"


class TestGCECapabilities(CapabilityContract):
    def make_provider(self) -> Provider:
        return GCEProvider()

    def make_zone(self) -> str:
        return "us-central1-a"


class TestHostCapabilities(CapabilityContract):
    @pytest.fixture(params=["local", "ssh"])
    def provider(self, request: pytest.FixtureRequest) -> Provider:
        return LocalProvider() if request.param == "local" else SSHProvider.from_settings({"host": "box"})
