"""Helpers the cloud providers (aws, gce) share: the per-run SSH key, the SSH address override, polling.

The run's key is an ed25519 pair generated here; only its public half goes to the cloud (an EC2 key pair, GCE
`ssh-keys` metadata), the private half stays in the state directory, mode 0600, and is never logged.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from orchestrate.provider import ProviderError

if TYPE_CHECKING:
    from orchestrate.catalog import Profile

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
    public = private_key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return path, public.decode()


def forget_run_key(run_id: str) -> None:
    path = run_key_path(run_id)
    path.unlink(missing_ok=True)
    if path.parent.exists() and not any(path.parent.iterdir()):
        path.parent.rmdir()


def ssh_address_for(
    profile: Profile, public_ip: str | None, private_ip: str | None
) -> tuple[str, int | None]:
    """The (host, port) to SSH to: profile.extra["ssh_address"] or the public address.

    `ssh_address` is a `host[:port]` template with `{public_ip}` and `{private_ip}`: `{private_ip}` when the
    orchestrator runs inside the VPC, `127.0.0.1:2222` behind a port forward or a bastion tunnel.
    """
    template = profile.extra.get("ssh_address", "{public_ip}")
    address = template.format(public_ip=public_ip or "", private_ip=private_ip or "")
    host, _, port = address.partition(":")
    if not host:
        return "", None
    return host, int(port) if port else None


def validate_ssh_address(profile: Profile) -> None:
    template = profile.extra.get("ssh_address")
    if template is None:
        return
    try:
        host, port = ssh_address_for(profile, "192.0.2.1", "10.0.0.1")
    except (KeyError, ValueError, IndexError) as error:
        raise ProviderError(
            f"profile {profile.name}: extra.ssh_address {template!r} is not host[:port] "
            f"with {{public_ip}}/{{private_ip}} ({error})"
        ) from None
    if not host or (port is not None and not 0 < port < 65536):
        raise ProviderError(f"profile {profile.name}: extra.ssh_address {template!r} is not host[:port]")


def validate_disk_gb(profile: Profile) -> None:
    value = profile.extra.get("disk_gb")
    if value is not None and not (str(value).isdigit() and 10 <= int(value) <= 16384):
        raise ProviderError(f"profile {profile.name}: extra.disk_gb {value!r} is not a size in GB (10-16384)")


def poll_intervals(first_s: float = 0.5, cap_s: float = 5.0) -> Iterator[float]:
    """Seconds to sleep between polls: short at first (a VM is often up within seconds), then capped."""
    for attempt in itertools.count():
        yield min(cap_s, first_s * 2**attempt)
