"""Detached runs: everything the machine needs rides in its boot script (EC2 user data, the GCE `startup-script`
metadata item), so the orchestrator can return right after the launch, or not exist at all (a scheduled launch).

    script = boot_script(DetachedSpec(provider="aws", storage_url="s3://my-bucket", run=plan.spec))

The script is plain POSIX sh: it writes the agent (`orchestrate/machine_agent.py`, standard-library Python, gzip +
base64 so EC2's 16 KB user-data limit holds), the container command it shares with every mode
(`orchestrate/container_command.py`), the cloud's side of it (the provider's `MachineIdentity.agent_source`) and the
run's spec (JSON; the payload, if any, waits in the bucket) to the machine's work folder, runs the agent with the
machine's python3, and powers the machine off on exit. The agent does the run (see its docstring) and deletes its
own instance through the cloud's API on every path it controls; powering off (which terminates an EC2 instance
launched with InstanceInitiatedShutdownBehavior=terminate) and the cloud-side maximum lifetime are the backstops.
Credentials come from the instance role / the VM's service account through the metadata server: the script holds
none.
"""

from __future__ import annotations

import ast
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
from orchestrate.capabilities import MachineIdentity, check_storage_url, machine_identity, object_storage
from orchestrate.hostprep import INSTALL_DOCKER, INSTALL_NVIDIA_TOOLKIT
from orchestrate.provider import ProviderError
from orchestrate.registry import load_provider_class
from orchestrate.runspec import PAYLOAD_ARCHIVE, RunSpec
from orchestrate.storage import StorageError, StorageURL

HERE = Path(__file__).parent
# What the machine runs, each written beside the others: the agent, the container command, the cloud's side.
AGENT_MODULES = {"agent.py": HERE / "machine_agent.py", "container_command.py": HERE / "container_command.py"}
CLOUD_MODULE = "cloud.py"  # the cloud's side of the agent (machine_agent.CLOUD_MODULE)
DETACHED_IMAGE_SOURCES = ("pull", "present", "load")
DEFAULT_WORK_DIR = "/var/lib/keras-cloud-bench"
SPEC_VERSION = 2  # of spec.json, what the machine boots with: 2 holds the run spec (orchestrate.runspec)


class DetachedError(ValueError):
    """A spec that cannot make a working boot script; the message names the field."""


@dataclass(frozen=True)
class DetachedSpec:
    """What a detached run's machine does: the run (its spec, orchestrate.runspec), where its files go and how it
    gets its image. A run whose spec has no run id is named by its machine at boot (UTC time and a hash of its
    instance id, the runner's `YYYYMMDDTHHMMSSZ-xxxx` format), for launches with no orchestrator."""

    provider: str  # a provider with Capability.BOOT_SCRIPT: which metadata server and APIs the machine talks to
    storage_url: str  # that provider's bucket, e.g. s3://bucket[/prefix]; the run writes under <prefix>runs/<run-id>/
    run: RunSpec  # its items run in order, each in a fresh container
    image_source: str = "pull"  # pull (a registry reference), present (in the machine image), load (from the bucket)
    storage_region: str | None = None  # the S3 bucket's region (None: the machine's own)
    max_lifetime_s: int = 4 * 3600  # the machine ends after this (by the cloud, or by the boot script's power-off)
    upload_interval_s: float = 60.0  # a running item's files go up this often (and the status heartbeat)
    # API endpoints the machine must use instead of the cloud's defaults; None: the ones this process is
    # redirected to (VPC / Private Service Connect endpoints, or the tests' doubles), so it reaches the same services
    endpoints: Mapping[str, str] | None = None

    @property
    def storage(self) -> StorageURL:
        try:
            return StorageURL.parse(self.storage_url)
        except StorageError as error:
            raise DetachedError(str(error)) from None

    @property
    def payload_key(self) -> str | None:
        """The bucket key of the run's payload archive: beside the run's files, or for a run named at boot (a
        schedule's), the schedule's own, which each of its runs unpacks."""
        if self.run.payload is None:
            return None
        base = self.storage.prefix if self.run.run_id is None else self.storage.run_prefix(self.run.run_id)
        return base + PAYLOAD_ARCHIVE

    def to_json(self) -> dict[str, Any]:
        """What the agent reads (`spec.json` on the machine and in the bucket)."""
        storage = self.storage
        return {
            "version": SPEC_VERSION,
            "provider": self.provider,
            "storage": {"url": self.storage_url, "bucket": storage.bucket, "prefix": storage.prefix}
            | ({"region": self.storage_region} if self.storage_region else {}),
            "image": {"ref": self.run.image, "source": self.image_source},
            "run": self.run.to_json(),
            "carried": self.run.runner_env("")["BENCH_RUN_SPEC"],
            "payload_key": self.payload_key,
            "max_lifetime_s": self.max_lifetime_s,
            "upload_interval_s": self.upload_interval_s,
            "endpoints": dict(self.machine_endpoints()),
            "install_docker": INSTALL_DOCKER,
            "install_nvidia_toolkit": INSTALL_NVIDIA_TOOLKIT if self.run.gpus else None,
        }

    def machine_endpoints(self) -> Mapping[str, str]:
        if self.endpoints is not None:
            return self.endpoints
        return machine_of(self.provider).agent_endpoints(os.environ)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DetachedSpec:
        """The spec the orchestrator put in the bucket (`spec.json`): a relaunch boots exactly the same run."""
        if data.get("version") != SPEC_VERSION:
            raise DetachedError(f"spec.json version {data.get('version')}: this orchestrator boots {SPEC_VERSION}")
        return cls(
            provider=data["provider"],
            storage_url=data["storage"]["url"],
            storage_region=data["storage"].get("region"),
            run=RunSpec.from_json(data["run"]),
            image_source=data["image"]["source"],
            max_lifetime_s=int(data["max_lifetime_s"]),
            upload_interval_s=float(data["upload_interval_s"]),
            endpoints=dict(data.get("endpoints", {})),
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
    if not spec.run.items:
        raise DetachedError("items: nothing to run")
    if spec.upload_interval_s <= 0 or spec.max_lifetime_s <= 0:
        raise DetachedError("upload_interval_s and max_lifetime_s must be positive")
    for what, name in (("run_id", spec.run.run_id), ("platform", spec.run.platform)):
        problem = name_error(what, name) if name is not None else None
        if problem is not None:
            raise DetachedError(problem)
    return machine


def _packed(data: bytes) -> str:
    """gzip + base64 in 76-column lines (what `base64 -d` reads everywhere)."""
    encoded = base64.encodebytes(gzip.compress(data, compresslevel=9, mtime=0)).decode()
    return encoded.rstrip("\n")


def _code(path: Path) -> bytes:
    """A module's code without its comments and docstrings, which the machine only runs (its source is here)."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef) and ast.get_docstring(node) is not None:
            node.body = node.body[1:] or [ast.Pass()]
    return ast.unparse(tree).encode()


def boot_script(spec: DetachedSpec) -> str:
    """The machine's whole job as a POSIX sh script: EC2 user data, or the GCE `startup-script` metadata value.

    Raises DetachedError when the spec is invalid, or when the script is over the cloud's size limit
    (`MachineIdentity.boot_script_limit`: 16 KB of EC2 user data). The script runs as root at first boot;
    `KCB_WORK_DIR` (default /var/lib/keras-cloud-bench) is where it keeps the run's files; the cloud's standard
    variables (e.g. `AWS_EC2_METADATA_SERVICE_ENDPOINT`, unset on real machines) say where the metadata server is.
    """
    machine = validate(spec)
    files = {name: _code(path) for name, path in AGENT_MODULES.items()}
    files[CLOUD_MODULE] = _code(machine.agent_source)
    files["spec.json"] = json.dumps(spec.to_json(), sort_keys=True).encode()
    written = "".join(
        f"base64 -d <<'KCB_FILE' | gunzip > {name}\n{_packed(data)}\nKCB_FILE\n" for name, data in files.items()
    )
    self_destruct = ""
    if not machine.ends_itself:
        minutes = max(1, math.ceil(spec.max_lifetime_s / 60))
        self_destruct = (
            "# backstop: power off (= terminate, InstanceInitiatedShutdownBehavior) at the max lifetime\n"
            f"shutdown -h +{minutes} >/dev/null 2>&1 || true\n"
        )
    script = f"""#!/bin/sh
# keras-cloud-bench detached run {spec.run.run_id or "(named at boot)"} on {spec.run.platform}: written by
# orchestrate.detached.boot_script. The agent below (orchestrate/machine_agent.py, gzip+base64) runs the suite,
# uploads every item's logs to {spec.storage_url} as it ends, then deletes this machine.
{self_destruct}KCB_WORK="${{KCB_WORK_DIR:-{DEFAULT_WORK_DIR}}}"
mkdir -p "$KCB_WORK" && cd "$KCB_WORK" || exit 1
power_off() {{
  # the agent deleted this machine through the cloud's API; if it could not (no python3, killed), power off
  sync; shutdown -h now >/dev/null 2>&1 || poweroff >/dev/null 2>&1 || true
}}
trap power_off EXIT
{written}if ! command -v python3 >/dev/null 2>&1; then
  echo "keras-cloud-bench: this machine image has no python3; the detached run cannot start" >> console.log
fi
python3 agent.py spec.json >> console.log 2>&1
"""
    limit = machine.boot_script_limit
    if len(script.encode()) > limit:
        raise DetachedError(
            f"the boot script is {len(script.encode())} bytes, over the {limit}-byte limit of {spec.provider}: "
            "plan fewer items per run"
        )
    return script
