"""foldercloud: a cloud kept in a folder (`$FOLDERCLOUD_ROOT`), written as a third-party provider package writes one:
against the public API only (`orchestrate.provider`, `orchestrate.capabilities`, `orchestrate.schedule_spec`,
`orchestrate.storage`, `orchestrate.testing`), installed through its entry points, with no edit to the project.

Its machines are records under `machines/` (a launch keeps the boot script there: the test plays the machine), its
buckets folders under `buckets/` (`LocalObjectStore`), its scheduler's jobs records under `schedules/`. An attached
run reaches its machine over SSH at the address and with the key its settings give (`--provider-setting
ssh_host=... ssh_port=... ssh_user=... ssh_key=...`), as a cloud whose images accept a key registered beforehand.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar, Self

from orchestrate.capabilities import CloudScheduler, MachineIdentity, ObjectStorage, ObjectStore, Scheduler
from orchestrate.provider import (
    PROJECT_TAG,
    CredentialsError,
    Instance,
    InstanceState,
    LaunchRequest,
    Provider,
    ProviderError,
    SSHTarget,
)
from orchestrate.schedule_spec import ScheduleInfo, ScheduleSpec
from orchestrate.storage import StorageURL
from orchestrate.testing import LocalObjectStore

CATALOG = Path(__file__).with_name("catalog.toml")
ROOT_ENV = "FOLDERCLOUD_ROOT"


def cloud_root() -> Path:
    if ROOT_ENV not in os.environ:
        raise CredentialsError(f"foldercloud: set {ROOT_ENV} to the cloud's folder")
    return Path(os.environ[ROOT_ENV])


def _write(path: Path, data: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


class FolderScheduler:
    def __init__(self) -> None:
        self.folder = cloud_root() / "schedules"

    def check_credentials(self) -> None:
        cloud_root()

    def how(self, spec: ScheduleSpec) -> str:
        return f"foldercloud scheduler in {spec.region} -> a machine in {spec.zone}"

    def exists(self, spec: ScheduleSpec) -> bool:
        return (self.folder / f"{spec.name}.json").exists()

    def create(self, spec: ScheduleSpec, boot_script: str, storage: StorageURL) -> list[str]:
        record = {"cron": spec.cron.text, "time_zone": spec.time_zone, "region": spec.region, "storage": str(storage)}
        record |= {"description": spec.description(), "boot_script": boot_script, "tags": spec.tags()}
        _write(self.folder / f"{spec.name}.json", record)
        return [f"foldercloud job {spec.name} ({spec.region})"]

    def list(self) -> list[ScheduleInfo]:
        found = []
        for path in sorted(self.folder.glob("*.json")):
            job = json.loads(path.read_text())
            tags = job["tags"]
            found.append(
                ScheduleInfo(path.stem, "foldercloud", job["region"], job["cron"], job["cron"], job["time_zone"],
                             "ENABLED", tags["profile"], tags["suite"])
            )  # fmt: skip
        return found

    def delete(self, name: str) -> list[str]:
        path = self.folder / f"{name}.json"
        if not path.exists():
            return []
        path.unlink()
        return [f"foldercloud job {name}"]


class FolderCloudProvider(Provider, ObjectStorage, MachineIdentity, CloudScheduler):
    name: ClassVar[str] = "foldercloud"
    storage_scheme: ClassVar[str] = "folder"
    boot_script_limit: ClassVar[int] = 64 * 1024
    ends_itself: ClassVar[bool] = True
    agent_source: ClassVar[Path] = Path(__file__).with_name("agent.py")
    default_disk_gb: ClassVar[float] = 10.0
    schedule_prices: ClassVar[Path | None] = Path(__file__).with_name("prices.toml")
    settings: ClassVar[tuple[str, ...]] = ("ssh_host", "ssh_port", "ssh_user", "ssh_key")

    def __init__(self, ssh: SSHTarget | None = None) -> None:
        self.ssh = ssh or SSHTarget("127.0.0.1")

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> Self:
        unknown = sorted(set(settings) - set(cls.settings))
        if unknown:
            raise ProviderError(f"provider 'foldercloud' has no setting {', '.join(unknown)}")
        port = settings.get("ssh_port")
        if port is not None and not port.isdigit():
            raise ProviderError(f"ssh_port: {port!r} is not a port number")
        host = settings.get("ssh_host", "127.0.0.1")
        return cls(SSHTarget(host, settings.get("ssh_user"), int(port) if port else None, settings.get("ssh_key")))

    # -- machines --------------------------------------------------------------------------------------------

    @classmethod
    def region_of(cls, zone: str) -> str:
        return zone.rsplit("-", 1)[0]

    def check_credentials(self) -> None:
        cloud_root()

    def _machine(self, instance_id: str) -> Path:
        return cloud_root() / "machines" / f"{instance_id}.json"

    def launch(self, request: LaunchRequest) -> Instance:
        instance_id = f"fc-{uuid.uuid4().hex[:8]}"
        tags = {**request.tags, "project": PROJECT_TAG, "run-id": request.run_id}
        record = {"zone": request.zone, "tags": tags, "state": "running", "launched_at": time.time()}
        _write(self._machine(instance_id), record | {"boot_script": request.boot_script})
        return Instance(self.name, instance_id, request.zone, None, request.spot, time.time(), tags)

    def wait_until_running(self, instance: Instance, timeout_s: float) -> Instance:
        instance.ssh = self.ssh
        return instance

    def state(self, instance: Instance) -> InstanceState:
        path = self._machine(instance.instance_id)
        if not path.exists():
            return InstanceState.TERMINATED
        return InstanceState(json.loads(path.read_text())["state"])

    def ended_at(self, instance: Instance) -> float | None:
        path = self._machine(instance.instance_id)
        return json.loads(path.read_text()).get("ended_at") if path.exists() else None

    def terminate(self, instance: Instance) -> None:
        path = self._machine(instance.instance_id)
        if path.exists():
            record = json.loads(path.read_text())
            if record["state"] != "terminated":
                _write(path, record | {"state": "terminated", "ended_at": time.time()})

    def list_instances(self) -> list[Instance]:
        found = []
        for path in sorted((cloud_root() / "machines").glob("*.json")):
            record = json.loads(path.read_text())
            if record["state"] != "terminated":
                found.append(Instance(self.name, path.stem, record["zone"], None, tags=record["tags"]))
        return found

    # -- capabilities ----------------------------------------------------------------------------------------

    @classmethod
    def bucket_problem(cls, bucket: str) -> str | None:
        return None if re.fullmatch(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]", bucket) else "must be 3-63 of a-z, 0-9, '-'"

    @classmethod
    def open_store(cls, url: StorageURL) -> ObjectStore:
        return LocalObjectStore(url, cloud_root() / "buckets")

    @classmethod
    def storage_account(cls, region: str) -> str:
        return f"folder-{region}"

    @classmethod
    def agent_endpoints(cls, environ: Mapping[str, str]) -> dict[str, str]:
        return {"root": environ[ROOT_ENV]} if ROOT_ENV in environ else {}

    def scheduler(self, account: str | None) -> Scheduler:
        return FolderScheduler()
