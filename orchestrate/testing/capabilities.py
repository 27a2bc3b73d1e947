"""The contracts of the optional capabilities (`orchestrate.capabilities`), and doubles a provider's tests can use.

    from orchestrate.testing.capabilities import CapabilityContract, LocalObjectStore, ObjectStoreContract

    class TestMyCloudCapabilities(CapabilityContract):
        def make_provider(self):
            return MyCloudProvider(...)

    class TestMyCloudBucket(ObjectStoreContract):        # against the cloud's storage test double or a sandbox
        def make_store(self):
            return MyCloudProvider.open_store(StorageURL("mc", "kcb-contract-test"))

`LocalObjectStore` is an `ObjectStore` kept in a folder: a provider whose tests have no storage double of their own
can return it from `open_store`, and the contract checks it like any other store.
"""

from __future__ import annotations

import ast
import builtins
import io
import shutil
import sys
import uuid
from pathlib import Path
from typing import BinaryIO

import pytest

from orchestrate.capabilities import (
    INTERFACES,
    MachineIdentity,
    ObjectStorage,
    ObjectStore,
    machine_identity,
    object_storage,
    offered,
)
from orchestrate.provider import Capability, Provider
from orchestrate.storage import SCHEME_RE, StorageError, StorageURL


class LocalObjectStore:
    """A bucket as a folder, `<root>/<bucket>/<key>`: what a cloud's object storage does, with no cloud."""

    def __init__(self, url: StorageURL, root: Path) -> None:
        self.url = url
        self._bucket = root / url.bucket

    def _path(self, key: str) -> Path:
        parts = key.split("/")
        if not key or any(part in ("", ".", "..") for part in parts[:-1]) or parts[-1] in (".", ".."):
            raise StorageError(f"{self.url}: key {key!r} is not an object name")
        return self._bucket.joinpath(*parts)

    def ensure_bucket(self, create: bool, location: str | None) -> str | None:
        if not self._bucket.is_dir():
            if not create:
                raise StorageError(f"bucket {self.url.bucket} does not exist: create it, or let the project create it")
            self._bucket.mkdir(parents=True)
        return None

    def check_writable(self, key: str) -> None:
        self.put(key, b"keras-cloud-bench write check\n")
        self.delete(key)

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
        partial.write_bytes(data)
        partial.replace(path)  # readers see the old object or the new one, never half of one

    def upload_file(self, key: str, source: BinaryIO) -> None:
        self.put(key, source.read())

    def read(self, key: str) -> bytes | None:
        path = self._path(key)
        return path.read_bytes() if path.is_file() else None

    def list(self, prefix: str) -> dict[str, int]:
        if not self._bucket.is_dir():
            raise StorageError(f"bucket {self.url.bucket} does not exist")
        found = {}
        for path in self._bucket.rglob("*"):
            key = path.relative_to(self._bucket).as_posix()
            if path.is_file() and not path.name.startswith(".") and key.startswith(prefix):
                found[key] = path.stat().st_size
        return found

    def download(self, key: str, path: Path) -> None:
        source = self._path(key)
        if not source.is_file():
            raise StorageError(f"{self.url}: downloading {key} failed: no such object")
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, path)

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def abort_uploads(self, prefix: str) -> builtins.list[str]:
        return []  # every put is whole: nothing is ever left half-uploaded


class ObjectStoreContract:
    """What detached runs rely on from a bucket (`orchestrate.capabilities.ObjectStore`)."""

    create_bucket: bool = True  # the test may create the bucket (else it must exist)
    location: str | None = None  # where to create it

    def make_store(self) -> ObjectStore:
        raise NotImplementedError("return the store under test, on a bucket that exists or may be created")

    @pytest.fixture
    def store(self) -> ObjectStore:
        store = self.make_store()
        store.ensure_bucket(self.create_bucket, self.location)
        store.ensure_bucket(False, self.location)  # created (or found) once, found again
        return store

    @pytest.fixture
    def prefix(self, store: ObjectStore) -> str:
        return f"{store.url.prefix}runs/contract-{uuid.uuid4().hex[:8]}/"

    def test_put_read_and_list_by_prefix(self, store: ObjectStore, prefix: str) -> None:
        store.put(prefix + "status.json", b'{"state": "running"}')
        store.put(prefix + "files/a.csv", b"epoch\n1\n")
        assert store.read(prefix + "status.json") == b'{"state": "running"}'
        assert store.read(prefix + "missing.json") is None
        assert store.list(prefix) == {prefix + "status.json": 20, prefix + "files/a.csv": 8}
        assert store.list(prefix + "files/") == {prefix + "files/a.csv": 8}

    def test_upload_download_and_idempotent_delete(self, store: ObjectStore, prefix: str, tmp_path: Path) -> None:
        store.upload_file(prefix + "image.tar", io.BytesIO(b"x" * 1000))
        target = tmp_path / "deep" / "image.tar"
        store.download(prefix + "image.tar", target)
        assert target.read_bytes() == b"x" * 1000
        store.delete(prefix + "image.tar")
        store.delete(prefix + "image.tar")  # gone already: still fine
        assert store.list(prefix) == {}

    def test_write_check_and_abort_leave_nothing(self, store: ObjectStore, prefix: str) -> None:
        store.check_writable(prefix + ".write-check")
        assert store.abort_uploads(prefix) == []
        assert store.list(prefix) == {}


class CapabilityContract:
    """Each advertised capability comes with its interface, and each interface's declarations make sense."""

    def make_provider(self) -> Provider:
        raise NotImplementedError("return the provider under test")

    def make_zone(self) -> str | None:
        """A zone of the provider's (for `region_of`); None for a provider without zones."""
        return None

    @pytest.fixture
    def provider(self) -> Provider:
        return self.make_provider()

    def test_every_capability_with_an_interface_implements_it(self, provider: Provider) -> None:
        for capability in provider.capabilities:
            assert capability not in INTERFACES or offered(provider, capability), f"{capability}: no interface"
        for capability, interface in INTERFACES.items():
            if isinstance(provider, interface):
                assert provider.has(capability), f"implements {interface.__name__} without advertising {capability}"

    def test_regions(self, provider: Provider) -> None:
        zone = self.make_zone()
        if zone is not None:
            region = provider.region_of(zone)
            assert region and zone.startswith(region)

    def test_object_storage(self, provider: Provider) -> None:
        if not provider.has(Capability.OBJECT_STORE):
            return
        storage: type[ObjectStorage] = object_storage(provider)
        assert SCHEME_RE.fullmatch(storage.storage_scheme)
        assert storage.bucket_problem("") is not None
        assert storage.bucket_problem("keras-cloud-bench-contract") is None

    def test_machine_identity(self, provider: Provider) -> None:
        if not provider.has(Capability.BOOT_SCRIPT):
            return
        machine: type[MachineIdentity] = machine_identity(provider)
        assert provider.has(Capability.OBJECT_STORE), "a detached run's machine writes to the provider's buckets"
        assert machine.boot_script_limit > 0
        assert machine.agent_endpoints({}) == {}
        tree = ast.parse(machine.agent_source.read_text(), str(machine.agent_source))
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        foreign = sorted(m for m in imported if m.split(".")[0] not in sys.stdlib_module_names)
        assert not foreign, f"{machine.agent_source}: the machine has only the standard library, not {foreign}"
        classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
        assert "Cloud" in classes, f"{machine.agent_source}: no Cloud class for the agent"
