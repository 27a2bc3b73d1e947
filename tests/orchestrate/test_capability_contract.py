"""The capability contracts (`orchestrate.testing.capabilities`) against this project's providers, and the local
object-store double against the object-store contract."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrate.capabilities import ObjectStorage, ObjectStore, SpotMarket, offered
from orchestrate.provider import Capability, Provider
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


def test_a_capability_with_an_interface_comes_from_implementing_it_alone() -> None:
    """Each capability is declared once: by inheriting its interface (its `provides`), or in `host_capabilities`."""

    class Buckets(Provider, ObjectStorage, SpotMarket):
        name = "buckets"

    class Host(Provider):
        name = "host"
        host_capabilities = frozenset({Capability.PERSISTENT_HOST})

    assert Buckets.capabilities == Provider.host_capabilities | {Capability.OBJECT_STORE, Capability.SPOT}
    assert offered(Buckets, Capability.SPOT) and not offered(Buckets, Capability.SCHEDULER)
    assert Host.capabilities == {Capability.PERSISTENT_HOST} and not offered(Host, Capability.OBJECT_STORE)
    assert AWSProvider.capabilities >= {Capability.BOOT_SCRIPT, Capability.OBJECT_STORE, Capability.SPOT}
    assert LocalProvider.capabilities == {Capability.PERSISTENT_HOST, Capability.RUNS_LOCALLY}


def test_a_plug_in_that_declares_the_whole_set_still_reads_and_must_agree_with_its_interfaces() -> None:
    class Declared(Provider, ObjectStorage):
        name = "declared"
        capabilities = frozenset({Capability.BILLABLE, Capability.OBJECT_STORE})

    assert Declared.capabilities == {Capability.BILLABLE, Capability.OBJECT_STORE}
    assert Declared.host_capabilities == {Capability.BILLABLE}
    with pytest.raises(TypeError, match="scheduler"):

        class Claims(Provider, ObjectStorage):  # says SCHEDULER without implementing CloudScheduler
            name = "claims"
            capabilities = frozenset({Capability.OBJECT_STORE, Capability.SCHEDULER})

    with pytest.raises(TypeError, match="object-store"):

        class Omits(Provider, ObjectStorage):  # implements ObjectStorage without saying OBJECT_STORE
            name = "omits"
            capabilities = frozenset({Capability.BILLABLE})
