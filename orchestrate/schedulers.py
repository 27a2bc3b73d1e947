"""The clouds' side of scheduled runs (`orchestrate.schedule`): EventBridge Scheduler with a launch template on AWS,
Cloud Scheduler calling Compute Engine's instances.insert on Google Cloud. Each creates, lists and deletes what a
schedule needs there; a create that fails half-way removes what it made (`Undo`), and every delete is idempotent.
The clouds' SDKs, and the providers built on them, are imported inside the methods that call a cloud: they take
seconds to load, and a command that talks to one cloud (or to none) needs at most that cloud's.
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from orchestrate.provider import PROJECT_TAG, ProviderError
from orchestrate.schedule_spec import (
    RESOURCE_PREFIX,
    ScheduleFailure,
    ScheduleInfo,
    ScheduleSpec,
    description_facts,
    resource_name,
)
from orchestrate.storage import StorageURL

SCHEDULE_GROUP = PROJECT_TAG  # one EventBridge Scheduler group holds every schedule of the project
RUN_INSTANCES_TARGET = "arn:aws:scheduler:::aws-sdk:ec2:runInstances"
COMPUTE_API = "https://compute.googleapis.com/compute/v1"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
TAGGED_AT_LAUNCH = ("instance", "volume", "spot-instances-request")  # what the launch template tags
SCHEDULER_ENDPOINT_ENV = "KCB_SCHEDULER_API_ENDPOINT"  # Cloud Scheduler's endpoint (the tests' fake)
IAM_PROPAGATION_S = 60.0  # a new role can take seconds before another service may assume it


@dataclass
class Undo:
    """What a create made so far, each with the step that removes it: run backwards when a later step fails."""

    steps: list[tuple[str, Callable[[], object]]] = field(default_factory=list)

    def add(self, what: str, step: Callable[[], object]) -> None:
        self.steps.append((what, step))

    @property
    def created(self) -> list[str]:
        return [what for what, _ in self.steps]

    def rollback(self) -> list[str]:
        """Remove everything, last first; returns what could not be removed (each step is tried)."""
        left = []
        for what, step in reversed(self.steps):
            try:
                step()
            except Exception as exc:  # broad on purpose: every step is tried, the rest still undone
                left.append(f"{what} ({exc})")
        return left


@contextlib.contextmanager
def undoing(undo: Undo) -> Iterator[Undo]:
    try:
        yield undo
    except Exception as exc:
        left = undo.rollback()
        undone = f"; undone: {', '.join(undo.created)}" if undo.created and not left else ""
        kept = f"; NOT undone (delete by hand or run `schedule delete`): {', '.join(left)}" if left else ""
        raise ScheduleFailure(f"{exc}{undone}{kept}") from exc


# ---- AWS: EventBridge Scheduler -> ec2:RunInstances with a launch template ------------------------------------


def trust_policy(account: str, region: str) -> dict[str, Any]:
    """Only EventBridge Scheduler, for this account's project schedule group, may assume the schedule's role."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "scheduler.amazonaws.com"},
                "Action": "sts:AssumeRole",
                "Condition": {
                    "StringEquals": {
                        "aws:SourceAccount": account,
                        "aws:SourceArn": f"arn:aws:scheduler:{region}:{account}:schedule-group/{SCHEDULE_GROUP}",
                    }
                },
            }
        ],
    }


def scheduler_policy(account: str, region: str, template_id: str, machine_role: str) -> dict[str, Any]:
    """Least privilege for the schedule's role: RunInstances through this one launch template (and on what it
    launches), tags on those resources at launch only, and passing the machine's one role to EC2. `machine_role`
    is that role's path and name (`keras-cloud-bench/kcb-schedule-<name>-machine`)."""
    template = f"arn:aws:ec2:{region}:{account}:launch-template/{template_id}"
    launched = [
        f"arn:aws:ec2:{region}:{account}:{kind}/*"
        for kind in ("instance", "volume", "network-interface", "subnet", "security-group", "spot-instances-request")
    ] + [f"arn:aws:ec2:{region}::image/*"]
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "RunThisTemplate", "Effect": "Allow", "Action": "ec2:RunInstances", "Resource": template},
            {
                "Sid": "WhatTheTemplateLaunches",
                "Effect": "Allow",
                "Action": "ec2:RunInstances",
                "Resource": launched,
                "Condition": {"ArnLike": {"ec2:LaunchTemplate": template}},
            },
            {
                "Sid": "TagAtLaunchOnly",
                "Effect": "Allow",
                "Action": "ec2:CreateTags",
                "Resource": [f"arn:aws:ec2:{region}:{account}:{kind}/*" for kind in TAGGED_AT_LAUNCH],
                "Condition": {"StringEquals": {"ec2:CreateAction": "RunInstances"}},
            },
            {
                "Sid": "PassTheMachineRole",
                "Effect": "Allow",
                "Action": "iam:PassRole",
                "Resource": f"arn:aws:iam::{account}:role/{machine_role}",
                "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
            },
        ],
    }


def machine_policy(storage: StorageURL, name: str) -> dict[str, Any]:
    """The scheduled machine's permissions, as a detached run's (`providers.aws.run_role_policy`) but for every run
    of the schedule, whose ids are named at boot: the objects under `<prefix>runs/`, and terminating the instances
    of this schedule (tagged `schedule=<name>`), which is the machine itself (one at a time)."""
    runs = f"{storage.prefix}runs/"
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "RunObjects",
                "Effect": "Allow",
                "Action": ["s3:PutObject", "s3:GetObject"],
                "Resource": f"arn:aws:s3:::{storage.bucket}/{runs}*",
            },
            {
                "Sid": "ListRunPrefix",
                "Effect": "Allow",
                "Action": "s3:ListBucket",
                "Resource": f"arn:aws:s3:::{storage.bucket}",
                "Condition": {"StringLike": {"s3:prefix": f"{runs}*"}},
            },
            {
                "Sid": "TerminateItself",
                "Effect": "Allow",
                "Action": "ec2:TerminateInstances",
                "Resource": "arn:aws:ec2:*:*:instance/*",
                "Condition": {
                    "StringEquals": {"aws:ResourceTag/schedule": name, "aws:ResourceTag/project": PROJECT_TAG}
                },
            },
        ],
    }


class AWSScheduler:
    provider: ClassVar[str] = "aws"

    def __init__(self, session: Any = None) -> None:
        import boto3

        self._session = session or boto3.Session()
        self._clients: dict[tuple[str, str], Any] = {}

    def _client(self, service: str, region: str = "us-east-1") -> Any:
        from orchestrate.providers.aws import RETRY_CONFIG

        if (service, region) not in self._clients:
            self._clients[(service, region)] = self._session.client(service, region_name=region, config=RETRY_CONFIG)
        return self._clients[(service, region)]

    def check_credentials(self) -> None:
        from orchestrate.providers.aws import AWSProvider

        AWSProvider(self._session).check_credentials()

    def regions(self) -> list[str]:
        """$KCB_AWS_REGIONS (comma-separated), else every region enabled for the account: as the sweep searches."""
        from orchestrate.providers.aws import REGIONS_ENV

        configured = [r.strip() for r in os.environ.get(REGIONS_ENV, "").split(",") if r.strip()]
        if configured:
            return sorted(set(configured))
        with _aws("listing regions"):
            return sorted(r["RegionName"] for r in self._client("ec2").describe_regions()["Regions"])

    def exists(self, spec: ScheduleSpec) -> bool:
        from botocore.exceptions import ClientError

        try:
            self._client("scheduler", spec.region).get_schedule(Name=resource_name(spec.name), GroupName=SCHEDULE_GROUP)
        except ClientError as error:
            if _aws_code(error) == "ResourceNotFoundException":
                return False
            raise _aws_error(f"reading schedule {spec.name}", error) from None
        return True

    def create(self, spec: ScheduleSpec, boot_script: str, storage: StorageURL) -> list[str]:
        """The machine's role and instance profile, the launch template, the schedule's role, the schedule."""
        from orchestrate.providers.aws import EC2_TRUST, ROLE_PATH, AWSProvider

        region, base = spec.region, resource_name(spec.name)
        iam, ec2 = self._client("iam"), self._client("ec2", region)
        with _aws("reading the account id"):
            account = self._client("sts").get_caller_identity()["Account"]
        image_id, root = AWSProvider(self._session).resolve_image(region, spec.profile)
        tags = _aws_tags(spec.tags())
        with undoing(Undo()) as undo:
            machine = f"{base}-machine"
            with _aws(f"creating role {machine}"):
                iam.create_role(
                    RoleName=machine,
                    Path=ROLE_PATH,
                    AssumeRolePolicyDocument=json.dumps(EC2_TRUST),
                    Description=f"keras-cloud-bench schedule {spec.name}: the machine that runs the suite",
                    Tags=tags,
                )
                undo.add(f"IAM role {machine}", lambda: self._delete_role(machine))
                policy = machine_policy(storage, spec.name)
                iam.put_role_policy(RoleName=machine, PolicyName="scheduled-run", PolicyDocument=json.dumps(policy))
                profile_arn = iam.create_instance_profile(InstanceProfileName=machine, Path=ROLE_PATH, Tags=tags)[
                    "InstanceProfile"
                ]["Arn"]
                undo.add(f"instance profile {machine}", lambda: self._delete_instance_profile(machine))
                iam.add_role_to_instance_profile(InstanceProfileName=machine, RoleName=machine)
            with _aws(f"creating launch template {base}"):
                template = ec2.create_launch_template(
                    LaunchTemplateName=base,
                    VersionDescription=f"keras-cloud-bench schedule {spec.name}",
                    LaunchTemplateData=_template_data(spec, image_id, root, profile_arn, boot_script),
                    TagSpecifications=[{"ResourceType": "launch-template", "Tags": tags}],
                )["LaunchTemplate"]
            undo.add(f"launch template {base} ({region})", lambda: self._delete_template(region, base))
            with _aws(f"creating role {base}"):
                role = iam.create_role(
                    RoleName=base,
                    Path=ROLE_PATH,
                    AssumeRolePolicyDocument=json.dumps(trust_policy(account, region)),
                    Description=f"EventBridge Scheduler: launch keras-cloud-bench schedule {spec.name}",
                    Tags=tags,
                )["Role"]
                undo.add(f"IAM role {base}", lambda: self._delete_role(base))
                machine_path = ROLE_PATH.lstrip("/") + machine
                policy = scheduler_policy(account, region, template["LaunchTemplateId"], machine_path)
                iam.put_role_policy(RoleName=base, PolicyName="run-the-template", PolicyDocument=json.dumps(policy))
            self._ensure_group(region)
            self._create_schedule(spec, template["LaunchTemplateId"], role["Arn"])
            undo.add(f"schedule {SCHEDULE_GROUP}/{base} ({region})", lambda: self._delete_schedule(region, base))
            return undo.created

    def _create_schedule(self, spec: ScheduleSpec, template_id: str, role_arn: str) -> None:
        from botocore.exceptions import ClientError

        target = {
            "Arn": RUN_INSTANCES_TARGET,
            "RoleArn": role_arn,
            # The RunInstances request, in the API's own parameter names, as the universal target sends it.
            "Input": json.dumps(
                {
                    "LaunchTemplate": {"LaunchTemplateId": template_id, "Version": "$Default"},
                    "MinCount": 1,
                    "MaxCount": 1,
                }
            ),
            # A refused launch (capacity, throttling) is retried twice within the hour, then dropped until the
            # next firing: a late benchmark is worth less than the next one on time.
            "RetryPolicy": {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 3600},
        }
        deadline = time.monotonic() + IAM_PROPAGATION_S
        while True:
            try:
                self._client("scheduler", spec.region).create_schedule(
                    Name=resource_name(spec.name),
                    GroupName=SCHEDULE_GROUP,
                    ScheduleExpression=spec.cron.eventbridge(),
                    ScheduleExpressionTimezone=spec.time_zone,
                    FlexibleTimeWindow={"Mode": "OFF"},
                    State="ENABLED",
                    Description=spec.description(),
                    Target=target,
                )
                return
            except ClientError as error:
                # IAM is eventually consistent: the new role may not be assumable for a few seconds.
                assumable_soon = _aws_code(error) == "ValidationException" and "role" in str(error).lower()
                if assumable_soon and time.monotonic() < deadline:
                    time.sleep(5)
                    continue
                raise _aws_error(f"creating schedule {spec.name}", error) from None

    def _ensure_group(self, region: str) -> None:
        from botocore.exceptions import ClientError

        try:
            self._client("scheduler", region).create_schedule_group(
                Name=SCHEDULE_GROUP, Tags=[{"Key": "project", "Value": PROJECT_TAG}]
            )
        except ClientError as error:
            if _aws_code(error) != "ConflictException":  # it exists: kept for the project's other schedules
                raise _aws_error(f"creating schedule group {SCHEDULE_GROUP}", error) from None

    def list(self) -> list[ScheduleInfo]:
        found: list[ScheduleInfo] = []
        for region in self.regions():
            found += self._list_region(region)
        return found

    def _list_region(self, region: str) -> builtins.list[ScheduleInfo]:
        from botocore.exceptions import ClientError

        scheduler = self._client("scheduler", region)
        try:
            pages = scheduler.get_paginator("list_schedules").paginate(
                GroupName=SCHEDULE_GROUP, NamePrefix=RESOURCE_PREFIX
            )
            summaries = [item for page in pages for item in page["Schedules"]]
        except ClientError as error:
            if _aws_code(error) == "ResourceNotFoundException":  # no schedule group in this region
                return []
            raise _aws_error(f"listing schedules in {region}", error) from None
        found = []
        for summary in summaries:
            with _aws(f"reading schedule {summary['Name']}"):
                schedule = scheduler.get_schedule(Name=summary["Name"], GroupName=SCHEDULE_GROUP)
            facts = description_facts(schedule.get("Description", ""))
            found.append(
                ScheduleInfo(
                    name=summary["Name"].removeprefix(RESOURCE_PREFIX),
                    provider=self.provider,
                    where=region,
                    cron=facts.get("cron", "?"),
                    expression=schedule["ScheduleExpression"],
                    time_zone=schedule.get("ScheduleExpressionTimezone") or "UTC",
                    state=schedule.get("State", "?"),
                    profile=facts.get("profile", "?"),
                    suite=facts.get("suite", "?"),
                )
            )
        return found

    def delete(self, name: str) -> builtins.list[str]:
        """The schedule, its launch template and its role, wherever found; what was deleted (nothing is fine)."""
        base = resource_name(name)
        deleted = []
        for region in self.regions():
            if self._delete_schedule(region, base):
                deleted.append(f"schedule {SCHEDULE_GROUP}/{base} ({region})")
            if self._delete_template(region, base):
                deleted.append(f"launch template {base} ({region})")
        if self._delete_role(base):
            deleted.append(f"IAM role {base}")
        if self._delete_instance_profile(f"{base}-machine"):
            deleted.append(f"instance profile {base}-machine")
        if self._delete_role(f"{base}-machine"):
            deleted.append(f"IAM role {base}-machine")
        return deleted

    def _delete_schedule(self, region: str, base: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self._client("scheduler", region).delete_schedule(Name=base, GroupName=SCHEDULE_GROUP)
        except ClientError as error:
            if _aws_code(error) == "ResourceNotFoundException":
                return False
            raise _aws_error(f"deleting schedule {base} in {region}", error) from None
        return True

    def _delete_template(self, region: str, base: str) -> bool:
        ec2 = self._client("ec2", region)
        with _aws(f"deleting launch template {base} in {region}"):
            found = ec2.describe_launch_templates(Filters=[{"Name": "launch-template-name", "Values": [base]}])
            for template in found["LaunchTemplates"]:
                ec2.delete_launch_template(LaunchTemplateId=template["LaunchTemplateId"])
        return bool(found["LaunchTemplates"])

    def _delete_role(self, name: str) -> bool:
        from botocore.exceptions import ClientError

        iam = self._client("iam")
        try:
            for policy in iam.list_role_policies(RoleName=name)["PolicyNames"]:
                iam.delete_role_policy(RoleName=name, PolicyName=policy)
            iam.delete_role(RoleName=name)
        except ClientError as error:
            if _aws_code(error) == "NoSuchEntity":
                return False
            raise _aws_error(f"deleting role {name}", error) from None
        return True

    def _delete_instance_profile(self, name: str) -> bool:
        from botocore.exceptions import ClientError

        iam = self._client("iam")
        try:
            for role in iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]["Roles"]:
                iam.remove_role_from_instance_profile(InstanceProfileName=name, RoleName=role["RoleName"])
            iam.delete_instance_profile(InstanceProfileName=name)
        except ClientError as error:
            if _aws_code(error) == "NoSuchEntity":
                return False
            raise _aws_error(f"deleting instance profile {name}", error) from None
        return True


def _template_data(
    spec: ScheduleSpec, image_id: str, root: dict[str, Any] | None, instance_profile_arn: str, boot_script: str
) -> dict[str, Any]:
    tags = _aws_tags({**spec.tags(), "Name": resource_name(spec.name)})
    tagged = [kind for kind in TAGGED_AT_LAUNCH if spec.spot or kind != "spot-instances-request"]
    data: dict[str, Any] = {
        "ImageId": image_id,
        "InstanceType": spec.profile.machine_type,
        "UserData": base64.b64encode(boot_script.encode()).decode(),
        "IamInstanceProfile": {"Arn": instance_profile_arn},
        "InstanceInitiatedShutdownBehavior": "terminate",  # the boot script's self-destruct powers off
        "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},  # IMDSv2 only
        "Placement": {"AvailabilityZone": spec.zone},
        "TagSpecifications": [{"ResourceType": kind, "Tags": tags} for kind in tagged],
    }
    if spec.spot:
        data["InstanceMarketOptions"] = {
            "MarketType": "spot",
            "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"},
        }
    if root is not None:
        # gp3 (the price the estimate uses), the profile's size or the image's own, deleted with the machine
        size = int(spec.profile.extra.get("disk_gb") or root["Ebs"].get("VolumeSize") or 0)
        ebs: dict[str, Any] = {"VolumeType": "gp3", "DeleteOnTermination": True}
        data["BlockDeviceMappings"] = [
            {"DeviceName": root["DeviceName"], "Ebs": ebs | ({"VolumeSize": size} if size else {})}
        ]
    return data


def _aws_tags(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": key, "Value": value} for key, value in tags.items()]


def _aws_code(error: Any) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _aws_error(what: str, error: Any) -> ScheduleFailure:
    message = error.response.get("Error", {}).get("Message", str(error))
    return ScheduleFailure(f"aws: {what} failed ({_aws_code(error)}): {message}")


@contextlib.contextmanager
def _aws(what: str) -> Iterator[None]:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as error:
        raise _aws_error(what, error) from None
    except BotoCoreError as error:
        raise ScheduleFailure(f"aws: {what} failed: {error}") from None


# ---- Google Cloud: Cloud Scheduler -> Compute Engine instances.insert --------------------------------------------


class GCEScheduler:
    provider: ClassVar[str] = "gce"

    def __init__(self, scheduler_account: str | None = None, machine_settings: dict[str, str] | None = None) -> None:
        from orchestrate.providers.gce import GCEProvider

        self._client_instance: Any = None
        self._scheduler_account = scheduler_account  # the account Cloud Scheduler's OAuth token is for
        # The VM's own identity is a detached run's (settings service_account, self_delete_role).
        self._gce = GCEProvider.from_settings(machine_settings or {})

    def _project_id(self) -> str:
        return str(self._gce.project_id())

    @property
    def _client(self) -> Any:
        if self._client_instance is None:
            from google.api_core.client_options import ClientOptions
            from google.cloud import scheduler_v1

            credentials, _ = self._gce.application_default_credentials()
            endpoint = os.environ.get(SCHEDULER_ENDPOINT_ENV)
            options = ClientOptions(api_endpoint=endpoint) if endpoint else None
            self._client_instance = scheduler_v1.CloudSchedulerClient(
                transport="rest", credentials=credentials, client_options=options
            )
        return self._client_instance

    def check_credentials(self) -> None:
        self._gce.check_credentials()

    def _job_name(self, location: str, name: str) -> str:
        return f"projects/{self._project_id()}/locations/{location}/jobs/{resource_name(name)}"

    def exists(self, spec: ScheduleSpec) -> bool:
        from google.api_core import exceptions

        with _google(f"reading job {spec.name}"):
            try:
                self._client.get_job(name=self._job_name(spec.region, spec.name))
            except exceptions.NotFound:
                return False
        return True

    def create(self, spec: ScheduleSpec, boot_script: str, storage: StorageURL) -> list[str]:
        """The Cloud Scheduler job. The VM's service account and its grants (the bucket; deleting the schedule's
        VMs) are set up once per project, as docs/clouds.md says: there is no orchestrator at launch to grant them."""
        from google.cloud import scheduler_v1

        if not self._scheduler_account:
            raise ScheduleFailure(
                "gce: no service account for Cloud Scheduler's OAuth token: pass --service-account EMAIL "
                "(an account allowed to create instances; docs/clouds.md lists its permissions)"
            )
        project = self._project_id()
        instance = self.instance_body(spec, boot_script)
        parent = f"projects/{project}/locations/{spec.region}"
        job = scheduler_v1.Job(
            name=self._job_name(spec.region, spec.name),
            description=spec.description(),
            schedule=spec.cron.text,
            time_zone=spec.time_zone,
            http_target=scheduler_v1.HttpTarget(
                uri=f"{COMPUTE_API}/projects/{project}/zones/{spec.zone}/instances",
                http_method=scheduler_v1.HttpMethod.POST,
                headers={"Content-Type": "application/json"},
                body=instance.encode(),
                oauth_token=scheduler_v1.OAuthToken(
                    service_account_email=self._scheduler_account, scope=CLOUD_PLATFORM_SCOPE
                ),
            ),
            # A refused insert (a 429 or 5xx) is retried twice; capacity errors come later, in the operation,
            # and wait for the next firing.
            retry_config=scheduler_v1.RetryConfig(retry_count=2),
        )
        with _google(f"creating Cloud Scheduler job {resource_name(spec.name)} in {spec.region}"):
            self._client.create_job(parent=parent, job=job)
        return [f"Cloud Scheduler job {resource_name(spec.name)} ({spec.region})"]

    def instance_body(self, spec: ScheduleSpec, boot_script: str) -> str:
        """The instances.insert body the job POSTs: the provider's own launch resource, as JSON in the API's names."""
        from google.cloud import compute_v1

        from orchestrate.provider import LaunchRequest

        request = LaunchRequest(
            spec.name, spec.profile, spec.zone, spec.spot, spec.max_lifetime_s, boot_script=boot_script
        )
        image = self._gce.resolve_image(spec.profile)
        # one name: a firing while the last machine still runs is refused
        instance = self._gce.instance_resource(request, image, spec.tags(), name=resource_name(spec.name))
        return compute_v1.Instance.to_json(instance, use_integers_for_enums=False, indent=None, sort_keys=True)

    def locations(self) -> list[str]:
        with _google("listing Cloud Scheduler locations"):
            answer = self._client.list_locations(request={"name": f"projects/{self._project_id()}"})
        return sorted(location.location_id for location in answer.locations)

    def list(self) -> list[ScheduleInfo]:
        from google.cloud import scheduler_v1

        found = []
        for location in self.locations():
            with _google(f"listing jobs in {location}"):
                jobs = list(self._client.list_jobs(parent=f"projects/{self._project_id()}/locations/{location}"))
            for job in jobs:
                job_id = job.name.rsplit("/", 1)[-1]
                if not job_id.startswith(RESOURCE_PREFIX):
                    continue
                facts = description_facts(job.description)
                last = ""
                if job.last_attempt_time:
                    outcome = "ok" if not job.status.code else f"error {job.status.code}: {job.status.message}"
                    last = f"{job.last_attempt_time.isoformat(timespec='seconds')} {outcome}"
                found.append(
                    ScheduleInfo(
                        name=job_id.removeprefix(RESOURCE_PREFIX),
                        provider=self.provider,
                        where=location,
                        cron=facts.get("cron", job.schedule),
                        expression=job.schedule,
                        time_zone=job.time_zone or "Etc/UTC",
                        state=scheduler_v1.Job.State(job.state).name,
                        profile=facts.get("profile", "?"),
                        suite=facts.get("suite", "?"),
                        last_attempt=last,
                    )
                )
        return found

    def delete(self, name: str) -> builtins.list[str]:
        """The job, wherever found; what was deleted (nothing is fine). A machine it started ends itself."""
        from google.api_core import exceptions

        deleted = []
        for location in self.locations():
            with _google(f"deleting job {resource_name(name)} in {location}"):
                try:
                    self._client.delete_job(name=self._job_name(location, name))
                except exceptions.NotFound:
                    continue
            deleted.append(f"Cloud Scheduler job {resource_name(name)} ({location})")
        return deleted


@contextlib.contextmanager
def _google(what: str) -> Iterator[None]:
    from google.api_core import exceptions
    from google.auth.exceptions import GoogleAuthError

    try:
        yield
    except exceptions.GoogleAPICallError as error:
        raise ScheduleFailure(f"gce: {what} failed: {error.message}") from None
    except (GoogleAuthError, ProviderError) as error:
        raise ScheduleFailure(f"gce: {what} failed: {error}") from None
