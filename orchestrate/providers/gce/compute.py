"""Google Compute Engine: standard and Spot VMs with guest accelerators, through google-cloud-compute (REST).

Credentials come from Application Default Credentials (`gcloud auth application-default login`,
`GOOGLE_APPLICATION_CREDENTIALS`, the metadata server); the project from `GOOGLE_CLOUD_PROJECT` or the ADC.
`KCB_GCE_API_ENDPOINT` points the clients at another Compute endpoint (Private Service Connect, a test
server).

Each VM is labelled project/run-id/owner/expiry (label values lowercased; the exact tags ride along in the
`kcb-tags` metadata item), gets the run's SSH key through `ssh-keys` metadata, never live-migrates
(onHostMaintenance=TERMINATE: a migration would perturb the timings) and deletes itself after the request's
`max_lifetime_s` (scheduling.maxRunDuration with instanceTerminationAction=DELETE, for standard and Spot VMs).

Profile fields: `machine_type`, `accelerator` (a GCE accelerator type such as `nvidia-tesla-t4`),
`accelerator_count`, `zones`, `image` (`projects/P/global/images/family/F` or `.../images/NAME`; required for
GPU profiles, which need an image with the NVIDIA driver), `ssh_user`. Profile `extra`: `disk_gb`,
`min_cpu_platform` (e.g. "Intel Skylake"), `gpu_attached = "true"` for machine types that come with their GPUs
(A2, A3, G2: no guestAccelerators are requested). Provider setting (`--provider-setting`): `ssh_address` (see
`orchestrate.providers.cloud.SSHAddress`).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import secrets
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

import google.auth
import requests
from google.api_core import exceptions as api_exceptions
from google.api_core.client_options import ClientOptions
from google.api_core.retry import Retry, if_transient_error
from google.auth.exceptions import DefaultCredentialsError, GoogleAuthError, TransportError
from google.auth.transport.requests import Request

from orchestrate.capabilities import (
    CloudScheduler,
    MachineIdentity,
    ObjectStorage,
    ObjectStore,
    Scheduler,
    SpotMarket,
)
from orchestrate.provider import (
    PROJECT_TAG,
    CapacityError,
    CredentialsError,
    Instance,
    InstanceState,
    LaunchRequest,
    Provider,
    ProviderError,
    SSHTarget,
    UnreachableError,
    safe_name,
)
from orchestrate.providers.cloud import (
    SSHAddress,
    ensure_run_key,
    forget_run_key,
    local_key_runs,
    poll_intervals,
    run_key_path,
    validate_disk_gb,
)
from orchestrate.providers.gce import storage
from orchestrate.providers.gce.scheduler import GCEScheduler

if TYPE_CHECKING:
    from google.cloud import compute_v1

    from orchestrate.storage import StorageURL
    from records.catalog import Profile


class _ImportedOnUse:
    """A module imported at its first attribute access: google.cloud.compute_v1's types take 1.1 s to import, which
    every command that lists the providers or dry-runs a profile would pay without calling Compute Engine once."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)


if not TYPE_CHECKING:
    compute_v1 = _ImportedOnUse("google.cloud.compute_v1")

API_ENDPOINT_ENV = "KCB_GCE_API_ENDPOINT"
COMPUTE_SCOPE = "https://www.googleapis.com/auth/compute"
CPU_IMAGE = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts"
EXTRA_SETTINGS = frozenset({"disk_gb", "min_cpu_platform", "gpu_attached"})
TAGS_METADATA_KEY = "kcb-tags"
DEFAULT_SSH_USER = "kcb"
IMAGE_RE = re.compile(r"projects/([a-z0-9-]+)/global/images/(?:family/)?([a-z0-9-]+)")
ZONE_RE = re.compile(r"[a-z]+-[a-z]+\d+-[a-z]")

# Operation error codes (and synchronous error reasons) that mean "this zone cannot serve it now".
CAPACITY_CODES = frozenset(
    {
        "ZONE_RESOURCE_POOL_EXHAUSTED",
        "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
        "RESOURCE_POOL_EXHAUSTED",
        "QUOTA_EXCEEDED",
        "quotaExceeded",
        "resourceExhausted",
        "UNSUPPORTED_OPERATION",  # e.g. the accelerator is not offered in this zone for this machine family
    }
)
# Throttled (429), failing (500, 503) or unreachable calls are retried with exponential backoff; inserts carry
# a requestId, so a retried insert never creates a second VM.
RETRY = Retry(
    predicate=if_transient_error,
    initial=1.0,
    maximum=30.0,
    multiplier=2.0,
    timeout=300.0,
)
OPERATION_TIMEOUT_S = 600.0
# Detached runs: the VM runs as this service account (setting `service_account`, default kcb-runner@<project>),
# which may delete only its own VM: the orchestrator grants it this custom role on that one instance
# (instances.setIamPolicy). Its storage grant is the bucket's (docs/clouds.md).
DEFAULT_SERVICE_ACCOUNT = "kcb-runner@{project}.iam.gserviceaccount.com"
DEFAULT_SELF_DELETE_ROLE = "projects/{project}/roles/kcbSelfDelete"
VM_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]  # IAM, not scopes, limits what the VM can do


def label_value(value: str) -> str:
    """A GCE label value: lowercase letters, digits, `_` and `-`, at most 63 characters."""
    return re.sub(r"[^a-z0-9_-]", "_", value.lower())[:63]


def instance_name(run_id: str) -> str:
    """`kcb-<run id>-<6 hex>`: unique per launch (a relaunch after preemption gets a new name)."""
    return f"kcb-{safe_name(run_id, 48)}-{secrets.token_hex(3)}"


@contextlib.contextmanager
def _calling(what: str) -> Iterator[None]:
    """Google API and network errors as ProviderError naming what was being done: the lifecycle and the sweep
    report those and go on tearing down."""
    try:
        yield
    except api_exceptions.GoogleAPICallError as error:
        raise ProviderError(f"gce: {what} failed: {_error_message(error)}") from None
    except (GoogleAuthError, requests.RequestException) as error:
        raise ProviderError(f"gce: {what} failed: {error}") from None


def _error_message(error: api_exceptions.GoogleAPICallError) -> str:
    """Google's message, without the request line the REST transport puts in front of it."""
    messages = [item["message"] for item in error.errors or [] if isinstance(item, dict) and item.get("message")]
    return "; ".join(messages) or str(error.message)


def _error_codes(error: api_exceptions.GoogleAPICallError) -> set[str]:
    codes = {item.get("reason", "") for item in error.errors or [] if isinstance(item, dict)}
    codes |= {code for code in CAPACITY_CODES if code in str(error.message)}
    return codes


class GCEProvider(Provider, ObjectStorage, MachineIdentity, CloudScheduler, SpotMarket):
    name: ClassVar[str] = "gce"
    settings: ClassVar[tuple[str, ...]] = ("ssh_address", "service_account", "self_delete_role")
    storage_scheme: ClassVar[str] = "gs"
    boot_script_limit: ClassVar[int] = 256 * 1024  # bytes of one metadata value (startup-script)
    agent_source: ClassVar[Path] = Path(__file__).with_name("agent.py")
    ends_itself: ClassVar[bool] = True  # scheduling.maxRunDuration deletes the VM
    default_disk_gb: ClassVar[float] = 10.0  # the default Ubuntu image's boot disk

    def __init__(
        self,
        ssh_address: SSHAddress | None = None,
        service_account: str | None = None,
        self_delete_role: str | None = None,
    ) -> None:
        self._ssh_address = ssh_address or SSHAddress()
        self._service_account = service_account
        self._self_delete_role = self_delete_role
        self._credentials: Any = None
        self._project: str | None = None
        self._clients: dict[str, Any] = {}

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> Self:
        identity = {key: settings[key] for key in ("service_account", "self_delete_role") if key in settings}
        if identity.get("service_account", "x@y.iam.gserviceaccount.com").count("@") != 1:
            account = identity["service_account"]
            raise ProviderError(f"provider 'gce': setting service_account={account!r} is not an email")
        ssh = {key: value for key, value in settings.items() if key not in identity}
        return cls(ssh_address=SSHAddress.from_settings(cls.name, ssh), **identity)

    @classmethod
    def region_of(cls, zone: str) -> str:
        """`us-central1-a` -> `us-central1` (zone names are the region plus a suffix)."""
        return zone.rsplit("-", 1)[0]

    # -- capabilities: object storage, scheduler ---------------------------------------------------------------

    @classmethod
    def bucket_problem(cls, bucket: str) -> str | None:
        return storage.bucket_problem(bucket)

    @classmethod
    def open_store(cls, url: StorageURL) -> ObjectStore:
        return storage.GCSStore(url)

    @classmethod
    def storage_account(cls, region: str) -> str:
        return storage.account_name(region)

    @classmethod
    def agent_endpoints(cls, environ: Mapping[str, str]) -> dict[str, str]:
        found = {"gcs": environ.get(storage.GCS_ENDPOINT_ENV), "compute": environ.get(API_ENDPOINT_ENV)}
        return {key: value for key, value in found.items() if value}

    def scheduler(self, account: str | None) -> Scheduler:
        return GCEScheduler(self, account)

    def vm_identity(self) -> tuple[str, str]:
        """(service account, self-delete role) a detached run's VM gets."""
        project = self.project_id()
        account = self._service_account or DEFAULT_SERVICE_ACCOUNT.format(project=project)
        return account, self._self_delete_role or DEFAULT_SELF_DELETE_ROLE.format(project=project)

    def describe(self) -> str:
        return f"gce Compute Engine, SSH to {self._ssh_address.template}"

    # -- validation and credentials ------------------------------------------------------------------------

    def validate_profile(self, profile: Profile) -> None:
        """Raise ProviderError naming the field when the profile cannot be launched on Compute Engine."""
        if not profile.machine_type:
            raise ProviderError(f"profile {profile.name}: machine_type is required for gce")
        if not profile.zones:
            raise ProviderError(f"profile {profile.name}: zones is required for gce (e.g. ['us-central1-a'])")
        for zone in profile.zones:
            if not ZONE_RE.fullmatch(zone):
                raise ProviderError(f"profile {profile.name}: zones entry {zone!r} is not a GCE zone")
        if profile.has_gpu and not profile.image:
            raise ProviderError(
                f"profile {profile.name}: image is required for GPU profiles on gce "
                "(an image family with the NVIDIA driver, e.g. a Deep Learning VM family)"
            )
        if profile.image and not IMAGE_RE.fullmatch(profile.image):
            raise ProviderError(
                f"profile {profile.name}: image {profile.image!r} is not "
                "projects/P/global/images/family/F or projects/P/global/images/NAME"
            )
        unknown = sorted(set(profile.extra) - EXTRA_SETTINGS)
        if unknown:
            raise ProviderError(
                f"profile {profile.name}: unknown extra setting(s) for gce: {', '.join(unknown)} "
                f"(known: {', '.join(sorted(EXTRA_SETTINGS))})"
            )
        if profile.extra.get("gpu_attached", "false") not in ("true", "false"):
            raise ProviderError(f'profile {profile.name}: extra.gpu_attached must be "true" or "false"')
        validate_disk_gb(profile)

    def check_credentials(self) -> None:
        credentials, project = self.application_default_credentials()
        if not project:
            raise CredentialsError(
                "no Google Cloud project: set GOOGLE_CLOUD_PROJECT or run `gcloud config set project P`"
            )
        try:
            credentials.refresh(Request())
        except TransportError as error:
            raise UnreachableError(f"cannot reach Google's token endpoint, credentials not checked: {error}") from None
        except GoogleAuthError as error:
            raise CredentialsError(f"Google credentials unusable: {error}") from None

    def application_default_credentials(self) -> tuple[Any, str | None]:
        if self._credentials is None:
            try:
                self._credentials, self._project = google.auth.default(scopes=[COMPUTE_SCOPE])
            except DefaultCredentialsError:
                raise CredentialsError(
                    "no Google credentials found: run `gcloud auth application-default login` "
                    "or set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file"
                ) from None
        return self._credentials, self._project

    def project_id(self) -> str:
        _, project = self.application_default_credentials()
        if not project:
            raise CredentialsError("no Google Cloud project: set GOOGLE_CLOUD_PROJECT")
        return project

    def _client(self, kind: type) -> Any:
        key = kind.__name__
        if key not in self._clients:
            credentials, _ = self.application_default_credentials()
            endpoint = os.environ.get(API_ENDPOINT_ENV)
            options = ClientOptions(api_endpoint=endpoint) if endpoint else None
            self._clients[key] = kind(transport="rest", credentials=credentials, client_options=options)
        return self._clients[key]

    # -- launch ----------------------------------------------------------------------------------------------

    def launch(self, request: LaunchRequest) -> Instance:
        profile = request.profile
        self.validate_profile(profile)
        if request.zone not in profile.zones:
            raise ProviderError(f"profile {profile.name}: zone {request.zone!r} is not one of {profile.zones}")
        project = self.project_id()
        tags = {**request.tags, "project": PROJECT_TAG, "run-id": request.run_id}
        resource = self.instance_resource(request, self.resolve_image(profile), tags)
        insert = compute_v1.InsertInstanceRequest(
            project=project, zone=request.zone, instance_resource=resource, request_id=str(uuid.uuid4())
        )
        where = f"gce {profile.machine_type} {'spot' if request.spot else 'standard'} in {request.zone}"
        try:
            operation = self._client(compute_v1.InstancesClient).insert_unary(request=insert, retry=RETRY)
        except api_exceptions.GoogleAPICallError as error:
            raise self._launch_error(where, _error_codes(error), _error_message(error)) from None
        except (GoogleAuthError, requests.RequestException) as error:
            raise ProviderError(f"{where}: insert failed: {error}") from None
        finished = self._wait_operation(request.zone, operation.name, OPERATION_TIMEOUT_S)
        if finished.error.errors:
            self._delete_quietly(request.zone, resource.name)  # a failed insert may still leave a VM behind
            codes = {item.code for item in finished.error.errors}
            message = "; ".join(item.message for item in finished.error.errors)
            raise self._launch_error(where, codes, message)
        if request.boot_script is not None:
            self._grant_self_delete(request.zone, resource.name)
        return Instance(
            provider=self.name,
            instance_id=resource.name,
            zone=request.zone,
            ssh=None,
            spot=request.spot,
            launched_at=time.time(),
            tags=tags,
            private={"ssh_user": profile.ssh_user or DEFAULT_SSH_USER},
        )

    def _grant_self_delete(self, zone: str, name: str) -> None:
        """Let the VM's service account delete this VM, and only it: a binding on the instance's own policy."""
        account, role = self.vm_identity()
        policy = compute_v1.Policy(bindings=[compute_v1.Binding(role=role, members=[f"serviceAccount:{account}"])])
        try:
            with _calling(f"granting {account} {role} on {name}"):
                self._client(compute_v1.InstancesClient).set_iam_policy(
                    project=self.project_id(),
                    zone=zone,
                    resource=name,
                    zone_set_policy_request_resource=compute_v1.ZoneSetPolicyRequest(policy=policy),
                    retry=RETRY,
                )
        except ProviderError:
            self._delete_quietly(zone, name)  # a VM that cannot delete itself would wait for its max lifetime
            raise

    def instance_resource(
        self, request: LaunchRequest, image: str, tags: dict[str, str], name: str | None = None
    ) -> compute_v1.Instance:
        """The instances.insert resource of a launch (the scheduler's jobs insert the same, under their own name)."""
        profile, zone = request.profile, request.zone
        metadata = [compute_v1.Items(key=TAGS_METADATA_KEY, value=json.dumps(tags, sort_keys=True))]
        accounts = []
        if request.boot_script is None:
            _, public_key = ensure_run_key(request.run_id)
            user = profile.ssh_user or DEFAULT_SSH_USER
            metadata.append(compute_v1.Items(key="ssh-keys", value=f"{user}:{public_key} kcb-{request.run_id}"))
        else:  # a detached VM is never reached over SSH; it runs the script as its service account
            metadata.append(compute_v1.Items(key="startup-script", value=request.boot_script))
            accounts.append(compute_v1.ServiceAccount(email=self.vm_identity()[0], scopes=VM_SCOPES))
        accelerators = []
        if profile.has_gpu:  # Deep Learning VM images install the driver at first boot when asked
            metadata.append(compute_v1.Items(key="install-nvidia-driver", value="True"))
        if profile.has_gpu and profile.extra.get("gpu_attached") != "true":
            accelerators.append(
                compute_v1.AcceleratorConfig(
                    accelerator_type=f"zones/{zone}/acceleratorTypes/{profile.accelerator}",
                    accelerator_count=profile.accelerator_count,
                )
            )
        disk = compute_v1.AttachedDiskInitializeParams(source_image=image)
        if "disk_gb" in profile.extra:
            disk.disk_size_gb = int(profile.extra["disk_gb"])
        return compute_v1.Instance(
            name=name or instance_name(request.run_id),
            min_cpu_platform=profile.extra.get("min_cpu_platform"),
            machine_type=f"zones/{zone}/machineTypes/{profile.machine_type}",
            disks=[compute_v1.AttachedDisk(boot=True, auto_delete=True, initialize_params=disk)],
            network_interfaces=[
                compute_v1.NetworkInterface(
                    network="global/networks/default",
                    access_configs=[compute_v1.AccessConfig(name="External NAT", type_="ONE_TO_ONE_NAT")],
                )
            ],
            guest_accelerators=accelerators,
            scheduling=compute_v1.Scheduling(
                provisioning_model="SPOT" if request.spot else "STANDARD",
                on_host_maintenance="TERMINATE",
                automatic_restart=False,
                instance_termination_action="DELETE",
                max_run_duration=compute_v1.Duration(seconds=request.max_lifetime_s),
            ),
            labels={key: label_value(value) for key, value in tags.items()},
            metadata=compute_v1.Metadata(items=metadata),
            service_accounts=accounts,
        )

    def resolve_image(self, profile: Profile) -> str:
        """The image's self link; a family is resolved here so a bad name fails before anything starts."""
        image = profile.image or CPU_IMAGE
        match = IMAGE_RE.fullmatch(image)
        if match is None or "/family/" not in image:
            return image
        with _calling(f"profile {profile.name}: looking up image {image}"):
            found = self._client(compute_v1.ImagesClient).get_from_family(
                project=match.group(1), family=match.group(2), retry=RETRY
            )
        return found.self_link

    @staticmethod
    def _launch_error(where: str, codes: set[str], message: str) -> ProviderError:
        if codes & {"QUOTA_EXCEEDED", "quotaExceeded"}:
            return CapacityError(
                f"{where}: quota exceeded: {message} - ask for more in IAM & Admin > Quotas "
                "(GPUS_ALL_REGIONS and the per-region accelerator quota)"
            )
        if codes & CAPACITY_CODES:
            return CapacityError(f"{where}: no capacity ({', '.join(sorted(codes))}): {message}")
        return ProviderError(f"{where}: insert failed ({', '.join(sorted(codes)) or 'error'}): {message}")

    def _wait_operation(self, zone: str, name: str, timeout_s: float) -> compute_v1.Operation:
        """Block on zoneOperations.wait (it returns when DONE or after about two minutes) until DONE."""
        deadline = time.monotonic() + timeout_s
        operations = self._client(compute_v1.ZoneOperationsClient)
        while True:
            with _calling(f"waiting for operation {name}"):
                operation = operations.wait(project=self.project_id(), zone=zone, operation=name, retry=RETRY)
            if operation.status == compute_v1.Operation.Status.DONE:
                return operation
            if time.monotonic() > deadline:
                raise ProviderError(f"gce: operation {name} in {zone} not done after {timeout_s:.0f}s")

    # -- running instances -----------------------------------------------------------------------------------

    def wait_until_running(self, instance: Instance, timeout_s: float) -> Instance:
        deadline = time.monotonic() + timeout_s
        for interval in poll_intervals():
            found = self._get(instance)
            status = found.status if found else "gone"
            if found is not None and status == "RUNNING":
                target = self._ssh_target(instance, found)
                if target is not None:
                    return replace(instance, ssh=target)
            elif status not in ("PROVISIONING", "STAGING"):
                raise ProviderError(f"gce: {instance.instance_id} ended before it ran ({status})")
            if time.monotonic() > deadline:
                raise ProviderError(f"gce: {instance.instance_id} not reachable after {timeout_s:.0f}s ({status})")
            time.sleep(interval)
        raise AssertionError("poll_intervals never ends")

    def _ssh_target(self, instance: Instance, found: compute_v1.Instance) -> SSHTarget | None:
        interface = found.network_interfaces[0] if found.network_interfaces else None
        private_ip = interface.network_i_p if interface else None
        configs = interface.access_configs if interface else []
        public_ip = configs[0].nat_i_p if configs else None
        host, port = self._ssh_address.resolve(public_ip, private_ip)
        if not host:
            return None
        user = instance.private.get("ssh_user", DEFAULT_SSH_USER)
        key = run_key_path(instance.tags["run-id"])
        return SSHTarget(host=host, user=user, port=port, key_filename=str(key))

    def state(self, instance: Instance) -> InstanceState:
        found = self._get(instance)
        status = found.status if found else "gone"
        if status in ("PROVISIONING", "STAGING"):
            return InstanceState.PENDING
        if status == "RUNNING":
            return InstanceState.RUNNING
        if status in ("STOPPING", "TERMINATED", "SUSPENDING", "SUSPENDED", "gone"):
            return InstanceState.PREEMPTED if self.was_preempted(instance) else InstanceState.TERMINATED
        return InstanceState.UNKNOWN

    def ended_at(self, instance: Instance) -> float | None:
        """A stopped VM's `lastStopTimestamp`; for a deleted VM, the `endTime` of its finished `delete` operation
        (the zone keeps its operations after the VM is gone). None where neither exists: a VM that deleted itself
        at its `maxRunDuration` leaves no delete operation."""
        found = self._get(instance)
        if found is None:
            return self._deleted_at(instance)
        if found.status != "TERMINATED" or not found.last_stop_timestamp:
            return None
        return _epoch(found.last_stop_timestamp)

    def _deleted_at(self, instance: Instance) -> float | None:
        ends = [
            _epoch(operation.end_time)
            for operation in self._operations_on(instance, "delete")
            if operation.status == compute_v1.Operation.Status.DONE and operation.end_time
        ]
        return max((end for end in ends if end is not None), default=None)

    def was_preempted(self, instance: Instance) -> bool:
        """Whether Compute Engine recorded a `compute.instances.preempted` operation for this VM.

        That operation is the documented way to tell a preemption from a stop or a deletion.
        """
        return bool(self._operations_on(instance, "compute.instances.preempted"))

    def _operations_on(self, instance: Instance, kind: str) -> list[compute_v1.Operation]:
        """The zone's operations of one type whose target is this VM."""
        request = compute_v1.ListZoneOperationsRequest(
            project=self.project_id(), zone=instance.zone, filter=f'operationType = "{kind}"'
        )
        suffix = f"/zones/{instance.zone}/instances/{instance.instance_id}"
        with _calling(f"listing the operations of {instance.zone}"):
            operations = self._client(compute_v1.ZoneOperationsClient).list(request=request, retry=RETRY)
            return [operation for operation in operations if operation.target_link.endswith(suffix)]

    def _get(self, instance: Instance) -> compute_v1.Instance | None:
        """The VM as Compute Engine reports it; None once it is deleted."""
        with _calling(f"reading {instance.instance_id}"):
            try:
                return self._client(compute_v1.InstancesClient).get(
                    project=self.project_id(), zone=instance.zone, instance=instance.instance_id, retry=RETRY
                )
            except api_exceptions.NotFound:
                return None

    # -- teardown and the sweep ------------------------------------------------------------------------------

    def terminate(self, instance: Instance) -> None:
        with _calling(f"deleting {instance.instance_id}"):
            try:
                operation = self._client(compute_v1.InstancesClient).delete_unary(
                    project=self.project_id(), zone=instance.zone, instance=instance.instance_id, retry=RETRY
                )
            except api_exceptions.NotFound:
                return
        finished = self._wait_operation(instance.zone or "", operation.name, OPERATION_TIMEOUT_S)
        if finished.error.errors and self._get(instance) is not None:
            message = "; ".join(item.message for item in finished.error.errors)
            raise ProviderError(f"gce: cannot delete {instance.instance_id}: {message}")

    def _delete_quietly(self, zone: str, name: str) -> None:
        instance = Instance(provider=self.name, instance_id=name, zone=zone, ssh=None)
        # The insert error is what the caller needs; the sweep finds anything left behind by its labels.
        with contextlib.suppress(ProviderError):
            self.terminate(instance)

    def list_instances(self) -> list[Instance]:
        request = compute_v1.AggregatedListInstancesRequest(
            project=self.project_id(), filter=f'labels.project = "{PROJECT_TAG}"'
        )
        found: list[Instance] = []
        with _calling("listing instances"):
            for _, scoped in self._client(compute_v1.InstancesClient).aggregated_list(request=request, retry=RETRY):
                found.extend(self._as_instance(item) for item in scoped.instances)
        return found

    def _as_instance(self, found: compute_v1.Instance) -> Instance:
        tags = dict(found.labels)
        for item in found.metadata.items:
            if item.key == TAGS_METADATA_KEY:
                tags = json.loads(item.value)
        configs = found.network_interfaces[0].access_configs if found.network_interfaces else []
        public_ip = configs[0].nat_i_p if configs else ""
        return Instance(
            provider=self.name,
            instance_id=found.name,
            zone=found.zone.rsplit("/", 1)[-1],
            ssh=SSHTarget(host=public_ip) if public_ip else None,
            spot=found.scheduling.provisioning_model == "SPOT",
            launched_at=_epoch(found.creation_timestamp),
            tags=tags,
        )

    def release_run(self, run_id: str) -> None:
        """Nothing outlives a GCE VM but the run's local SSH key."""
        forget_run_key(run_id)

    def leftover_runs(self) -> dict[str, dict[str, str]]:
        return {run_id: {} for run_id in local_key_runs()}


def _epoch(rfc3339: str) -> float | None:
    try:
        return datetime.fromisoformat(rfc3339).timestamp()
    except ValueError:
        return None
