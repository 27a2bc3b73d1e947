"""Detached runs: everything the machine needs rides in its boot script (EC2 user data, the GCE `startup-script`
metadata item), so the orchestrator can return right after the launch, or not exist at all (a scheduled launch).

    script = boot_script(DetachedSpec(provider="aws", storage_url="s3://my-bucket", platform="aws-g4dn.xlarge",
                                      suite="quick", items=(WorkItem("mnist_mlp", "jax"),),
                                      image_ref="ghcr.io/me/keras-cloud-bench:gpu"))

The script is plain POSIX sh: it writes the agent (`orchestrate/machine_agent.py`, standard-library Python, gzip +
base64 so EC2's 16 KB user-data limit holds), the cloud's side of it (the provider's `MachineIdentity.agent_source`)
and the run's spec (JSON) to the machine's work folder, runs the agent
with the machine's python3, and powers the machine off on exit. The agent does the run (see its docstring) and
deletes its own instance through the cloud's API on every path it controls; powering off (which terminates an EC2
instance launched with InstanceInitiatedShutdownBehavior=terminate) and the cloud-side maximum lifetime are the
backstops. Credentials come from the instance role / the VM's service account through the metadata server: the
script holds none.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.cli import name_error
from benchmarks.command import RunnerCommand, repeat_stem
from benchmarks.work import item_command
from orchestrate.capabilities import MachineIdentity, check_storage_url, machine_identity, object_storage
from orchestrate.data_dir import ARCHIVE_NAME as DATA_ARCHIVE
from orchestrate.data_dir import CONTAINER_DIR as DATA_IN_CONTAINER
from orchestrate.hostprep import INSTALL_DOCKER, INSTALL_NVIDIA_TOOLKIT
from orchestrate.plan import RunPlan, WorkItem
from orchestrate.provider import ProviderError
from orchestrate.registry import load_provider_class
from orchestrate.storage import StorageError, StorageURL
from orchestrate.workload_files import CONTAINER_DIR

AGENT_SOURCE = Path(__file__).with_name("machine_agent.py")
CLOUD_MODULE = "cloud.py"  # the cloud's side of the agent, beside it (machine_agent.CLOUD_MODULE)
RUN_ID_TOKEN = "{run_id}"  # the agent's own constant: replaced on the machine by the run id
DETACHED_IMAGE_SOURCES = ("pull", "present", "load")
DEFAULT_WORK_DIR = "/var/lib/keras-cloud-bench"
SPEC_VERSION = 1


class DetachedError(ValueError):
    """A spec that cannot make a working boot script; the message names the field."""


@dataclass(frozen=True)
class DetachedSpec:
    """What a detached run's machine does, as data. `run_id=None` lets the machine name the run at boot (UTC time
    and a hash of its instance id, the runner's `YYYYMMDDTHHMMSSZ-xxxx` format), for launches with no orchestrator.

    The runner fields mirror `RunPlan`'s; `items` are run in order, each in a fresh container.
    """

    provider: str  # a provider with Capability.BOOT_SCRIPT: which metadata server and APIs the machine talks to
    storage_url: str  # that provider's bucket, e.g. s3://bucket[/prefix]; the run writes under <prefix>runs/<run-id>/
    platform: str  # the logs' platform name (the profile's name)
    suite: str
    items: tuple[WorkItem, ...]
    image_ref: str
    image_source: str = "pull"  # pull (a registry reference), present (in the machine image), load (from the bucket)
    run_id: str | None = None
    storage_region: str | None = None  # the S3 bucket's region (None: the machine's own)
    gpu_host: bool = False  # `docker run --gpus all`, and the NVIDIA container toolkit is installed when missing
    epochs: int | None = None
    train_limit: int | None = None
    val_limit: int | None = None
    gpus: str | None = None
    batch_policy: str | None = None
    repeats: int = 1
    allow_synthetic: bool = True
    max_lifetime_s: int = 4 * 3600  # the machine ends after this (by the cloud, or by the boot script's power-off)
    upload_interval_s: float = 60.0  # a running item's files go up this often (and the status heartbeat)
    # API endpoints the machine must use instead of the cloud's defaults; None: the ones this process is
    # redirected to (VPC / Private Service Connect endpoints, or the tests' doubles), so it reaches the same services
    endpoints: Mapping[str, str] | None = None
    # the user's workload files (file name, source text): the agent writes them beside the logs and mounts them at
    # /workloads in each container, so the image is not rebuilt for them
    workload_files: tuple[tuple[str, str], ...] = ()
    # the user's data folder (`--data-dir`): too big for the boot script, it waits in the bucket as the run's
    # data.tar, which the agent unpacks before the first item and mounts at /data/offline; (files, bytes) carried
    data_files: int = 0
    data_bytes: int = 0

    @classmethod
    def from_plan(cls, plan: RunPlan, storage_url: str, image_source: str, **overrides: Any) -> DetachedSpec:
        return cls(
            provider=plan.profile.provider,
            storage_url=storage_url,
            platform=plan.platform,
            suite=plan.suite,
            items=plan.items,
            image_ref=plan.image_ref,
            image_source=image_source,
            run_id=plan.run_id,
            gpu_host=plan.profile.has_gpu,
            epochs=plan.epochs,
            train_limit=plan.train_limit,
            val_limit=plan.val_limit,
            gpus=plan.gpus,
            batch_policy=plan.batch_policy,
            repeats=plan.repeats,
            allow_synthetic=plan.allow_synthetic,
            max_lifetime_s=plan.max_lifetime_s,
            workload_files=tuple((w.path.name, w.path.read_text()) for w in plan.workload_files),
            data_files=len(plan.data_dir.files) if plan.data_dir is not None else 0,
            data_bytes=plan.data_dir.size if plan.data_dir is not None else 0,
            **overrides,
        )

    @property
    def storage(self) -> StorageURL:
        try:
            return StorageURL.parse(self.storage_url)
        except StorageError as error:
            raise DetachedError(str(error)) from None

    def runner_argv(self, item: WorkItem) -> list[str]:
        """The image entrypoint's arguments for one item, the run id left as RUN_ID_TOKEN for the machine."""
        shared = RunnerCommand(
            workloads=(item.workload,),
            backend=item.backend,
            platform=self.platform,
            suite=self.suite,
            run_id=RUN_ID_TOKEN,
            out="/logs",
            allow_synthetic=self.allow_synthetic,
            epochs=self.epochs,
            train_limit=self.train_limit,
            val_limit=self.val_limit,
            gpus=self.gpus,
            batch_policy=self.batch_policy,
            workload_files=tuple(f"{CONTAINER_DIR}/{name}" for name, _ in self.workload_files),
            data_dir=DATA_IN_CONTAINER if self.data_files else None,
        )
        return item_command(shared, item, self.repeats).argv(entrypoint=True)

    def to_json(self) -> dict[str, Any]:
        """What the agent reads (`spec.json` on the machine and in the bucket)."""
        storage = self.storage
        return {
            "version": SPEC_VERSION,
            "provider": self.provider,
            "run_id": self.run_id,
            "platform": self.platform,
            "suite": self.suite,
            "storage": {"url": self.storage_url, "bucket": storage.bucket, "prefix": storage.prefix}
            | ({"region": self.storage_region} if self.storage_region else {}),
            "image": {"ref": self.image_ref, "source": self.image_source},
            "gpus": self.gpu_host,
            "runner": {
                "epochs": self.epochs,
                "train_limit": self.train_limit,
                "val_limit": self.val_limit,
                "gpus": self.gpus,
                "batch_policy": self.batch_policy,
                "repeats": self.repeats,
                "allow_synthetic": self.allow_synthetic,
            },
            "items": [self._item_json(item) for item in self.items],
            "max_lifetime_s": self.max_lifetime_s,
            "upload_interval_s": self.upload_interval_s,
            "endpoints": dict(self.machine_endpoints()),
            "install_docker": INSTALL_DOCKER,
            "install_nvidia_toolkit": INSTALL_NVIDIA_TOOLKIT if self.gpu_host else None,
            "workload_files": dict(self.workload_files),
            "data": self._data_json(),
        }

    def data_key(self) -> str:
        """The bucket key of the run's data.tar (a run with a data folder is named before its launch)."""
        if self.run_id is None:
            raise DetachedError("data_files: a run named at boot cannot be sent a data folder")
        return self.storage.run_prefix(self.run_id) + DATA_ARCHIVE

    def _data_json(self) -> dict[str, Any] | None:
        if not self.data_files:
            return None
        return {"key": self.data_key(), "files": self.data_files, "bytes": self.data_bytes}

    def machine_endpoints(self) -> Mapping[str, str]:
        if self.endpoints is not None:
            return self.endpoints
        return machine_of(self.provider).agent_endpoints(os.environ)

    def _item_json(self, item: WorkItem) -> dict[str, Any]:
        # the runner's file names for this item, real data or synthetic (WorkItem.owns_log's rule)
        stems = (item.stem, repeat_stem(f"{item.workload}_{item.backend}_synthetic", item.repeat))
        return {
            "workload": item.workload,
            "backend": item.backend,
            "repeat": item.repeat,
            "stem": item.stem,
            "container": item.container_name(RUN_ID_TOKEN),
            "files": [f"{stem}.{ext}" for stem in stems for ext in ("csv", "json")],
            "argv": self.runner_argv(item),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DetachedSpec:
        """The spec a machine recorded in the bucket (`spec.json`): a relaunch boots exactly the same run."""
        runner = data["runner"]
        return cls(
            provider=data["provider"],
            storage_url=data["storage"]["url"],
            storage_region=data["storage"].get("region"),
            platform=data["platform"],
            suite=data["suite"],
            items=tuple(WorkItem(i["workload"], i["backend"], i["repeat"]) for i in data["items"]),
            image_ref=data["image"]["ref"],
            image_source=data["image"]["source"],
            run_id=data["run_id"],
            gpu_host=bool(data["gpus"]),
            max_lifetime_s=int(data["max_lifetime_s"]),
            upload_interval_s=float(data["upload_interval_s"]),
            endpoints=dict(data.get("endpoints", {})),
            **{key: runner[key] for key in ("epochs", "train_limit", "val_limit", "gpus", "batch_policy")},
            repeats=int(runner["repeats"]),
            allow_synthetic=bool(runner["allow_synthetic"]),
            workload_files=tuple(data.get("workload_files", {}).items()),
            data_files=int((data.get("data") or {}).get("files", 0)),
            data_bytes=int((data.get("data") or {}).get("bytes", 0)),
        )


def machine_of(provider: str) -> type[MachineIdentity]:
    """The boot-script side of the provider named `provider`; DetachedError when it cannot run a detached run."""
    try:
        cls = load_provider_class(provider)
        object_storage(cls)
        return machine_identity(cls)
    except ProviderError as error:
        raise DetachedError(f"provider {provider!r}: {error}") from None


def validate(spec: DetachedSpec) -> type[MachineIdentity]:
    """DetachedError naming the first field that cannot work on a machine; the provider's boot-script side."""
    machine = machine_of(spec.provider)
    try:
        check_storage_url(spec.storage, spec.provider, spec.storage_url)
    except StorageError as error:
        raise DetachedError(f"storage_url: {error}") from None
    if spec.image_source not in DETACHED_IMAGE_SOURCES:
        raise DetachedError(
            f"image source {spec.image_source!r}: a detached machine can {', '.join(DETACHED_IMAGE_SOURCES)} "
            "its image (nothing streams or builds it from here)"
        )
    if not spec.items:
        raise DetachedError("items: nothing to run")
    if spec.upload_interval_s <= 0 or spec.max_lifetime_s <= 0:
        raise DetachedError("upload_interval_s and max_lifetime_s must be positive")
    for what, name in (("run_id", spec.run_id), ("platform", spec.platform)):
        problem = name_error(what, name) if name is not None else None
        if problem is not None:
            raise DetachedError(problem)
    if spec.data_files:
        spec.data_key()  # DetachedError for a run named at boot: no key to put its data.tar under
    for name, _ in spec.workload_files:
        if name_error("workload file", name) is not None or not name.endswith(".py"):
            raise DetachedError(f"workload file {name!r}: a .py file name of letters, digits, '-', '_' and '.'")
    return machine


def _packed(data: bytes) -> str:
    """gzip + base64 in 76-column lines (what `base64 -d` reads everywhere)."""
    encoded = base64.encodebytes(gzip.compress(data, compresslevel=9, mtime=0)).decode()
    return encoded.rstrip("\n")


def boot_script(spec: DetachedSpec) -> str:
    """The machine's whole job as a POSIX sh script: EC2 user data, or the GCE `startup-script` metadata value.

    Raises DetachedError when the spec is invalid, or when the script is over the cloud's size limit
    (`MachineIdentity.boot_script_limit`: 16 KB of EC2 user data). The script runs as root at first boot;
    `KCB_WORK_DIR` (default /var/lib/keras-cloud-bench) is where it keeps the run's files; the cloud's standard
    variables (e.g. `AWS_EC2_METADATA_SERVICE_ENDPOINT`, unset on real machines) say where the metadata server is.
    """
    machine = validate(spec)
    agent = _packed(AGENT_SOURCE.read_bytes())
    cloud = _packed(machine.agent_source.read_bytes())
    spec_json = _packed(json.dumps(spec.to_json(), sort_keys=True).encode())
    self_destruct = ""
    if not machine.ends_itself:
        minutes = max(1, math.ceil(spec.max_lifetime_s / 60))
        self_destruct = (
            "# backstop: power off (= terminate, InstanceInitiatedShutdownBehavior) at the max lifetime\n"
            f"shutdown -h +{minutes} >/dev/null 2>&1 || true\n"
        )
    script = f"""#!/bin/sh
# keras-cloud-bench detached run {spec.run_id or "(named at boot)"} on {spec.platform}: written by
# orchestrate.detached.boot_script. The agent below (orchestrate/machine_agent.py, gzip+base64) runs the suite,
# uploads every item's logs to {spec.storage_url} as it ends, then deletes this machine.
{self_destruct}KCB_WORK="${{KCB_WORK_DIR:-{DEFAULT_WORK_DIR}}}"
mkdir -p "$KCB_WORK" && cd "$KCB_WORK" || exit 1
power_off() {{
  # the agent deleted this machine through the cloud's API; if it could not (no python3, killed), power off
  sync; shutdown -h now >/dev/null 2>&1 || poweroff >/dev/null 2>&1 || true
}}
trap power_off EXIT
base64 -d <<'KCB_AGENT' | gunzip > agent.py
{agent}
KCB_AGENT
base64 -d <<'KCB_CLOUD' | gunzip > {CLOUD_MODULE}
{cloud}
KCB_CLOUD
base64 -d <<'KCB_SPEC' | gunzip > spec.json
{spec_json}
KCB_SPEC
if ! command -v python3 >/dev/null 2>&1; then
  echo "keras-cloud-bench: this machine image has no python3; the detached run cannot start" >> console.log
fi
python3 agent.py spec.json >> console.log 2>&1
"""
    limit = machine.boot_script_limit
    if len(script.encode()) > limit:
        raise DetachedError(
            f"the boot script is {len(script.encode())} bytes, over the {limit}-byte limit of {spec.provider}: "
            "plan fewer items per run" + (" or send a smaller workload file" if spec.workload_files else "")
        )
    return script
