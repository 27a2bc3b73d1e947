"""The provider interface: the few things the lifecycle needs from a place that runs machines.

A provider is one package (or module) with one class implementing `Provider`, registered under the entry-point group
`keras_cloud_bench.providers` (see `docs/providers.md`); what it offers beyond machines (buckets, boot scripts, a
scheduler) are the interfaces of `orchestrate.capabilities`. Nothing reaches past these interfaces, so a third-party
package can add a cloud without editing this project. `orchestrate.testing` holds the contract suites a provider runs
against itself.
"""

from __future__ import annotations

import abc
import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Self

from orchestrate.container_command import PROJECT_TAG as PROJECT_TAG  # the project tag, as plug-ins import it

if TYPE_CHECKING:
    from orchestrate.runspec import RunSpec
    from records.catalog import Profile


def safe_name(text: str, limit: int, allowed: str = "a-z0-9-") -> str:
    """`text` lowercased, each run of characters outside `allowed` (a regex class body) one '-', cut to `limit`, no
    '-' at either end: the one rule for cloud resource names made from other names (buckets, schedules, machines)."""
    return re.sub(f"[^{allowed}]+", "-", text.lower())[:limit].strip("-")


class ProviderError(RuntimeError):
    """A provider failure with a message fit to show the user as one line."""


class CredentialsError(ProviderError):
    """Credentials missing or unusable; raised before anything is launched."""


class UnreachableError(ProviderError):
    """The provider's API cannot be reached (network, DNS, proxy): nothing is known about the credentials."""


class CapacityError(ProviderError):
    """The zone/region has no capacity (or quota) for this machine now; the lifecycle tries the next zone."""


class Capability(enum.StrEnum):
    """What the lifecycle, the CLI and the sweep may assume about a provider's machines."""

    BILLABLE = "billable"  # launch rents a machine: the plan shows its price, the ledger its cost
    FRESH_HOST = "fresh-host"  # every launch is a new machine: host software may be installed, its host key is
    # new, its disk goes with it, and it can vanish mid-run (logs are pulled while a workload runs)
    LEFTOVERS = "leftovers"  # a crash can leave machines or per-run resources behind: the sweep asks this provider
    PERSISTENT_HOST = "persistent-host"  # the host outlives the run: the sweep recovers a dead run's containers
    RUNS_LOCALLY = "runs-locally"  # the machine is this one: commands run here instead of over SSH
    # The optional capabilities below each come with an interface in orchestrate.capabilities (its `provides`):
    # a provider has one by inheriting its interface, never by naming it (Provider.capabilities is derived).
    BOOT_SCRIPT = "boot-script"  # launch runs LaunchRequest.boot_script at first boot, with an identity that can
    # write LaunchRequest.storage_prefix and delete its own machine: detached runs (MachineIdentity)
    OBJECT_STORE = "object-store"  # buckets the machines write their logs to (ObjectStorage)
    SCHEDULER = "scheduler"  # the cloud's scheduler launches machines on a cron schedule (CloudScheduler)
    SPOT = "spot"  # spot or preemptible machines, and a reclaim told from an end (SpotMarket)
    BATCH = "batch"  # a batch scheduler runs the work items itself: launch queues LaunchRequest.batch as one job
    # (a Slurm job array), which the lifecycle follows instead of running containers over SSH (BatchQueue)


# The capabilities that come with an interface (orchestrate.capabilities), so are derived from a provider's bases.
WITH_INTERFACE = frozenset(
    {Capability.BOOT_SCRIPT, Capability.OBJECT_STORE, Capability.SCHEDULER, Capability.SPOT, Capability.BATCH}
)


class InstanceState(enum.StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    PREEMPTED = "preempted"  # spot/preemptible reclaim: the lifecycle relaunches and resumes
    TERMINATED = "terminated"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class SSHTarget:
    host: str
    user: str | None = None
    port: int | None = None
    key_filename: str | None = None  # None: let ~/.ssh/config and the agent decide

    def display(self) -> str:
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"{user}{self.host}{port}"


@dataclass(frozen=True)
class TaskState:
    """One batch task as the scheduler (and the task's own exit record) reports it."""

    index: int
    state: str  # one of TASK_STATES
    exit_code: int | None = None  # once ended
    started_at: float | None = None  # epoch seconds, of the latest attempt
    ended_at: float | None = None
    restarts: int = 0  # times the scheduler requeued it (a preemption, `scontrol requeue`)
    reason: str = ""  # the scheduler's word for a pending or failed task
    # The work item's own exit code once it ended, whatever the scheduler did with the task since (a requeue of an
    # ended task runs nothing again); None while the item has not ended.
    item_exit_code: int | None = None


TASK_PENDING, TASK_RUNNING, TASK_COMPLETE, TASK_FAILED, TASK_CANCELLED = (
    "pending",
    "running",
    "complete",
    "failed",
    "cancelled",
)
TASK_STATES = (TASK_PENDING, TASK_RUNNING, TASK_COMPLETE, TASK_FAILED, TASK_CANCELLED)
TASK_ENDED = frozenset({TASK_COMPLETE, TASK_FAILED, TASK_CANCELLED})


@dataclass(frozen=True)
class LaunchRequest:
    run_id: str
    profile: Profile
    zone: str | None  # one of profile.zones (None for providers without zones)
    spot: bool
    max_lifetime_s: int  # the instance must end itself after this, even if the orchestrator is gone
    tags: dict[str, str] = field(default_factory=dict)  # project, run-id, owner, expiry (epoch seconds)
    # Detached runs (Capability.BOOT_SCRIPT): the script the machine runs at first boot instead of being reached
    # over SSH (no SSH key or ingress is set up), and the only storage it may write: `s3://b/<prefix>runs/<id>/`.
    boot_script: str | None = None
    storage_prefix: str | None = None
    # Capability.BATCH: the run to queue as one job (required by such a provider): one task per item of its spec,
    # each running the spec's container; the spec's payload, carried beside the run's logs before the job is queued
    batch: RunSpec | None = None


@dataclass
class Instance:
    provider: str
    instance_id: str
    zone: str | None
    ssh: SSHTarget | None  # filled once the provider knows the address
    spot: bool = False
    launched_at: float | None = None  # epoch seconds, as the provider reports it where it can
    tags: dict[str, str] = field(default_factory=dict)
    # The provider's own notes between launch and terminate (e.g. the SSH login its image uses); the lifecycle
    # passes them back untouched and never reads them. Strings only, so an Instance stays plain data.
    private: dict[str, str] = field(default_factory=dict)


def _capability_set(value: object) -> bool:
    return isinstance(value, frozenset | set) and all(isinstance(c, Capability) for c in value)


class Provider(abc.ABC):
    """One place that runs machines: a cloud, an SSH host, or this machine.

    Every method that changes something must be idempotent: teardown may run twice (Ctrl-C during teardown,
    then the sweep) and must not fail the second time.
    """

    name: ClassVar[str]
    # What the provider's machines are: the capabilities that come with no interface, declared here. A cloud by
    # default; hosts that exist anyway (ssh, local) declare PERSISTENT_HOST instead.
    host_capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.BILLABLE, Capability.FRESH_HOST, Capability.LEFTOVERS}
    )
    # Derived when the class is made (__init_subclass__), never declared: `host_capabilities` and the capability of
    # each interface of orchestrate.capabilities the class inherits.
    capabilities: ClassVar[frozenset[Capability]] = host_capabilities
    # The `--provider-setting` keys `from_settings` accepts, listed by `orchestrate providers`; declaring `host`,
    # `port` or `identity_file` lets the CLI's --host, --port, --identity reach this provider too.
    settings: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        implemented = frozenset(
            k.__dict__["provides"] for k in cls.__mro__ if isinstance(k.__dict__.get("provides"), Capability)
        )
        declared = cls.__dict__.get("capabilities", cls.host_capabilities)
        if not _capability_set(declared):
            cls.capabilities = declared  # a wrong declaration: the registry names it in one line, as a broken plug-in
            return
        # one that declares the whole set, as plug-ins once did, must agree with its interfaces; none may claim one
        # without its interface (the registry reports the class as broken, in one line)
        claimed = frozenset(declared) & WITH_INTERFACE
        wrong = sorted(claimed ^ implemented if "capabilities" in cls.__dict__ else claimed - implemented)
        if wrong:
            raise TypeError(
                f"{cls.__name__}: capabilities {', '.join(wrong)} come from implementing their interfaces "
                "(orchestrate.capabilities), and its declared capabilities disagree with the interfaces it inherits"
            )
        cls.host_capabilities = frozenset(declared) - WITH_INTERFACE
        cls.capabilities = cls.host_capabilities | implemented

    def has(self, capability: Capability) -> bool:
        return capability in self.capabilities

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> Self:
        """Build the provider from the user's settings (CLI `--provider-setting KEY=VALUE`, e.g. host, port).

        Raise ProviderError naming an unknown or bad key. Providers that need no settings keep this default.
        """
        if settings:
            raise ProviderError(f"provider '{cls.name}' takes no settings; got {', '.join(sorted(settings))}")
        return cls()

    @classmethod
    def region_of(cls, zone: str) -> str:
        """The region a zone of this provider is in (`us-east-1a` -> `us-east-1`); the zone itself by default."""
        return zone

    def describe(self) -> str:
        """Where this provider runs things, in a few words for the plan (e.g. `me@box:2222`, `aws EC2`)."""
        return self.name

    def validate_profile(self, profile: Profile) -> None:  # noqa: B027 - optional hook, nothing by default
        """Raise ProviderError when this provider cannot use `profile` (e.g. no machine type); no I/O."""

    @abc.abstractmethod
    def check_credentials(self) -> None:
        """Raise CredentialsError with a clear message when the credentials chain has nothing usable, and
        UnreachableError when the API cannot be reached to tell."""

    @abc.abstractmethod
    def launch(self, request: LaunchRequest) -> Instance:
        """Start one machine in request.zone. Raise CapacityError when that zone cannot serve it now."""

    @abc.abstractmethod
    def wait_until_running(self, instance: Instance, timeout_s: float) -> Instance:
        """Block until the machine runs and has an SSH address; return the instance with `ssh` filled."""

    @abc.abstractmethod
    def state(self, instance: Instance) -> InstanceState:
        """The machine's state now; PREEMPTED when the provider reclaimed it."""

    @abc.abstractmethod
    def terminate(self, instance: Instance) -> None:
        """Stop billing for the machine and delete what was created for it. Idempotent."""

    @abc.abstractmethod
    def list_instances(self) -> list[Instance]:
        """Every live machine this project launched (found by its project tag/label), for the sweep."""

    def ended_at(self, instance: Instance) -> float | None:
        """When the machine ended without this project terminating it (it ended itself at its max lifetime, was
        powered off, or was deleted elsewhere), as the provider records it, in epoch seconds; None while it runs,
        or when the provider no longer knows it. The sweep bills such a machine up to this time."""
        return None

    def release_run(self, run_id: str) -> None:  # noqa: B027 - optional hook, nothing to do by default
        """Delete per-run resources that outlive instances (key pairs, security groups). Idempotent."""

    def leftover_runs(self) -> dict[str, dict[str, str]]:
        """Run ids that still hold per-run resources (even with no instance left), each with the tags found
        on them (empty for untagged ones such as local key files); the sweep releases the dead runs' ones."""
        return {}
