"""EventBridge Scheduler, the AWS provider's scheduler (`Capability.SCHEDULER`): a schedule whose universal target
`arn:aws:scheduler:::aws-sdk:ec2:runInstances` calls RunInstances with a launch template; the template carries the
image, the machine type, the boot script (user data), the machine's instance profile and the tags. The schedule
assumes a role of its own that may only run that template and pass that one machine role (`iam`).
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import json
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from orchestrate.provider import PROJECT_TAG, ProviderError
from orchestrate.providers.aws.iam import (
    EC2_TRUST,
    ROLE_PATH,
    SCHEDULE_GROUP,
    TAGGED_AT_LAUNCH,
    schedule_machine_policy,
    scheduler_policy,
    trust_policy,
)
from orchestrate.schedule_spec import (
    RESOURCE_PREFIX,
    ScheduleFailure,
    ScheduleInfo,
    ScheduleSpec,
    Undo,
    description_facts,
    resource_name,
    undoing,
)
from orchestrate.storage import StorageURL

if TYPE_CHECKING:
    from records.catalog import Profile


class EC2(Protocol):
    """What the scheduler uses of `AWSProvider`: its clients, regions, credentials check and image lookup."""

    def client(self, service: str, region: str) -> Any: ...
    def regions(self) -> list[str]: ...
    def check_credentials(self) -> None: ...
    def resolve_image(self, region: str, profile: Profile) -> tuple[str, dict[str, Any] | None]: ...


RUN_INSTANCES_TARGET = "arn:aws:scheduler:::aws-sdk:ec2:runInstances"
IAM_PROPAGATION_S = 60.0  # a new role can take seconds before another service may assume it


class AWSScheduler:
    """EventBridge Scheduler -> ec2:RunInstances with a launch template."""

    provider: ClassVar[str] = "aws"

    def __init__(self, provider: EC2) -> None:
        self._provider = provider

    def _client(self, service: str, region: str = "us-east-1") -> Any:
        return self._provider.client(service, region)

    def check_credentials(self) -> None:
        self._provider.check_credentials()

    def how(self, spec: ScheduleSpec) -> str:
        return (
            f"EventBridge Scheduler in {spec.region}, {spec.cron.eventbridge()} -> ec2:RunInstances "
            f"(launch template {resource_name(spec.name)}) in {spec.zone}"
        )

    def regions(self) -> list[str]:
        """The regions the sweep searches (`AWSProvider.regions`)."""
        try:
            return self._provider.regions()
        except ProviderError as error:
            raise ScheduleFailure(str(error)) from None

    def exists(self, spec: ScheduleSpec) -> bool:
        try:
            self._client("scheduler", spec.region).get_schedule(Name=resource_name(spec.name), GroupName=SCHEDULE_GROUP)
        except ClientError as error:
            if _aws_code(error) == "ResourceNotFoundException":
                return False
            raise _aws_error(f"reading schedule {spec.name}", error) from None
        return True

    def create(self, spec: ScheduleSpec, boot_script: str, storage: StorageURL) -> list[str]:
        """The machine's role and instance profile, the launch template, the schedule's role, the schedule."""
        region, base = spec.region, resource_name(spec.name)
        iam, ec2 = self._client("iam"), self._client("ec2", region)
        with _aws("reading the account id"):
            account = self._client("sts").get_caller_identity()["Account"]
        image_id, root = self._provider.resolve_image(region, spec.profile)
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
                policy = schedule_machine_policy(storage.bucket, storage.prefix, spec.name)
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
                    payload=facts.get("payload", ""),
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

    try:
        yield
    except ClientError as error:
        raise _aws_error(what, error) from None
    except BotoCoreError as error:
        raise ScheduleFailure(f"aws: {what} failed: {error}") from None
