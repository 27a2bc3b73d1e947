"""This project's local and ssh providers pass the provider contract (orchestrate/testing/contract.py)."""

from __future__ import annotations

import pytest

from orchestrate.provider import ProviderError
from orchestrate.providers.local import LocalProvider
from orchestrate.providers.ssh import SSHProvider, parse_target
from orchestrate.testing import ProviderContract, SSHLoginContract
from orchestrate.testing.sshd import SSHServer
from records.catalog import load_catalog
from tests.support.docker import require_engine


class TestLocalProviderContract(ProviderContract):
    def make_provider(self) -> LocalProvider:
        require_engine()
        return LocalProvider.from_settings({})

    def make_profile(self):
        return load_catalog()["local"]


@pytest.mark.sshd
class TestSSHProviderContract(ProviderContract, SSHLoginContract):
    @pytest.fixture(autouse=True)
    def _server(self, sshd: SSHServer) -> None:
        self.server = sshd

    def make_provider(self) -> SSHProvider:
        return SSHProvider.from_settings(
            {
                "host": self.server.user_at_host,
                "port": str(self.server.port),
                "identity_file": str(self.server.key_path),
            }
        )

    def make_profile(self):
        return load_catalog()["ssh"]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({}, "the ssh provider needs a host: --host user@box"),
        ({"host": "me@box", "port": "ssh"}, "--port 'ssh' is not a number"),
        ({"host": "me@box", "port": "70000"}, "--port 70000 is outside 1-65535"),
        ({"host": "me@bad host"}, "--host 'me@bad host' is not user@host"),
        ({"host": "me@box", "zone": "a"}, "provider 'ssh' has no setting zone"),
    ],
)
def test_ssh_settings_are_validated(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ProviderError, match=message):
        SSHProvider.from_settings(settings)


def test_ssh_targets_parse() -> None:
    assert parse_target("bench@10.0.0.5", "2222").display() == "bench@10.0.0.5:2222"
    assert parse_target("my-alias").user is None  # ~/.ssh/config decides
    assert parse_target("root@[::1]").host == "::1"


def test_local_provider_takes_no_settings() -> None:
    with pytest.raises(ProviderError, match="provider 'local' takes no settings; got host"):
        LocalProvider.from_settings({"host": "x"})
