"""The IAM policies of the AWS provider, in one place: the machine's own role (a detached run's, a schedule's),
and the role EventBridge Scheduler assumes to launch a schedule's machine. Each grants the least that works."""

from __future__ import annotations

from typing import Any

from orchestrate.provider import PROJECT_TAG

ROLE_PATH = "/keras-cloud-bench/"  # every role and instance profile the project creates lives under this path
SCHEDULE_GROUP = PROJECT_TAG  # one EventBridge Scheduler group holds every schedule of the project
TAGGED_AT_LAUNCH = ("instance", "volume", "spot-instances-request")  # what a schedule's launch template tags

EC2_TRUST = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}


def run_role_name(run_id: str) -> str:
    """`kcb-<run id>`, within IAM's 64 characters."""
    return f"kcb-{run_id}"[:64]


def machine_policy(bucket: str, objects: str, own_tags: dict[str, str], list_objects: bool = False) -> dict[str, Any]:
    """A machine's permissions: read and write the objects under `objects` of `bucket` (read for a relaunch's
    resume, write for its logs), list them only when `list_objects` (a scheduled machine names its run at boot
    and looks for its own), and terminate the instances carrying every tag of `own_tags`: itself."""
    statements: list[dict[str, Any]] = [
        {
            "Sid": "RunObjects",
            "Effect": "Allow",
            "Action": ["s3:PutObject", "s3:GetObject"],
            "Resource": f"arn:aws:s3:::{bucket}/{objects}*",
        },
        {
            "Sid": "TerminateItself",
            "Effect": "Allow",
            "Action": "ec2:TerminateInstances",
            "Resource": "arn:aws:ec2:*:*:instance/*",
            "Condition": {"StringEquals": {f"aws:ResourceTag/{key}": value for key, value in own_tags.items()}},
        },
    ]
    if list_objects:
        statements.insert(
            1,
            {
                "Sid": "ListRunPrefix",
                "Effect": "Allow",
                "Action": "s3:ListBucket",
                "Resource": f"arn:aws:s3:::{bucket}",
                "Condition": {"StringLike": {"s3:prefix": f"{objects}*"}},
            },
        )
    return {"Version": "2012-10-17", "Statement": statements}


def run_role_policy(storage_prefix: str, run_id: str) -> dict[str, Any]:
    """A detached run's machine: its run's objects (`s3://bucket/<prefix>runs/<id>/`), never listing the bucket,
    and the instances tagged with its run id."""
    bucket, _, objects = storage_prefix.removeprefix("s3://").partition("/")
    return machine_policy(bucket, objects, {"run-id": run_id})


def schedule_machine_policy(bucket: str, prefix: str, name: str) -> dict[str, Any]:
    """A schedule's machine, for every run of the schedule (named at boot): the objects under `<prefix>runs/`, reading
    the schedule's payload (`<prefix>payload.tar`), and the instances of this schedule (tagged `schedule=<name>`),
    which is the machine itself (one at a time)."""
    policy = machine_policy(bucket, f"{prefix}runs/", {"schedule": name, "project": PROJECT_TAG}, list_objects=True)
    payload = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{bucket}/{prefix}payload.tar"}
    policy["Statement"].append({"Sid": "ReadThePayload", **payload})
    return policy


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
