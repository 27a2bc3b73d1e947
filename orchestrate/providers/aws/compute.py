"""Amazon EC2: on-demand and spot instances, one key pair and one security group per run and region.

Credentials come from boto3's standard chain (environment, `AWS_PROFILE`, SSO, instance roles); the
endpoint can be redirected with boto3's own `AWS_ENDPOINT_URL` / `AWS_ENDPOINT_URL_EC2` variables (VPC
endpoints, LocalStack, moto). Every resource carries the project, run-id, owner and expiry tags, so the sweep
finds it even when the orchestrator died before writing the ledger. The instance powers itself off after
`max_lifetime_s` (user data runs `shutdown -h +N`) and powering off terminates it
(`InstanceInitiatedShutdownBehavior=terminate`).

Profile `extra` settings: `disk_gb` (root volume size). Provider setting (`--provider-setting`): `ssh_address`
(see `orchestrate.providers.cloud.SSHAddress`).
Environment: `KCB_SSH_INGRESS_CIDR`, the CIDR allowed to reach port 22 (default: this machine's public
address as https://checkip.amazonaws.com reports it); `KCB_AWS_REGIONS`, the regions the sweep searches
(default: every region enabled for the account).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import math
import os
import re
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError, NoCredentialsError, WaiterError
from botocore.exceptions import ConnectionError as BotoConnectionError

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
)
from orchestrate.providers.aws import storage
from orchestrate.providers.aws.iam import EC2_TRUST, ROLE_PATH, run_role_name, run_role_policy
from orchestrate.providers.aws.scheduler import AWSScheduler
from orchestrate.providers.cloud import (
    SSHAddress,
    ensure_run_key,
    forget_run_key,
    local_key_runs,
    poll_intervals,
    run_key_path,
    validate_disk_gb,
)

if TYPE_CHECKING:
    from orchestrate.storage import StorageURL
    from records.catalog import Profile

CHECKIP_URL = "https://checkip.amazonaws.com"
INGRESS_CIDR_ENV = "KCB_SSH_INGRESS_CIDR"
REGIONS_ENV = "KCB_AWS_REGIONS"  # regions the sweep searches (default: all enabled)
EXTRA_SETTINGS = frozenset({"disk_gb"})

# AMIs when the profile names none: the Deep Learning Base AMI has the NVIDIA driver, Docker and the NVIDIA
# container toolkit; CPU hosts get plain Ubuntu (the lifecycle installs Docker).
GPU_AMI_PARAMETER = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
CPU_AMI_PARAMETER = "/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/ebs-gp2/ami-id"
DEFAULT_SSH_USER = "ubuntu"  # the login of the default AMIs
NO_ADDRESS_HINT = (
    ": it has no address to SSH to; give its subnet public IPs, or pass --provider-setting ssh_address={private_ip} "
    "when this machine is inside the VPC"
)
SSM_PREFIX = "resolve:ssm:"  # EC2's own syntax for "the AMI id this SSM parameter holds"

# RunInstances errors that mean "not here, not now": the lifecycle tries the profile's next zone.
CAPACITY_ERRORS = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientCapacity",
        "InsufficientHostCapacity",
        "InsufficientReservedInstanceCapacity",
        "Unsupported",  # the instance type is not offered in this availability zone
        "SpotMaxPriceTooLow",
    }
)
QUOTA_ERRORS = frozenset({"VcpuLimitExceeded", "MaxSpotInstanceCountExceeded", "InstanceLimitExceeded"})
PREEMPTION_REASONS = frozenset({"Server.SpotInstanceTermination", "Server.SpotInstanceShutdown"})


def _reclaimed(described: Mapping[str, Any]) -> bool:
    return described.get("StateReason", {}).get("Code") in PREEMPTION_REASONS


LIVE_STATES = ("pending", "running", "shutting-down", "stopping", "stopped")
# botocore retries throttling (RequestLimitExceeded) and 5xx answers with exponential backoff and jitter.
RETRY_CONFIG = Config(retries={"mode": "standard", "max_attempts": 4})
# Detached runs: each run's machine gets its own role (and instance profile) under this IAM path, allowed to write
# its run's objects and to terminate instances tagged with its run id, nothing else (docs/clouds.md).
ROLE_POLICY_NAME = "detached-run"
PROFILE_PROPAGATION_S = 90.0  # a new instance profile takes a few seconds before RunInstances accepts it


def self_destruct_minutes(max_lifetime_s: int) -> int:
    return max(1, math.ceil(max_lifetime_s / 60))


def _error_code(error: ClientError) -> str:
    return error.response.get("Error", {}).get("Code", "")


def _error_message(error: ClientError) -> str:
    return error.response.get("Error", {}).get("Message", str(error))


@contextlib.contextmanager
def _calling(what: str) -> Iterator[None]:
    """AWS and network errors as ProviderError naming what was being done: the lifecycle and the sweep
    report those and go on tearing down."""
    try:
        yield
    except ClientError as error:
        raise ProviderError(f"aws: {what} failed ({_error_code(error)}): {_error_message(error)}") from None
    except BotoCoreError as error:
        raise ProviderError(f"aws: {what} failed: {error}") from None


def _tag_list(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": key, "Value": value} for key, value in tags.items()]


def _tag_dict(tags: list[dict[str, str]] | None) -> dict[str, str]:
    return {tag["Key"]: tag["Value"] for tag in tags or []}


class AWSProvider(Provider, ObjectStorage, MachineIdentity, CloudScheduler, SpotMarket):
    name: ClassVar[str] = "aws"
    settings: ClassVar[tuple[str, ...]] = ("ssh_address",)
    storage_scheme: ClassVar[str] = "s3"
    boot_script_limit: ClassVar[int] = 16 * 1024  # bytes of user data, before base64 (RunInstances)
    agent_source: ClassVar[Path] = Path(__file__).with_name("agent.py")
    ends_itself: ClassVar[bool] = False  # the boot script powers off, which terminates (shutdown behaviour)
    default_disk_gb: ClassVar[float] = 8.0  # the default Ubuntu AMI's root volume

    def __init__(self, session: boto3.Session | None = None, ssh_address: SSHAddress | None = None) -> None:
        self._session = session or boto3.Session()
        self._ssh_address = ssh_address or SSHAddress()
        self._clients: dict[tuple[str, str], Any] = {}
        self._clients_lock = threading.Lock()
        self._regions_used: set[str] = set()
        self._ingress_cidr: str | None = None

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> Self:
        return cls(ssh_address=SSHAddress.from_settings(cls.name, settings))

    @property
    def session(self) -> boto3.Session:
        return self._session

    @classmethod
    def region_of(cls, zone: str) -> str:
        """`us-east-1a` -> `us-east-1` (availability zone names are the region plus one letter)."""
        return zone[:-1]

    # -- capabilities: object storage, scheduler ---------------------------------------------------------------

    @classmethod
    def bucket_problem(cls, bucket: str) -> str | None:
        return storage.bucket_problem(bucket)

    @classmethod
    def open_store(cls, url: StorageURL) -> ObjectStore:
        return storage.S3Store(url)

    @classmethod
    def storage_account(cls, region: str) -> str:
        return storage.account_name(region)

    @classmethod
    def agent_endpoints(cls, environ: Mapping[str, str]) -> dict[str, str]:
        found = {
            "s3": environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL"),
            "ec2": environ.get("AWS_ENDPOINT_URL_EC2") or environ.get("AWS_ENDPOINT_URL"),
        }
        return {key: value for key, value in found.items() if value}

    def scheduler(self, account: str | None) -> Scheduler:
        if account:
            raise ProviderError("aws: EventBridge Scheduler launches as the schedule's own role; name no account")
        return AWSScheduler(self)

    def describe(self) -> str:
        return f"aws EC2, SSH to {self._ssh_address.template}"

    # -- validation and credentials ------------------------------------------------------------------------

    def validate_profile(self, profile: Profile) -> None:
        """Raise ProviderError naming the field when the profile cannot be launched on EC2."""
        if not profile.machine_type:
            raise ProviderError(f"profile {profile.name}: machine_type is required for aws")
        if not profile.zones:
            raise ProviderError(f"profile {profile.name}: zones is required for aws (e.g. ['us-east-1a'])")
        for zone in profile.zones:
            if not (len(zone) > 2 and zone[-1].isalpha() and zone[-2].isdigit()):
                raise ProviderError(f"profile {profile.name}: zones entry {zone!r} is not an availability zone")
        if profile.image and not profile.image.startswith(("ami-", SSM_PREFIX)):
            raise ProviderError(
                f"profile {profile.name}: image {profile.image!r} is neither an AMI id (ami-...) "
                f"nor {SSM_PREFIX}<parameter>"
            )
        unknown = sorted(set(profile.extra) - EXTRA_SETTINGS)
        if unknown:
            raise ProviderError(
                f"profile {profile.name}: unknown extra setting(s) for aws: {', '.join(unknown)} "
                f"(known: {', '.join(sorted(EXTRA_SETTINGS))})"
            )
        validate_disk_gb(profile)

    def check_credentials(self) -> None:
        missing = CredentialsError(
            "no AWS credentials found: set AWS_PROFILE (after `aws configure` or `aws sso login`) "
            "or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"
        )
        try:
            if self._session.get_credentials() is None:
                raise missing
            self.client("sts", self._session.region_name or "us-east-1").get_caller_identity()
        except NoCredentialsError:
            raise missing from None
        except ClientError as error:
            raise CredentialsError(
                f"AWS rejected the credentials ({_error_code(error)}): {_error_message(error)}"
            ) from None
        except (BotoConnectionError, HTTPClientError) as error:
            raise UnreachableError(f"cannot reach the AWS API, credentials not checked: {error}") from None
        except BotoCoreError as error:  # an expired SSO session, an unreadable profile
            raise CredentialsError(f"AWS credentials unusable: {error}") from None

    # -- launch ----------------------------------------------------------------------------------------------

    def launch(self, request: LaunchRequest) -> Instance:
        profile = request.profile
        self.validate_profile(profile)
        if request.zone not in profile.zones:
            raise ProviderError(f"profile {profile.name}: zone {request.zone!r} is not one of {profile.zones}")
        region = self.region_of(request.zone)
        self._regions_used.add(region)
        ec2 = self.client("ec2", region)
        image_id, root = self.resolve_image(region, profile)
        root_device = root["DeviceName"] if root else None
        tags = self._tags(request)
        access: dict[str, Any]
        if request.boot_script is None:
            access = {
                "KeyName": self._ensure_key_pair(ec2, request.run_id, tags),
                "SecurityGroupIds": [self._ensure_security_group(ec2, request.run_id, tags)],
            }
        else:  # a detached machine is never reached over SSH: no key, no ingress; it gets its run's role instead
            access = {"IamInstanceProfile": {"Name": self._ensure_run_role(request, tags)}}
        parameters = self._run_parameters(request, image_id, root_device, access, tags)
        reservation = self._run_instances(ec2, request, parameters)
        described = reservation["Instances"][0]
        return Instance(
            provider=self.name,
            instance_id=described["InstanceId"],
            zone=request.zone,
            ssh=None,
            spot=request.spot,
            launched_at=described["LaunchTime"].timestamp(),
            tags=tags,
            private={"ssh_user": profile.ssh_user or DEFAULT_SSH_USER},
        )

    def _run_instances(self, ec2: Any, request: LaunchRequest, parameters: dict[str, Any]) -> dict[str, Any]:
        """RunInstances; a run role made moments ago is retried until EC2 sees its instance profile (IAM is
        eventually consistent)."""
        deadline = time.monotonic() + PROFILE_PROPAGATION_S
        for interval in poll_intervals(first_s=2.0):
            try:
                return ec2.run_instances(**parameters)
            except ClientError as error:
                propagating = "IamInstanceProfile" in parameters and "iamInstanceProfile" in _error_message(error)
                if not propagating or time.monotonic() > deadline:
                    raise self._launch_error(request, error) from None
            except BotoCoreError as error:
                raise ProviderError(f"aws: RunInstances in {request.zone} failed: {error}") from None
            time.sleep(interval)
        raise AssertionError("poll_intervals never ends")

    def _run_parameters(
        self,
        request: LaunchRequest,
        image_id: str,
        root_device: str | None,
        access: dict[str, Any],
        tags: dict[str, str],
    ) -> dict[str, Any]:
        profile = request.profile
        tagged = ["instance", "volume"] + (["spot-instances-request"] if request.spot else [])
        parameters: dict[str, Any] = {
            "ImageId": image_id,
            "InstanceType": profile.machine_type,
            "MinCount": 1,
            "MaxCount": 1,
            **access,
            "Placement": {"AvailabilityZone": request.zone},
            "InstanceInitiatedShutdownBehavior": "terminate",
            # the detached run's boot script powers off at the max lifetime itself (orchestrate.detached)
            "UserData": request.boot_script
            or (
                "#!/bin/sh\n# keras-cloud-bench self-destruct: powering off terminates this instance\n"
                f"shutdown -h +{self_destruct_minutes(request.max_lifetime_s)}\n"
            ),
            "TagSpecifications": [
                {"ResourceType": kind, "Tags": _tag_list({**tags, "Name": f"kcb-{request.run_id}"})} for kind in tagged
            ],
        }
        if request.spot:
            parameters["InstanceMarketOptions"] = {
                "MarketType": "spot",
                "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"},
            }
        if "disk_gb" in profile.extra and root_device:
            parameters["BlockDeviceMappings"] = [
                {
                    "DeviceName": root_device,
                    "Ebs": {
                        "VolumeSize": int(profile.extra["disk_gb"]),
                        "VolumeType": "gp3",
                        "DeleteOnTermination": True,
                    },
                }
            ]
        return parameters

    def _launch_error(self, request: LaunchRequest, error: ClientError) -> ProviderError:
        code, message = _error_code(error), _error_message(error)
        market = "spot" if request.spot else "on-demand"
        where = f"aws {request.profile.machine_type} {market} in {request.zone}"
        if code in CAPACITY_ERRORS:
            return CapacityError(f"{where}: no capacity ({code}): {message}")
        if code in QUOTA_ERRORS:
            return CapacityError(
                f"{where}: quota exceeded ({code}): {message} - ask for a higher {market} vCPU quota "
                f"for this instance family in Service Quotas (Amazon EC2, {self.region_of(request.zone or '')})"
            )
        return ProviderError(f"{where}: RunInstances failed ({code}): {message}")

    def _tags(self, request: LaunchRequest) -> dict[str, str]:
        return {**request.tags, "project": PROJECT_TAG, "run-id": request.run_id}

    def resolve_image(self, region: str, profile: Profile) -> tuple[str, dict[str, Any] | None]:
        """(AMI id, its root device's block-device mapping, None when the image names none); SSM parameters are
        resolved here so a bad name fails before launch. The scheduler's launch templates use it too."""
        image = profile.image or SSM_PREFIX + (GPU_AMI_PARAMETER if profile.has_gpu else CPU_AMI_PARAMETER)
        if image.startswith(SSM_PREFIX):
            parameter = image.removeprefix(SSM_PREFIX)
            with _calling(f"profile {profile.name}: reading image parameter {parameter} in {region}"):
                image = self.client("ssm", region).get_parameter(Name=parameter)["Parameter"]["Value"]
        with _calling(f"profile {profile.name}: looking up image {image} in {region}"):
            images = self.client("ec2", region).describe_images(ImageIds=[image])["Images"]
        if not images:
            raise ProviderError(f"profile {profile.name}: image {image} not found in {region}")
        root = images[0].get("RootDeviceName")
        mappings = [m for m in images[0].get("BlockDeviceMappings", []) if m.get("DeviceName") == root]
        return image, (mappings[0] if mappings and "Ebs" in mappings[0] else None)

    def _ensure_key_pair(self, ec2: Any, run_id: str, tags: dict[str, str]) -> str:
        """Import the run's public key (the private key never leaves this machine)."""
        key_name = f"kcb-{run_id}"
        _, public_key = ensure_run_key(run_id)
        try:
            ec2.import_key_pair(
                KeyName=key_name,
                PublicKeyMaterial=public_key.encode(),
                TagSpecifications=[{"ResourceType": "key-pair", "Tags": _tag_list(tags)}],
            )
        except ClientError as error:
            if _error_code(error) != "InvalidKeyPair.Duplicate":  # a relaunch of the run in this region
                raise ProviderError(f"aws: cannot import key pair {key_name}: {_error_message(error)}") from None
        except BotoCoreError as error:
            raise ProviderError(f"aws: cannot import key pair {key_name}: {error}") from None
        return key_name

    def _ensure_security_group(self, ec2: Any, run_id: str, tags: dict[str, str]) -> str:
        name = f"kcb-{run_id}"
        with _calling(f"creating security group {name}"):
            existing = ec2.describe_security_groups(Filters=[{"Name": "group-name", "Values": [name]}])
            if existing["SecurityGroups"]:  # a relaunch of the run in this region
                return existing["SecurityGroups"][0]["GroupId"]
            group_id = ec2.create_security_group(
                GroupName=name,
                Description=f"keras-cloud-bench run {run_id}: SSH from the orchestrator only",
                TagSpecifications=[{"ResourceType": "security-group", "Tags": _tag_list(tags)}],
            )["GroupId"]
            ec2.authorize_security_group_ingress(
                GroupId=group_id,
                IpPermissions=[
                    {
                        "IpProtocol": "tcp",
                        "FromPort": 22,
                        "ToPort": 22,
                        "IpRanges": [{"CidrIp": self._caller_cidr(), "Description": "keras-cloud-bench"}],
                    }
                ],
            )
        return group_id

    def _ensure_run_role(self, request: LaunchRequest, tags: dict[str, str]) -> str:
        """The run's role and instance profile (same name), created once per run; a relaunch reuses them."""
        if not request.storage_prefix or not request.storage_prefix.startswith("s3://"):
            raise ProviderError(f"aws: a boot script needs an s3:// storage prefix, not {request.storage_prefix}")
        iam = self.client("iam", "us-east-1")  # IAM is global
        name = run_role_name(request.run_id)
        policy = json.dumps(run_role_policy(request.storage_prefix, request.run_id))
        with _calling(f"creating role {name}"):
            try:
                iam.create_role(
                    RoleName=name,
                    Path=ROLE_PATH,
                    AssumeRolePolicyDocument=json.dumps(EC2_TRUST),
                    Description=f"keras-cloud-bench detached run {request.run_id}",
                    Tags=_tag_list(tags),
                )
            except ClientError as error:
                if _error_code(error) != "EntityAlreadyExists":
                    raise
            iam.put_role_policy(RoleName=name, PolicyName=ROLE_POLICY_NAME, PolicyDocument=policy)
            try:
                iam.create_instance_profile(InstanceProfileName=name, Path=ROLE_PATH, Tags=_tag_list(tags))
            except ClientError as error:
                if _error_code(error) != "EntityAlreadyExists":
                    raise
            roles = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]["Roles"]
            if not any(role["RoleName"] == name for role in roles):
                iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=name)
        return name

    def _delete_run_role(self, run_id: str) -> None:
        iam = self.client("iam", "us-east-1")
        name = run_role_name(run_id)
        with _calling(f"deleting role {name}"):
            for step in (
                lambda: iam.remove_role_from_instance_profile(InstanceProfileName=name, RoleName=name),
                lambda: iam.delete_instance_profile(InstanceProfileName=name),
                lambda: iam.delete_role_policy(RoleName=name, PolicyName=ROLE_POLICY_NAME),
                lambda: iam.delete_role(RoleName=name),
            ):
                try:
                    step()
                except ClientError as error:
                    if _error_code(error) != "NoSuchEntity":  # already gone: release is idempotent
                        raise

    def _run_roles(self) -> dict[str, dict[str, str]]:
        """Detached runs whose role is still there, with the role's tags."""
        iam = self.client("iam", "us-east-1")
        found: dict[str, dict[str, str]] = {}
        with _calling("listing the detached runs' roles"):
            for page in iam.get_paginator("list_roles").paginate(PathPrefix=ROLE_PATH):
                for role in page["Roles"]:
                    tags = _tag_dict(iam.list_role_tags(RoleName=role["RoleName"])["Tags"])
                    if tags.get("project") == PROJECT_TAG and tags.get("run-id"):
                        found[tags["run-id"]] = tags
        return found

    def _caller_cidr(self) -> str:
        if self._ingress_cidr is None:
            self._ingress_cidr = caller_cidr()
        return self._ingress_cidr

    # -- running instances -----------------------------------------------------------------------------------

    def wait_until_running(self, instance: Instance, timeout_s: float) -> Instance:
        deadline = time.monotonic() + timeout_s
        for interval in poll_intervals():
            described = self._describe(instance)
            state = described["State"]["Name"] if described else "terminated"
            if described is not None and state == "running":
                target = self._ssh_target(instance, described)
                if target is not None:
                    return replace(instance, ssh=target)
            elif state != "pending":
                reason = (described or {}).get("StateReason", {}).get("Message") or "no longer listed"
                raise ProviderError(f"aws: {instance.instance_id} ended before it ran ({state}: {reason})")
            if time.monotonic() > deadline:
                hint = NO_ADDRESS_HINT if state == "running" else ""
                raise ProviderError(f"aws: {instance.instance_id} not reachable after {timeout_s:.0f}s ({state}){hint}")
            time.sleep(interval)
        raise AssertionError("poll_intervals never ends")

    def _ssh_target(self, instance: Instance, described: dict[str, Any]) -> SSHTarget | None:
        host, port = self._ssh_address.resolve(described.get("PublicIpAddress"), described.get("PrivateIpAddress"))
        if not host:
            return None
        user = instance.private.get("ssh_user", DEFAULT_SSH_USER)
        key = run_key_path(instance.tags["run-id"])
        return SSHTarget(host=host, user=user, port=port, key_filename=str(key))

    def state(self, instance: Instance) -> InstanceState:
        described = self._describe(instance)
        if described is None:
            return InstanceState.TERMINATED
        name = described["State"]["Name"]
        if name in ("pending", "running"):
            return InstanceState(name)
        if _reclaimed(described):
            return InstanceState.PREEMPTED
        if name in ("shutting-down", "terminated", "stopping", "stopped"):
            return InstanceState.TERMINATED
        return InstanceState.UNKNOWN

    def was_preempted(self, instance: Instance) -> bool:
        """EC2's StateReason of a Spot interruption (while AWS still lists the instance)."""
        described = self._describe(instance)
        return described is not None and _reclaimed(described)

    def ended_at(self, instance: Instance) -> float | None:
        """From the time in the StateTransitionReason of a stopped or terminated machine, e.g. `User initiated
        (2026-01-10 21:49:56 GMT)` (EC2 keeps a terminated instance listed for about an hour)."""
        described = self._describe(instance)
        if described is None or described["State"]["Name"] not in ("stopped", "terminated"):
            return None
        return transition_time(described.get("StateTransitionReason", ""))

    def _describe(self, instance: Instance) -> dict[str, Any] | None:
        """The instance as DescribeInstances reports it; None once AWS no longer lists it."""
        ec2 = self.client("ec2", self.region_of(instance.zone or ""))
        try:
            reservations = ec2.describe_instances(InstanceIds=[instance.instance_id])["Reservations"]
        except ClientError as error:
            if _error_code(error) == "InvalidInstanceID.NotFound":
                return None
            raise ProviderError(f"aws: cannot describe {instance.instance_id}: {_error_message(error)}") from None
        except BotoCoreError as error:
            raise ProviderError(f"aws: cannot describe {instance.instance_id}: {error}") from None
        found = [item for reservation in reservations for item in reservation["Instances"]]
        return found[0] if found else None

    # -- teardown and the sweep ------------------------------------------------------------------------------

    def terminate(self, instance: Instance) -> None:
        ec2 = self.client("ec2", self.region_of(instance.zone or ""))
        try:
            ec2.terminate_instances(InstanceIds=[instance.instance_id])
            ec2.get_waiter("instance_terminated").wait(
                InstanceIds=[instance.instance_id],
                WaiterConfig={"Delay": 5, "MaxAttempts": 120},
            )
        except ClientError as error:
            if _error_code(error) != "InvalidInstanceID.NotFound":
                raise ProviderError(f"aws: cannot terminate {instance.instance_id}: {_error_message(error)}") from None
        except (WaiterError, BotoCoreError) as error:
            raise ProviderError(f"aws: {instance.instance_id} did not terminate: {error}") from None

    def list_instances(self) -> list[Instance]:
        with ThreadPoolExecutor(max_workers=8) as pool:
            per_region = pool.map(self._list_region, self.regions())
        return [instance for instances in per_region for instance in instances]

    def _list_region(self, region: str) -> list[Instance]:
        paginator = self.client("ec2", region).get_paginator("describe_instances")
        pages = paginator.paginate(
            Filters=[
                {"Name": "tag:project", "Values": [PROJECT_TAG]},
                {"Name": "instance-state-name", "Values": list(LIVE_STATES)},
            ]
        )
        with _calling(f"listing instances in {region}"):
            return [
                self._as_instance(item)
                for page in pages
                for reservation in page["Reservations"]
                for item in reservation["Instances"]
            ]

    def _as_instance(self, described: dict[str, Any]) -> Instance:
        public_ip = described.get("PublicIpAddress")
        return Instance(
            provider=self.name,
            instance_id=described["InstanceId"],
            zone=described["Placement"]["AvailabilityZone"],
            ssh=SSHTarget(host=public_ip) if public_ip else None,
            spot=described.get("InstanceLifecycle") == "spot",
            launched_at=described["LaunchTime"].timestamp(),
            tags=_tag_dict(described.get("Tags")),
        )

    def release_run(self, run_id: str) -> None:
        """Delete the run's security groups and key pairs in the regions it used (all when unknown)."""
        regions = sorted(self._regions_used) or self.regions()
        for region in regions:
            ec2 = self.client("ec2", region)
            run_filter = [
                {"Name": "tag:project", "Values": [PROJECT_TAG]},
                {"Name": "tag:run-id", "Values": [run_id]},
            ]
            with _calling(f"releasing run {run_id} in {region}"):
                for group in ec2.describe_security_groups(Filters=run_filter)["SecurityGroups"]:
                    self._delete_security_group(ec2, group["GroupId"])
                for key in ec2.describe_key_pairs(Filters=run_filter)["KeyPairs"]:
                    ec2.delete_key_pair(KeyName=key["KeyName"])
        self._delete_run_role(run_id)
        forget_run_key(run_id)

    def leftover_runs(self) -> dict[str, dict[str, str]]:
        """Runs holding a tagged key pair or security group in any searched region, or a local key file."""
        with ThreadPoolExecutor(max_workers=8) as pool:
            per_region = list(pool.map(self._leftovers_in, self.regions()))
        found: dict[str, dict[str, str]] = {run_id: {} for run_id in local_key_runs()}
        found.update(self._run_roles())
        for resources in per_region:
            for tags in resources:
                found[tags["run-id"]] = tags
        return found

    def _leftovers_in(self, region: str) -> list[dict[str, str]]:
        ec2 = self.client("ec2", region)
        project = [{"Name": "tag:project", "Values": [PROJECT_TAG]}]
        with _calling(f"listing key pairs and security groups in {region}"):
            groups = ec2.describe_security_groups(Filters=project)["SecurityGroups"]
            keys = ec2.describe_key_pairs(Filters=project)["KeyPairs"]
        tagged = [_tag_dict(resource.get("Tags")) for resource in (*groups, *keys)]
        if tagged:
            self._regions_used.add(region)  # release_run then searches it
        return [tags for tags in tagged if tags.get("run-id")]

    def _delete_security_group(self, ec2: Any, group_id: str) -> None:
        try:
            ec2.delete_security_group(GroupId=group_id)
        except ClientError as error:
            if _error_code(error) == "InvalidGroup.NotFound":
                return
            raise ProviderError(
                f"aws: cannot delete security group {group_id} ({_error_code(error)}): {_error_message(error)}"
            ) from None

    def regions(self) -> list[str]:
        """$KCB_AWS_REGIONS (comma-separated), else every region enabled for the account."""
        configured = os.environ.get(REGIONS_ENV, "")
        if configured.strip():
            return sorted({region.strip() for region in configured.split(",") if region.strip()})
        ec2 = self.client("ec2", self._session.region_name or "us-east-1")
        with _calling("listing regions"):
            return sorted(region["RegionName"] for region in ec2.describe_regions()["Regions"])

    def client(self, service: str, region: str) -> Any:
        """The boto3 client of `service` in `region`, made once (the scheduler shares them)."""
        key = (service, region)
        with self._clients_lock:  # boto3 clients are thread-safe once made; making them is not
            if key not in self._clients:
                self._clients[key] = self._session.client(service, region_name=region, config=RETRY_CONFIG)
            return self._clients[key]


TRANSITION_TIME = re.compile(r"\((\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) (?:GMT|UTC)\)")


def transition_time(reason: str) -> float | None:
    """The time in an EC2 StateTransitionReason, in epoch seconds; None when it names none."""
    found = TRANSITION_TIME.search(reason)
    if found is None:
        return None
    return datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()


def caller_cidr() -> str:
    """The CIDR allowed to SSH in: $KCB_SSH_INGRESS_CIDR, else this machine's public IPv4 address /32."""
    configured = os.environ.get(INGRESS_CIDR_ENV)
    if configured:
        try:
            return str(ipaddress.ip_network(configured.strip(), strict=False))
        except ValueError:
            raise ProviderError(f"{INGRESS_CIDR_ENV}={configured!r} is not a CIDR (e.g. 203.0.113.7/32)") from None
    try:
        with urllib.request.urlopen(CHECKIP_URL, timeout=10) as response:
            address = ipaddress.ip_address(response.read().decode().strip())
    except (OSError, ValueError) as error:
        raise ProviderError(
            f"cannot discover this machine's public address from {CHECKIP_URL} ({error}); "
            f"set {INGRESS_CIDR_ENV} to the CIDR allowed to SSH in"
        ) from None
    return f"{address}/{address.max_prefixlen}"
