"""The plug-in's own tests, against the contracts `orchestrate.testing` ships."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcb_foldercloud import ROOT_ENV, FolderCloudProvider
from orchestrate.provider import Provider
from orchestrate.storage import StorageURL
from orchestrate.testing import CapabilityContract, ObjectStoreContract


@pytest.fixture(autouse=True)
def cloud(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "cloud"))


class TestFolderCloudCapabilities(CapabilityContract):
    def make_provider(self) -> Provider:
        return FolderCloudProvider()

    def make_zone(self) -> str:
        return "fold-1-a"


class TestFolderCloudBucket(ObjectStoreContract):
    def make_store(self):
        return FolderCloudProvider.open_store(StorageURL("folder", "kcb-contract", "bench/"))
