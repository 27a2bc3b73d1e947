"""What a provider may offer beyond launching machines, each a small interface it implements or leaves out.

A provider has a capability by inheriting its interface here (dstack's compute mixins, SkyPilot's per-cloud
packages); each interface names its capability in `provides`, and `Provider.capabilities` is derived from them:

- `Capability.OBJECT_STORE` -> `ObjectStorage`: buckets for a detached run's spec, logs and status;
- `Capability.BOOT_SCRIPT` -> `MachineIdentity`: the machine runs a boot script with an identity that may write
  its run's objects and delete its own machine, nothing else (least privilege);
- `Capability.SCHEDULER` -> `CloudScheduler`: the cloud's own scheduler starts machines on a cron schedule;
- `Capability.SPOT` -> `SpotMarket`: spot or preemptible machines, and telling the cloud's reclaim from an end;
- `Capability.BATCH` -> `BatchQueue`: a batch scheduler (Slurm) runs the work items as one job, which the lifecycle
  follows (`orchestrate.batch`).

Detached runs, schedules and the sweep reach a cloud only through `offered` and `require` (and the typed accessors
built on it).
"""

from __future__ import annotations

import abc
import builtins
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, ClassVar, Protocol

from orchestrate.provider import Capability, Instance, Provider, ProviderError, TaskState
from orchestrate.registry import load_provider_class, provider_names
from orchestrate.schedule_spec import ScheduleInfo, ScheduleSpec
from orchestrate.storage import StorageError, StorageURL

if TYPE_CHECKING:
    from records.catalog import Profile


class ObjectStore(Protocol):
    """One bucket: keys are full object names (`<prefix>runs/<run-id>/...`). Failures raise StorageError."""

    url: StorageURL

    def ensure_bucket(self, create: bool, location: str | None) -> str | None:
        """Check the bucket exists, or create it (tagged with the project, private) when `create`; the region the
        machine must address it in, where the store needs one named (None otherwise)."""
        ...

    def check_writable(self, key: str) -> None: ...
    def put(self, key: str, data: bytes) -> None: ...
    def upload_file(self, key: str, source: BinaryIO) -> None: ...
    def read(self, key: str) -> bytes | None: ...
    def list(self, prefix: str) -> dict[str, int]: ...
    def download(self, key: str, path: Path) -> None: ...
    def delete(self, key: str) -> None: ...

    def abort_uploads(self, prefix: str) -> builtins.list[str]:
        """Abort unfinished uploads under `prefix` (billed while they last); the keys they were for."""
        ...


class ObjectStorage(abc.ABC):
    """Capability.OBJECT_STORE: the cloud's object storage, addressed as `<storage_scheme>://bucket/prefix`."""

    provides: ClassVar[Capability] = Capability.OBJECT_STORE

    storage_scheme: ClassVar[str]

    @classmethod
    @abc.abstractmethod
    def bucket_problem(cls, bucket: str) -> str | None:
        """Why `bucket` cannot name one of this cloud's buckets, as a phrase; None when it can."""

    @classmethod
    @abc.abstractmethod
    def open_store(cls, url: StorageURL) -> ObjectStore:
        """The bucket of `url`; nothing is called until a method is."""

    @classmethod
    @abc.abstractmethod
    def storage_account(cls, region: str) -> str:
        """What names the project's own bucket (the account and region, the project); StorageError if unknown."""


class MachineIdentity(abc.ABC):
    """Capability.BOOT_SCRIPT: `launch` runs `LaunchRequest.boot_script` at first boot, as an identity that may
    write `LaunchRequest.storage_prefix` and delete its own machine, nothing else. The machine runs
    `orchestrate/machine_agent.py` with `agent_source` beside it."""

    provides: ClassVar[Capability] = Capability.BOOT_SCRIPT

    boot_script_limit: ClassVar[int]  # bytes of boot script the cloud accepts
    ends_itself: ClassVar[bool]  # the cloud ends the machine at its max lifetime (else the script powers it off)
    # The cloud's side of the agent, standard library only: a `Cloud(spec, request)` class (see
    # `orchestrate.machine_agent.load_cloud`) that knows who the machine is, reads and writes its bucket, and
    # deletes its machine with the identity the launch gave it.
    agent_source: ClassVar[Path]

    @classmethod
    @abc.abstractmethod
    def agent_endpoints(cls, environ: Mapping[str, str]) -> dict[str, str]:
        """The API endpoints this process is redirected to (in `environ`), which the machine must use too, by the
        names the cloud's side of the agent reads."""


class Scheduler(Protocol):
    """One cloud's scheduler: creates, lists and deletes what a schedule needs there. Failures raise
    ScheduleFailure; a create that fails half-way removes what it made; every delete is idempotent."""

    def check_credentials(self) -> None: ...

    def how(self, spec: ScheduleSpec) -> str:
        """How the schedule starts its machine, in a line for the plan."""
        ...

    def exists(self, spec: ScheduleSpec) -> bool: ...

    def create(self, spec: ScheduleSpec, boot_script: str, storage: StorageURL) -> builtins.list[str]:
        """Everything the schedule needs; what was created, in words."""
        ...

    def list(self) -> builtins.list[ScheduleInfo]: ...
    def delete(self, name: str) -> builtins.list[str]: ...


class CloudScheduler(abc.ABC):
    """Capability.SCHEDULER: the cloud's scheduler launches a `MachineIdentity` machine on a cron schedule."""

    provides: ClassVar[Capability] = Capability.SCHEDULER

    default_disk_gb: ClassVar[float]  # the default image's root disk, billed where the profile sets none
    # The TOML file with this cloud's `[clouds.<name>]` prices of a scheduled run besides the machine (disk, scheduler,
    # storage, requests; orchestrate.schedule_cost); None: the project's own, orchestrate/schedule_prices.toml.
    schedule_prices: ClassVar[Path | None] = None

    @abc.abstractmethod
    def scheduler(self, account: str | None) -> Scheduler:
        """The scheduler; `account` is the identity the scheduler launches as, where the cloud needs one named
        (ProviderError where it takes none)."""


class SpotMarket(abc.ABC):
    """Capability.SPOT: `launch` honours `LaunchRequest.spot` (a spot or preemptible machine, at the profile's spot
    price), and the cloud tells its reclaim from an end: `state` reports PREEMPTED where `was_preempted` holds, so
    an attached run relaunches and resumes, and `collect` resumes a detached one."""

    provides: ClassVar[Capability] = Capability.SPOT

    @abc.abstractmethod
    def was_preempted(self, instance: Instance) -> bool:
        """Whether the cloud reclaimed this machine (a spot interruption, a preemption) rather than the run or the
        machine itself ending it."""


class BatchQueue(abc.ABC):
    """Capability.BATCH: `launch` queues `LaunchRequest.batch` as one job on a cluster's scheduler (the Instance is
    that job, `terminate` cancels all of it); the tasks write their logs to a folder the provider can read."""

    provides: ClassVar[Capability] = Capability.BATCH

    @abc.abstractmethod
    def tasks(self, instance: Instance) -> builtins.list[TaskState]:
        """Every task of the job as the scheduler and the tasks' own exit records tell it now."""

    @abc.abstractmethod
    def attempts(self, instance: Instance) -> builtins.list[TaskState]:
        """Every attempt of every task that started, with its start and end, from the scheduler's job records
        (requeued attempts included); empty where the scheduler keeps no such records."""

    @abc.abstractmethod
    def fetch_logs(self, instance: Instance, local_dir: Path) -> builtins.list[Path]:
        """Copy what the tasks wrote (runner files under `<platform>/<run id>/`, console logs) into `local_dir`;
        the files copied (new or changed)."""

    @abc.abstractmethod
    def host_record(self, instance: Instance) -> dict[str, str]:
        """Where the run's folder is (`root`, the login's `host`, `user`, `port`, `key`), for the ledger: the sweep
        pulls a dead run's logs from `<root>/runs/<run id>/logs` there (orchestrate.recover)."""

    @abc.abstractmethod
    def submitted_job(
        self, profile: Profile, run_id: str, job_id: str, platform: str
    ) -> tuple[Instance, builtins.list[str]] | None:
        """The job `job_id` (as the ledger recorded it) that run `run_id` submitted, rebuilt from the cluster for
        `collect` once its orchestrator is gone, with each task's work item label in task order; None when the
        run's folder is gone (its logs were pulled and the folder removed)."""

    @abc.abstractmethod
    def allocation_price(self, profile: Profile, nodes: int = 1) -> Profile:
        """`profile` with its prices per task allocation of `nodes` nodes (e.g. a per-GPU-hour price times the
        task's GPUs times its nodes), so that each task's elapsed time from the job records bills as one
        machine's."""

    def check_nodes(self, profile: Profile, nodes: int) -> None:
        """ProviderError, one line naming `--nodes`, where the scheduler cannot give one task `nodes` nodes of the
        profile's kind (asked before anything is submitted). A scheduler that runs a task on one node only says
        so for any `nodes` above one."""
        if nodes > 1:
            raise ProviderError(f"--nodes {nodes}: provider {getattr(self, 'name', '?')} runs each task on one node")


INTERFACES: dict[Capability, type] = {
    interface.provides: interface
    for interface in (ObjectStorage, MachineIdentity, CloudScheduler, SpotMarket, BatchQueue)
}


def offered(provider: Provider | type[Provider], capability: Capability) -> bool:
    """Whether `provider` (a class or an instance) has `capability` (for one with an interface: implements it)."""
    cls = provider if isinstance(provider, type) else type(provider)
    return capability in cls.capabilities


def require(provider: Provider | type[Provider], capability: Capability) -> type[Provider]:
    """The provider's class; ProviderError naming the providers that offer `capability` when it does not."""
    cls = provider if isinstance(provider, type) else type(provider)
    if not offered(cls, capability):
        raise ProviderError(f"provider {cls.name} has no {capability} capability (offered by {offering(capability)})")
    return cls


def object_storage(provider: Provider | type[Provider]) -> type[ObjectStorage]:
    cls = require(provider, Capability.OBJECT_STORE)
    assert issubclass(cls, ObjectStorage)  # require() checked it
    return cls


def machine_identity(provider: Provider | type[Provider]) -> type[MachineIdentity]:
    cls = require(provider, Capability.BOOT_SCRIPT)
    assert issubclass(cls, MachineIdentity)  # require() checked it
    return cls


def cloud_scheduler(provider: Provider | type[Provider]) -> type[CloudScheduler]:
    cls = require(provider, Capability.SCHEDULER)
    assert issubclass(cls, CloudScheduler)  # require() checked it
    return cls


def offering(*capabilities: Capability) -> str:
    """The registered providers that offer any of `capabilities`, for messages: `aws, gce`."""
    names = []
    for name in provider_names():
        try:
            if any(offered(load_provider_class(name), capability) for capability in capabilities):
                names.append(name)
        except ProviderError:
            continue  # a plug-in that cannot load offers nothing here
    return ", ".join(names) or "none installed"


def storage_of(provider: str) -> type[ObjectStorage]:
    """The object storage of the provider named `provider`; StorageError when it has none."""
    try:
        return object_storage(load_provider_class(provider))
    except ProviderError as error:
        raise StorageError(str(error)) from None


def check_storage_url(url: StorageURL, provider: str, given: str) -> None:
    """StorageError when `url` (the user's `given` text) is not a bucket a `provider` machine writes to."""
    storage = storage_of(provider)
    if url.scheme != storage.storage_scheme:
        raise StorageError(f"--bucket {given}: a {provider} machine writes to a {storage.storage_scheme}:// bucket")
    problem = storage.bucket_problem(url.bucket)
    if problem:
        raise StorageError(f"--bucket {given!r}: bucket name {url.bucket!r} {problem}")


def open_store(provider: str, url: StorageURL) -> ObjectStore:
    return storage_of(provider).open_store(url)


def region_of(profile: Profile) -> str:
    """The region of the profile's first zone, as its provider names regions."""
    return load_provider_class(profile.provider).region_of(profile.zones[0])
