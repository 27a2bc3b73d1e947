"""This machine: the same lifecycle as a remote host, with commands run here instead of over SSH."""

from __future__ import annotations

import socket
import time
from typing import ClassVar

import docker

from orchestrate.provider import Capability, CredentialsError, Instance, InstanceState, LaunchRequest, Provider


class LocalProvider(Provider):
    name: ClassVar[str] = "local"
    host_capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.PERSISTENT_HOST, Capability.RUNS_LOCALLY}
    )

    def describe(self) -> str:
        return f"this machine ({socket.gethostname()})"

    def check_credentials(self) -> None:
        """The only credential here is access to a Docker engine."""
        try:
            docker.from_env().ping()
        except docker.errors.DockerException as exc:
            raise CredentialsError(
                f"no Docker engine answers on this machine ({exc}); start Docker or set DOCKER_HOST"
            ) from exc

    def launch(self, request: LaunchRequest) -> Instance:
        return Instance(
            provider=self.name,
            instance_id=f"local:{socket.gethostname()}",
            zone=None,
            ssh=None,
            launched_at=time.time(),
            tags=dict(request.tags),
        )

    def wait_until_running(self, instance: Instance, timeout_s: float) -> Instance:
        return instance

    def state(self, instance: Instance) -> InstanceState:
        return InstanceState.RUNNING  # the machine running this code

    def terminate(self, instance: Instance) -> None:
        """Nothing to stop: the lifecycle already stopped its containers and cleaned its folder."""

    def list_instances(self) -> list[Instance]:
        return []  # launches nothing that could be left behind
