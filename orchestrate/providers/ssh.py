"""Any Linux host reachable over SSH: a home server, a dedicated server (Hetzner, LeaderGPU, Paperspace...).

The host is not created or destroyed: "launch" names it and "terminate" lets it go. The lifecycle still stops
this run's containers and deletes its folder there. Settings (`--host user@box`, `--port`, `--identity`) may
be left to ~/.ssh/config: `--host myalias` uses that alias's HostName, User, Port, IdentityFile and ProxyJump.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar, Self

from orchestrate.provider import (
    Capability,
    CredentialsError,
    Instance,
    InstanceState,
    LaunchRequest,
    Provider,
    ProviderError,
    SSHTarget,
)

SETTINGS = ("host", "port", "identity_file")
HOST_PATTERN = re.compile(r"^(?:(?P<user>[A-Za-z0-9._-]+)@)?(?P<host>[A-Za-z0-9._:-]+|\[[0-9A-Fa-f:]+\])$")


def parse_target(host: str, port: str | int | None = None, identity_file: str | None = None) -> SSHTarget:
    """`user@box`, `box` or an ~/.ssh/config alias, with optional port and key; ProviderError if malformed."""
    match = HOST_PATTERN.match(host or "")
    if match is None:
        raise ProviderError(f"--host {host!r} is not user@host, host or an ~/.ssh/config alias")
    port_number = None
    if port not in (None, ""):
        try:
            port_number = int(port)
        except (TypeError, ValueError):
            raise ProviderError(f"--port {port!r} is not a number") from None
        if not 1 <= port_number <= 65535:
            raise ProviderError(f"--port {port_number} is outside 1-65535")
    key = str(Path(identity_file).expanduser()) if identity_file else None
    return SSHTarget(host=match["host"].strip("[]"), user=match["user"], port=port_number, key_filename=key)


class SSHProvider(Provider):
    name: ClassVar[str] = "ssh"
    host_capabilities: ClassVar[frozenset[Capability]] = frozenset({Capability.PERSISTENT_HOST})
    settings: ClassVar[tuple[str, ...]] = SETTINGS

    def __init__(self, target: SSHTarget) -> None:
        self.target = target

    def describe(self) -> str:
        return self.target.display()

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> Self:
        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise ProviderError(f"provider 'ssh' has no setting {', '.join(unknown)}; it takes {', '.join(SETTINGS)}")
        if not settings.get("host"):
            raise ProviderError("the ssh provider needs a host: --host user@box (make bench-ssh HOST=user@box)")
        return cls(parse_target(settings["host"], settings.get("port"), settings.get("identity_file")))

    def check_credentials(self) -> None:
        """A named key must be readable; otherwise the agent and ~/.ssh/config decide at connect time."""
        key = self.target.key_filename
        if key and not os.access(key, os.R_OK):
            raise CredentialsError(f"the SSH key {key} does not exist or cannot be read")

    def launch(self, request: LaunchRequest) -> Instance:
        return Instance(
            provider=self.name,
            instance_id=f"ssh:{self.target.display()}",
            zone=None,
            ssh=self.target,
            launched_at=time.time(),
            tags=dict(request.tags),
        )

    def wait_until_running(self, instance: Instance, timeout_s: float) -> Instance:
        return instance  # reachability is the lifecycle's bounded SSH wait

    def state(self, instance: Instance) -> InstanceState:
        return InstanceState.RUNNING  # never preempted: it is the user's machine

    def terminate(self, instance: Instance) -> None:
        """The host is the user's: nothing to stop beyond what the lifecycle already cleaned."""

    def list_instances(self) -> list[Instance]:
        return []  # creates nothing that could be left behind
