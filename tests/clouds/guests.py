"""The fake clouds' instances, made reachable: one real sshd on loopback stands in for all of them.

The providers are given `ssh_address=127.0.0.1:<port>` (the provider setting for port forwards and
tunnels), so every instance's SSH address is the test sshd. `GuestKeys` then plays the guest agent of the
instances (cloud-init on EC2, the guest environment on GCE): while an instance runs, the public key the cloud
would install on it is in the sshd's authorized_keys, and it leaves when the instance stops running. The key
comes from the cloud's own records: the EC2 key pair named by the instance, the `ssh-keys` metadata of the GCE
instance. A provider that registered the wrong key, or none, cannot log in.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from moto.core import DEFAULT_ACCOUNT_ID
from moto.ec2.models import ec2_backends

from orchestrate.testing.sshd import SSHServer
from tests.clouds.gce_fake import GCEFake

KeySource = Callable[[], list[str]]


def ec2_running_instance_keys(regions: tuple[str, ...]) -> KeySource:
    """Public keys of the key pairs of running instances in moto (read from its backend, in this process)."""

    def keys() -> list[str]:
        found = []
        for region in regions:
            backend = ec2_backends[DEFAULT_ACCOUNT_ID][region]
            for instance in list(backend.all_instances()):
                key_pair = backend.key_pairs.get(instance.key_name or "")
                if instance.state == "running" and key_pair is not None:
                    found.append(key_pair.public_key)
        return found

    return keys


def gce_running_instance_keys(fake: GCEFake) -> KeySource:
    return fake.running_ssh_keys


class GuestKeys:
    """Keeps the sshd's authorized_keys equal to its own key plus the keys of the running instances."""

    def __init__(self, server: SSHServer, source: KeySource, interval_s: float = 0.1) -> None:
        self.authorized = server.workdir / "authorized_keys"
        self.own_key = Path(f"{server.key_path}.pub").read_text().strip()
        self.source = source
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.installed: set[str] = set()  # every instance key ever installed, for assertions

    def __enter__(self) -> GuestKeys:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                keys = sorted(set(self.source()))
            except RuntimeError:  # the cloud changed its records while they were read: next tick
                continue
            self.installed.update(keys)
            text = "\n".join([self.own_key, *keys]) + "\n"
            if self.authorized.read_text() != text:
                staged = self.authorized.with_suffix(".new")
                staged.write_text(text)
                staged.replace(self.authorized)  # sshd never reads a half-written file
