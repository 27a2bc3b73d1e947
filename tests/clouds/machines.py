"""The fake clouds' instances, made real for boot scripts: each running instance that has a boot script (EC2 user
data in moto, the `startup-script` metadata item in the Compute Engine fake) gets a "machine", a container on the
local Docker engine that runs the script for real, as root, as cloud-init or the GCE guest agent would.

The machine is the base Python image (a cloud image's python3, no project code) with the engine's docker client
and socket (`--network host`, so the clouds' doubles on loopback are its cloud APIs). What a real machine gets
from its cloud, it gets from a metadata server double of its own (`MetadataServer`): its instance id and zone, and
the credentials of its role (AWS IMDSv2) or an access token of its service account (GCE, minted by the fake, which
lets that token delete only instances whose IAM policy names the account). Its work folder is a host folder
mounted at the same path (`KCB_WORK_DIR`), so the containers it starts through the engine see the same files.

`Machines` watches the cloud: a new running instance boots a machine; an instance that stops running (deleted by
its own API call, preempted, terminated) takes its machine and every container the machine started (label
`machine=<id>`) with it; a machine whose script ends while its instance still runs has powered off, which the
cloud is told (`power_off`: EC2 terminates, InstanceInitiatedShutdownBehavior; GCE stops the VM).
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from moto.core import DEFAULT_ACCOUNT_ID
from moto.ec2.models import ec2_backends

from tests.clouds.gce_fake import GCEFake
from tests.support.datasets import prefill_keras_cache
from tests.support.docker import BASE_IMAGE

DOCKER_CLIENT = "/usr/local/bin/docker"
MACHINE_LABEL = "kcb-test-machine"


@dataclass(frozen=True)
class Booting:
    """A running instance with a boot script, as its cloud records it."""

    instance_id: str
    zone: str
    script: str
    identity: str  # the role name (AWS) or service account (GCE) the metadata server speaks for


class MetadataServer:
    """One machine's metadata server: EC2's IMDSv2 paths or Compute Engine's, on loopback."""

    def __init__(self, cloud: str, booting: Booting, token: Callable[[], str] | None = None) -> None:
        region = booting.zone[:-1] if cloud == "aws" else booting.zone.rsplit("-", 1)[0]
        self.answers: dict[str, str] = (
            {
                "/latest/meta-data/instance-id": booting.instance_id,
                "/latest/meta-data/placement/availability-zone": booting.zone,
                "/latest/meta-data/placement/region": region,
                "/latest/meta-data/iam/security-credentials/": booting.identity,
                f"/latest/meta-data/iam/security-credentials/{booting.identity}": json.dumps(
                    {
                        "Code": "Success",
                        "AccessKeyId": "ASIAKCBMACHINE000000",
                        "SecretAccessKey": "kcb-machine-role-secret",
                        "Token": "kcb-machine-session-token",
                        "Expiration": "2999-01-01T00:00:00Z",
                    }
                ),
            }
            if cloud == "aws"
            else {
                "/computeMetadata/v1/instance/name": booting.instance_id,
                "/computeMetadata/v1/instance/zone": f"projects/123456789/zones/{booting.zone}",
                "/computeMetadata/v1/project/project-id": "kcb-test-project",
            }
        )
        self.token = token
        self.cloud = cloud
        handler = type("Handler", (_MetadataHandler,), {"server_double": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self._server.server_address[1]}"

    def answer(self, method: str, path: str, headers: Any) -> tuple[int, str]:
        if self.cloud == "aws":
            if method == "PUT" and path == "/latest/api/token":
                return 200, "kcb-imds-v2-token"
            if headers.get("X-aws-ec2-metadata-token") != "kcb-imds-v2-token":
                return 401, ""  # IMDSv2 only, as the project's instances are launched
        else:
            if headers.get("Metadata-Flavor") != "Google":
                return 403, ""
            if path == "/computeMetadata/v1/instance/service-accounts/default/token" and self.token is not None:
                return 200, json.dumps({"access_token": self.token(), "expires_in": 3599, "token_type": "Bearer"})
        return (200, self.answers[path]) if path in self.answers else (404, "")

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _MetadataHandler(BaseHTTPRequestHandler):
    server_double: MetadataServer

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _reply(self) -> None:
        status, body = self.server_double.answer(self.command, self.path.split("?")[0], self.headers)
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._reply()

    def do_PUT(self) -> None:
        self._reply()


@dataclass
class Machine:
    booting: Booting
    container: str
    metadata: MetadataServer
    work: Path


@dataclass
class Machines:
    """Boots a machine for each running instance with a boot script (see the module docstring)."""

    cloud: str
    source: Callable[[], list[Booting]]
    power_off: Callable[[Booting], None]
    workdir: Path
    token_for: Callable[[str], Callable[[], str]] | None = None  # GCE: service account -> its token maker
    interval_s: float = 0.25
    machines: dict[str, Machine] = field(default_factory=dict)
    booted: list[str] = field(default_factory=list)  # every instance that booted a machine, in order

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Machines:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for instance_id in list(self.machines):
            self._halt(instance_id)

    def console(self, instance_id: str) -> str:
        """What the machine's boot script printed (its own output; the agent logs to console.log)."""
        path = self.workdir / instance_id / "console.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                running = {b.instance_id: b for b in self.source()}
            except RuntimeError:  # the cloud changed its records while they were read: next tick
                continue
            for instance_id, booting in running.items():
                if instance_id not in self.machines and instance_id not in self.booted:
                    self._boot(booting)
                elif instance_id in self.machines and not _is_running(self.machines[instance_id].container):
                    self.power_off(booting)  # the script ended and the machine powered itself off
            for instance_id in [i for i in self.machines if i not in running]:
                self._halt(instance_id)  # the cloud ended the instance: the machine goes with it

    def _boot(self, booting: Booting) -> None:
        work = self.workdir / booting.instance_id
        prefill_keras_cache(work / "cache" / "keras")  # the datasets a warm machine image holds (offline here)
        (work / "boot.sh").write_text(booting.script)
        token = self.token_for(booting.identity) if self.token_for else None
        metadata = MetadataServer(self.cloud, booting, token)
        variable = "AWS_EC2_METADATA_SERVICE_ENDPOINT" if self.cloud == "aws" else "GCE_METADATA_HOST"
        address = f"http://{metadata.address}" if self.cloud == "aws" else metadata.address
        name = f"kcb-test-machine-{booting.instance_id}"
        subprocess.run(
            ["docker", "run", "-d", "--name", name, "--network", "host", "--label", f"{MACHINE_LABEL}=1",
             "-v", "/var/run/docker.sock:/var/run/docker.sock", "-v", f"{DOCKER_CLIENT}:/usr/bin/docker:ro",
             "-v", f"{work}:{work}", "-e", f"KCB_WORK_DIR={work}", "-e", f"{variable}={address}",
             BASE_IMAGE, "sh", f"{work}/boot.sh"],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        self.machines[booting.instance_id] = Machine(booting, name, metadata, work)
        self.booted.append(booting.instance_id)

    def _halt(self, instance_id: str) -> None:
        machine = self.machines.pop(instance_id)
        started = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label=machine={instance_id}"], capture_output=True, text=True
        ).stdout.split()
        subprocess.run(["docker", "rm", "-f", machine.container, *started], capture_output=True)
        machine.metadata.close()


def _is_running(container: str) -> bool:
    done = subprocess.run(
        ["docker", "inspect", "--format", "{{.State.Running}}", container], capture_output=True, text=True
    )
    return done.stdout.strip() == "true"


# ---- the clouds' records -----------------------------------------------------------------------------------------


def ec2_boot_scripts(regions: tuple[str, ...]) -> Callable[[], list[Booting]]:
    """Running moto instances with user data, each with its instance profile's role (read in this process)."""

    def found() -> list[Booting]:
        machines = []
        for region in regions:
            backend = ec2_backends[DEFAULT_ACCOUNT_ID][region]
            for instance in list(backend.all_instances()):
                if instance.state != "running" or not instance.user_data:
                    continue
                association = backend.iam_instance_profile_associations.get(instance.id)
                profile = association.iam_instance_profile if association else None
                role = profile.roles[0].name if profile and profile.roles else ""
                script = instance.user_data.decode()
                machines.append(Booting(instance.id, instance.availability_zone, script, role))
        return machines

    return found


def ec2_power_off(booting: Booting) -> None:
    """Powering off terminates the instance (the project launches with InstanceInitiatedShutdownBehavior=terminate)."""
    ec2_backends[DEFAULT_ACCOUNT_ID][booting.zone[:-1]].terminate_instances([booting.instance_id])


def gce_boot_scripts(fake: GCEFake) -> Callable[[], list[Booting]]:
    def found() -> list[Booting]:
        return [
            Booting(vm["name"], vm["zone"], vm["script"], vm["service_account"])
            for vm in fake.running_startup_scripts()
        ]

    return found


def gce_power_off(fake: GCEFake) -> Callable[[Booting], None]:
    return lambda booting: fake.power_off(booting.zone, booting.instance_id)


def gce_tokens(fake: GCEFake) -> Callable[[str], Callable[[], str]]:
    return lambda account: lambda: fake.vm_token(account)
