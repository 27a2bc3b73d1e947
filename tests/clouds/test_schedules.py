"""Scheduled runs against the clouds' doubles: `orchestrate schedule create|list|delete|collect` on moto's EventBridge
Scheduler, IAM and EC2, and on the Cloud Scheduler fake (tests/clouds/cloud_scheduler_fake.py) in front of the
Compute Engine fake.

A schedule is fired by doing exactly what the cloud's scheduler does with what the schedule stores: on AWS, the
universal target's API action (RunInstances) with the schedule's stored Input; on Google Cloud, the fake's
`jobs.run`, which sends the job's stored HTTP request (instances.insert) with an OAuth token of the job's service
account. The instance's boot script then runs on a machine (tests/clouds/machines.py: a container on the local
Docker engine running the real CPU image's containers), its logs arrive in the bucket, and `schedule collect`
brings them into logs/.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.auth.transport.requests import Request
from google.cloud import scheduler_v1
from google.oauth2 import service_account

from orchestrate.cli import main
from orchestrate.providers.aws.scheduler import RUN_INSTANCES_TARGET
from orchestrate.providers.gce.scheduler import SCHEDULER_ENDPOINT_ENV
from tests.clouds.aws_faults import Fault, FaultyMotoServer
from tests.clouds.cloud_scheduler_fake import CloudSchedulerFake
from tests.clouds.environments import SERVICE_ACCOUNT
from tests.clouds.gce_fake import GCEFake
from tests.clouds.machines import Machines, ec2_boot_scripts, ec2_power_off, gce_boot_scripts, gce_power_off, gce_tokens
from tests.clouds.test_cloud_runs import catalog_text
from tests.clouds.test_detached import GCS_BUCKET, S3_BUCKET, cpu_image, gcs
from tests.support.datasets import tiny_mlp_data
from tests.support.docker import containers_of_run

__all__ = ["cpu_image", "gcs"]  # fixtures shared with test_detached
REGIONS = ("us-east-1", "us-west-2")
CREATE = ["schedule", "create", "--cron", "0 4 * * 1", "--time-zone", "Europe/Berlin", "--suite", "quick"]
CREATE += ["--workloads", "mnist_mlp", "--backends", "jax", "--max-lifetime", "60", "--image-source", "present"]


@pytest.fixture
def catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "catalog.toml"
    path.write_text(catalog_text("kcb"))
    monkeypatch.setenv("KCB_CATALOG", str(path))
    monkeypatch.setenv("KCB_LEDGER", str(tmp_path / "ledger.jsonl"))
    return path


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ---- the Cloud Scheduler fake, through the real client -------------------------------------------------------


def fake_client(fake: CloudSchedulerFake) -> scheduler_v1.CloudSchedulerClient:
    return scheduler_v1.CloudSchedulerClient(
        transport="rest", credentials=AnonymousCredentials(), client_options=ClientOptions(api_endpoint=fake.url)
    )


def test_cloud_scheduler_fake_follows_the_documented_shapes(gce: GCEFake, tmp_path: Path) -> None:
    from google.api_core import exceptions

    fake = CloudSchedulerFake(routes={"compute.googleapis.com": gce.url})
    fake.start()
    try:
        client = fake_client(fake)
        parent = f"projects/{fake.project}/locations/us-central1"
        job = scheduler_v1.Job(
            name=f"{parent}/jobs/probe",
            schedule="*/5 * * * *",
            time_zone="Europe/Berlin",
            http_target=scheduler_v1.HttpTarget(
                uri="https://compute.googleapis.com/compute/v1/projects/x/zones/y/instances",
                http_method=scheduler_v1.HttpMethod.POST,
                body=b"{}",
                oauth_token=scheduler_v1.OAuthToken(service_account_email="nobody@x.iam.gserviceaccount.com"),
            ),
        )
        created = client.create_job(parent=parent, job=job)
        assert created.state == scheduler_v1.Job.State.ENABLED and created.http_target.body == b"{}"
        with pytest.raises(exceptions.Conflict):
            client.create_job(parent=parent, job=job)
        target = job.http_target
        elsewhere = scheduler_v1.HttpTarget(uri="https://example.com/x", oauth_token=target.oauth_token)
        refused = {
            "Schedule or time zone": scheduler_v1.Job(name=f"{parent}/jobs/b1", schedule="0 4 * *", http_target=target),
            "time zone is invalid": scheduler_v1.Job(
                name=f"{parent}/jobs/b2", schedule="0 4 * * 1", time_zone="Mars/x", http_target=target
            ),
            "Job name": scheduler_v1.Job(name=f"{parent}/jobs/b.3", schedule="0 4 * * 1", http_target=target),
            "googleapis.com": scheduler_v1.Job(name=f"{parent}/jobs/b4", schedule="0 4 * * 1", http_target=elsewhere),
        }
        for why, bad in refused.items():
            with pytest.raises(exceptions.BadRequest, match=why):
                client.create_job(parent=parent, job=bad)
        assert [j.name for j in client.list_jobs(parent=parent)] == [job.name]
        ran = client.run_job(name=job.name)  # an account the fake cannot mint a token for: the attempt fails
        assert ran.status.code == 7 and ran.last_attempt_time
        client.delete_job(name=job.name)
        with pytest.raises(exceptions.NotFound):
            client.delete_job(name=job.name)
        with pytest.raises(exceptions.NotFound):
            client.get_job(name=job.name)
    finally:
        fake.stop()


# ---- AWS: EventBridge Scheduler -> RunInstances with the launch template ------------------------------------


def schedule_of(name: str) -> dict:
    return boto3.client("scheduler", region_name="us-east-1").get_schedule(
        Name=f"kcb-schedule-{name}", GroupName="keras-cloud-bench"
    )


def aws_leftovers() -> dict[str, list[str]]:
    iam = boto3.client("iam", region_name="us-east-1")
    found = {
        "roles": [r["RoleName"] for r in iam.list_roles(PathPrefix="/keras-cloud-bench/")["Roles"]],
        "profiles": [
            p["InstanceProfileName"]
            for p in iam.list_instance_profiles(PathPrefix="/keras-cloud-bench/")["InstanceProfiles"]
        ],
    }
    for region in REGIONS:
        ec2 = boto3.client("ec2", region_name=region)
        templates = ec2.describe_launch_templates()["LaunchTemplates"]
        found[f"templates {region}"] = [t["LaunchTemplateName"] for t in templates]
        scheduler = boto3.client("scheduler", region_name=region)
        found[f"schedules {region}"] = [s["Name"] for s in scheduler.list_schedules()["Schedules"]]
    return {key: value for key, value in found.items() if value}


def test_aws_bad_inputs_create_nothing_and_a_failed_create_is_undone(
    aws: FaultyMotoServer, catalog: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=S3_BUCKET)
    base = [*CREATE, "--image", "kcb-test:cpu", "--bucket", f"s3://{S3_BUCKET}/bench"]
    for swap, message in (
        (("--profile", "aws-e2e-typo"), "error: unknown profile 'aws-e2e-typo'"),
        (("--cron", "0 4 31 2 *"), "error: cron '0 4 31 2 *': day-of-month 31 never occurs"),
        (("--time-zone", "Europe/Berln"), "error: time zone 'Europe/Berln' is not an IANA time zone name"),
    ):
        argv = [*base, "--profile", "aws-e2e"]
        where = argv.index(swap[0])
        argv[where : where + 2] = swap
        code, _, err = cli(capsys, *argv)
        assert code == 2 and err.startswith(message) and err.count("\n") == 1, err
    assert aws_leftovers() == {} and aws.injector.count("CreateRole") == 0
    aws.injector.add(Fault("CreateLaunchTemplate", "UnauthorizedOperation", "not allowed here", times=1))
    code, out, err = cli(capsys, *base, "--profile", "aws-e2e", "--name", "undone")
    assert code == 1, out + err
    assert "UnauthorizedOperation" in err and "undone: IAM role kcb-schedule-undone-machine" in err, err
    assert aws_leftovers() == {}  # the machine role and its instance profile went with the failure


@pytest.mark.slow
@pytest.mark.docker
def test_aws_schedule_fires_a_detached_run_and_goes_with_its_role(
    aws: FaultyMotoServer, catalog: Path, cpu_image: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=S3_BUCKET)
    name, bucket = "weekly-aws", f"s3://{S3_BUCKET}/bench"
    data = tiny_mlp_data(tmp_path / "mydata")  # carried to every run through the bucket, as the schedule's payload
    code, out, err = cli(
        capsys, *CREATE, "--profile", "aws-e2e", "--name", name, "--image", cpu_image, "--bucket", bucket,
        "--data-dir", str(data), "--epochs", "2",
    )  # fmt: skip
    assert code == 0, out + err
    payload = f"bench/schedules/{name}/payload.tar"
    assert f"its payload s3://{S3_BUCKET}/{payload}" in out
    assert "cron(0 4 ? * MON *) -> ec2:RunInstances (launch template kcb-schedule-weekly-aws)" in out
    assert f"Schedule {name} created" in out and "functions          -  none" in out

    # what EventBridge Scheduler holds, and what its role may do
    schedule = schedule_of(name)
    assert (schedule["ScheduleExpression"], schedule["ScheduleExpressionTimezone"]) == (
        "cron(0 4 ? * MON *)", "Europe/Berlin",
    )  # fmt: skip
    target = schedule["Target"]
    assert target["Arn"] == RUN_INSTANCES_TARGET and target["RoleArn"].endswith(f"/kcb-schedule-{name}")
    iam = boto3.client("iam", region_name="us-east-1")
    role = iam.get_role(RoleName=f"kcb-schedule-{name}")["Role"]
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "scheduler.amazonaws.com"}
    tags = {t["Key"]: t["Value"] for t in iam.list_role_tags(RoleName=role["RoleName"])["Tags"]}
    assert tags["project"] == "keras-cloud-bench" and tags["schedule"] == name and tags["profile"] == "aws-e2e"
    policy = iam.get_role_policy(RoleName=role["RoleName"], PolicyName="run-the-template")["PolicyDocument"]
    statements = {s["Sid"]: s for s in policy["Statement"]}
    template_id = json.loads(target["Input"])["LaunchTemplate"]["LaunchTemplateId"]
    assert statements["RunThisTemplate"]["Resource"].endswith(f":launch-template/{template_id}")
    assert statements["PassTheMachineRole"]["Resource"].endswith(f"role/keras-cloud-bench/kcb-schedule-{name}-machine")

    code, out, _ = cli(capsys, "schedule", "list", "--provider", "aws")
    [row] = [line.split() for line in out.splitlines() if line.startswith(name)]
    assert row[:3] == [name, "aws", "us-east-1"] and "Europe/Berlin" in row and "ENABLED" in row
    assert row[-3:] == ["aws-e2e", "/", "quick"]

    # fire it as the scheduler would: the universal target's action with the schedule's stored Input
    ec2 = boto3.client("ec2", region_name="us-east-1")
    [instance] = ec2.run_instances(**json.loads(target["Input"]))["Instances"]
    # EC2 gives the instance the template's instance profile; moto applies a template's other settings but not
    # that one, so the association EC2 would make is made here
    data = ec2.describe_launch_template_versions(LaunchTemplateId=template_id)["LaunchTemplateVersions"][0]
    profile_arn = data["LaunchTemplateData"]["IamInstanceProfile"]["Arn"]
    ec2.associate_iam_instance_profile(IamInstanceProfile={"Arn": profile_arn}, InstanceId=instance["InstanceId"])
    tags = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
    assert tags["schedule"] == name and tags["owner"] == f"schedule:{name}"  # the sweep leaves it to end itself

    machines = Machines("aws", ec2_boot_scripts(REGIONS), ec2_power_off, tmp_path / "machines")
    s3 = boto3.client("s3", region_name="us-east-1")
    prefix = f"bench/schedules/{name}/runs/"
    with machines:
        run_id = _wait(lambda: _run_with_summary(s3, prefix), machines, "the run's summary in the bucket")
        _wait(lambda: _terminated(ec2, instance["InstanceId"]), machines, "the machine to delete itself")
    summary = json.loads(s3.get_object(Bucket=S3_BUCKET, Key=f"{prefix}{run_id}/summary.json")["Body"].read())
    assert summary["state"] == "complete", summary

    logs = tmp_path / "logs"
    code, out, err = cli(capsys, "schedule", "collect", name, "--profile", "aws-e2e", "--bucket", bucket,
                         "--logs", str(logs))  # fmt: skip
    assert code == 0 and f"run {run_id}:" in out, out + err
    metadata = json.loads((logs / "aws-e2e" / run_id / "mnist_mlp_jax_synthetic.json").read_text())
    assert metadata["status"] == "complete" and metadata["platform"] == "aws-e2e" and metadata["run_id"] == run_id
    assert metadata["epochs_planned"] == 2 and metadata["run_spec"]["payload_files"] == 2  # what the schedule gave
    assert containers_of_run(run_id) == []

    s3.head_object(Bucket=S3_BUCKET, Key=payload)  # there until the schedule goes
    code, out, err = cli(capsys, "schedule", "delete", name, "--provider", "aws")
    assert code == 0 and f"deleted IAM role kcb-schedule-{name}" in out and "deleted launch template" in out, err
    assert f"deleted its payload s3://{S3_BUCKET}/{payload}" in out
    assert aws_leftovers() == {} and "Contents" not in s3.list_objects_v2(Bucket=S3_BUCKET, Prefix=payload)
    code, out, _ = cli(capsys, "schedule", "delete", name, "--provider", "aws")
    assert code == 0 and out.strip() == f"schedule {name}: nothing to delete (already gone)"
    code, out, _ = cli(capsys, "schedule", "list", "--provider", "aws")
    assert code == 0 and out.strip() == "no schedules of this project"


def _run_with_summary(s3: Any, prefix: str) -> str | None:
    keys = [item["Key"] for item in s3.list_objects_v2(Bucket=S3_BUCKET, Prefix=prefix).get("Contents", [])]
    done = [key.removeprefix(prefix).split("/")[0] for key in keys if key.endswith("/summary.json")]
    return done[0] if done else None


def _terminated(ec2: Any, instance_id: str) -> bool:
    described = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    return described["State"]["Name"] == "terminated"


def _wait(condition: Callable[[], Any], machines: Machines, what: str, timeout_s: float = 600) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    consoles = "\n".join(f"--- {i}:\n{machines.console(i)[-3000:]}" for i in machines.booted)
    raise AssertionError(f"timed out waiting for {what}; machines' consoles:\n{consoles}")


# ---- Google Cloud: Cloud Scheduler -> instances.insert --------------------------------------------------------


@pytest.fixture
def cloud_scheduler(gce: GCEFake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[CloudSchedulerFake]:
    """The fake, with Google's network: compute.googleapis.com is the Compute fake, and the token Cloud Scheduler
    gets for the service account is one the Compute fake issued for its key (tests/clouds/environments.py)."""
    key_file = tmp_path / "service-account.json"

    def token_for(email: str, scope: str) -> str | None:
        if email != SERVICE_ACCOUNT:
            return None
        credentials = service_account.Credentials.from_service_account_file(str(key_file), scopes=[scope])
        credentials.refresh(Request())
        return str(credentials.token)

    fake = CloudSchedulerFake(project=gce.project, routes={"compute.googleapis.com": gce.url}, token_for=token_for)
    fake.start()
    monkeypatch.setenv(SCHEDULER_ENDPOINT_ENV, fake.url)
    yield fake
    fake.stop()


@pytest.mark.slow
@pytest.mark.docker
def test_gce_schedule_fires_a_detached_run_through_cloud_scheduler(
    gce: GCEFake,
    cloud_scheduler: CloudSchedulerFake,
    gcs: str,
    catalog: Path,
    cpu_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KCB_GCS_API_ENDPOINT", gcs)
    name, bucket = "weekly-gce", f"gs://{GCS_BUCKET}/bench"
    code, out, err = cli(
        capsys, *CREATE, "--profile", "gce-e2e", "--name", name, "--image", cpu_image, "--bucket", bucket,
        "--service-account", SERVICE_ACCOUNT, "--provider-setting", f"service_account={SERVICE_ACCOUNT}",
    )  # fmt: skip
    assert code == 0, out + err
    assert "Cloud Scheduler job in us-central1 -> Compute Engine instances.insert in us-central1-a" in out
    [job] = cloud_scheduler.jobs()
    assert job["name"] == f"projects/{gce.project}/locations/us-central1/jobs/kcb-schedule-{name}"
    assert (job["schedule"], job["timeZone"]) == ("0 4 * * 1", "Europe/Berlin")
    target = job["httpTarget"]
    compute = f"https://compute.googleapis.com/compute/v1/projects/{gce.project}/zones/us-central1-a/instances"
    assert target["uri"] == compute
    assert target["oauthToken"]["serviceAccountEmail"] == SERVICE_ACCOUNT
    code, out, _ = cli(capsys, "schedule", "list", "--provider", "gce")
    [row] = [line.split() for line in out.splitlines() if line.startswith(name)]
    assert row[:4] == [name, "gce", "us-central1", "0"] and "ENABLED" in row

    machines = Machines(
        "gce", gce_boot_scripts(gce), gce_power_off(gce), tmp_path / "machines", token_for=gce_tokens(gce)
    )
    with machines:
        fired = fake_client(cloud_scheduler).run_job(name=job["name"])  # what the schedule does when it fires
        assert fired.status.code == 0, (fired.status, cloud_scheduler.attempts)
        [vm] = gce.live_instances()
        assert vm["name"] == f"kcb-schedule-{name}" and vm["serviceAccounts"][0]["email"] == SERVICE_ACCOUNT
        # The project's conditional grant (docs/clouds.md: delete VMs named kcb-schedule-*) as the fake models
        # grants: on the instance.
        gce.set_instance_iam_policy(gce.project, "us-central1-a", vm["name"], {"policy": {"bindings": [
            {"role": f"projects/{gce.project}/roles/kcbSelfDelete", "members": [f"serviceAccount:{SERVICE_ACCOUNT}"]}
        ]}})  # fmt: skip
        _wait(lambda: not gce.all_instances(), machines, "the VM to finish and delete itself")
    assert gce.deleted_by == {vm["name"]: f"vm:{SERVICE_ACCOUNT}"}

    logs = tmp_path / "logs"
    code, out, err = cli(capsys, "schedule", "collect", name, "--profile", "gce-e2e", "--bucket", bucket,
                         "--logs", str(logs))  # fmt: skip
    assert code == 0, out + err
    [run_dir] = list((logs / "gce-e2e").iterdir())
    metadata = json.loads((run_dir / "mnist_mlp_jax_synthetic.json").read_text())
    assert metadata["status"] == "complete" and metadata["run_id"] == run_dir.name

    code, out, _ = cli(capsys, "schedule", "delete", name, "--provider", "gce")
    assert code == 0 and out.strip() == f"deleted Cloud Scheduler job kcb-schedule-{name} (us-central1)"
    assert cloud_scheduler.jobs() == []
    code, out, _ = cli(capsys, "schedule", "delete", name, "--provider", "gce")
    assert code == 0 and "nothing to delete" in out
