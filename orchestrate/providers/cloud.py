"""Helpers the cloud providers (aws, gce) share: the per-run SSH key, the SSH address setting, polling.

The run's key is an ed25519 pair generated here; only its public half goes to the cloud (an EC2 key pair, GCE
`ssh-keys` metadata), the private half stays in the state directory, mode 0600, and is never logged.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from orchestrate.provider import ProviderError

if TYPE_CHECKING:
    from records.catalog import Profile

STATE_DIR_ENV = "KCB_STATE_DIR"


def state_dir() -> Path:
    """$KCB_STATE_DIR, else ~/.keras-cloud-bench (beside the ledger)."""
    return Path(os.environ.get(STATE_DIR_ENV, "~/.keras-cloud-bench")).expanduser()


def run_key_path(run_id: str) -> Path:
    """Where the run's private SSH key lives (0600); deleted by `release_run`."""
    return state_dir() / "keys" / run_id / "id_ed25519"


def ensure_run_key(run_id: str) -> tuple[Path, str]:
    """The run's ed25519 key, created on first use: (private key path, OpenSSH public key line)."""
    path = run_key_path(run_id)
    if path.exists():
        private_key = serialization.load_ssh_private_key(path.read_bytes(), password=None)
    else:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        private_key = Ed25519PrivateKey.generate()
        pem = private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(pem)
    public = private_key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return path, public.decode()


def local_key_runs() -> list[str]:
    """Run ids whose private key is still in the state directory (a crash before `release_run`)."""
    keys = state_dir() / "keys"
    return sorted(path.parent.name for path in keys.glob("*/id_ed25519")) if keys.is_dir() else []


def forget_run_key(run_id: str) -> None:
    path = run_key_path(run_id)
    path.unlink(missing_ok=True)
    if path.parent.exists() and not any(path.parent.iterdir()):
        path.parent.rmdir()


@dataclass(frozen=True)
class SSHAddress:
    """Where to SSH to reach an instance: the provider setting `ssh_address`, a `host[:port]` template.

    `{public_ip}` (the default) and `{private_ip}` stand for the instance's addresses: `{private_ip}` when the
    orchestrator runs inside the VPC, `127.0.0.1:2222` through a port forward or a bastion tunnel.
    """

    template: str = "{public_ip}"

    @classmethod
    def from_settings(cls, provider: str, settings: Mapping[str, str]) -> SSHAddress:
        """The address from a provider's settings; ProviderError naming any other or malformed key."""
        unknown = sorted(set(settings) - {"ssh_address"})
        if unknown:
            raise ProviderError(
                f"provider '{provider}': unknown setting(s) {', '.join(unknown)}; it takes ssh_address=HOST[:PORT]"
            )
        address = cls(settings.get("ssh_address", cls.template))
        try:
            host, port = address.resolve("192.0.2.1", "10.0.0.1")
        except (KeyError, ValueError, IndexError) as error:
            host, port = "", -1
            detail = f" ({error})"
        else:
            detail = ""
        if not host or (port is not None and not 0 < port < 65536):
            raise ProviderError(
                f"provider '{provider}': setting ssh_address={address.template!r} is not HOST[:PORT] "
                f"(placeholders: {{public_ip}}, {{private_ip}}){detail}"
            )
        return address

    def resolve(self, public_ip: str | None, private_ip: str | None) -> tuple[str, int | None]:
        """(host, port); host is empty while the address it needs is not known yet."""
        needs_public = "{public_ip}" in self.template
        needs_private = "{private_ip}" in self.template
        if (needs_public and not public_ip) or (needs_private and not private_ip):
            return "", None
        address = self.template.format(public_ip=public_ip or "", private_ip=private_ip or "")
        host, _, port = address.rpartition(":") if address.count(":") == 1 else (address, "", "")
        return host, int(port) if port else None


def validate_disk_gb(profile: Profile) -> None:
    value = profile.extra.get("disk_gb")
    if value is not None and not (str(value).isdigit() and 10 <= int(value) <= 16384):
        raise ProviderError(f"profile {profile.name}: extra.disk_gb {value!r} is not a size in GB (10-16384)")


def poll_intervals(first_s: float = 0.5, cap_s: float = 5.0) -> Iterator[float]:
    """Seconds to sleep between polls: short at first (a VM is often up within seconds), then capped."""
    for attempt in itertools.count():
        yield min(cap_s, first_s * 2**attempt)
