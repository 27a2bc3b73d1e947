"""The AWS provider against moto's EC2 server: what it creates, how it fails over, preemption, teardown."""

from __future__ import annotations

import base64
import os
import stat
import time
from dataclasses import replace
from pathlib import Path

import boto3
import pytest

from orchestrate.provider import (
    PROJECT_TAG,
    CapacityError,
    CredentialsError,
    InstanceState,
    LaunchRequest,
    ProviderError,
)
from orchestrate.providers.aws import AWSProvider
from records.catalog import Profile, load_catalog
from tests.clouds.aws_faults import Fault, FaultyMotoServer, interrupt_spot_instance
from tests.clouds.environments import INGRESS_CIDR

AMAZON_LINUX = "resolve:ssm:/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-6.1-x86_64"
PROFILE = Profile(
    name="aws-test-g4dn",
    provider="aws",
    machine_type="g4dn.xlarge",
    accelerator="T4",
    accelerator_count=1,
    zones=("us-east-1a", "us-east-1b", "us-west-2a"),
    image=AMAZON_LINUX,
    ssh_user="ec2-user",
    docker_image="gpu",
    extra={"disk_gb": "60"},
)


def launch_request(
    zone: str = "us-east-1a", spot: bool = False, run_id: str = "20250101T000000Z-a1b2"
) -> LaunchRequest:
    return LaunchRequest(
        run_id=run_id,
        profile=PROFILE,
        zone=zone,
        spot=spot,
        max_lifetime_s=5400,
        tags={"owner": "alice@laptop", "expiry": str(int(time.time()) + 5400)},
    )


def ec2(region: str = "us-east-1"):
    return boto3.client("ec2", region_name=region)


def live_instances(region: str = "us-east-1") -> list[dict]:
    pages = ec2(region).describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}]
    )
    return [i for r in pages["Reservations"] for i in r["Instances"]]


def assert_nothing_left(*regions: str) -> None:
    for region in regions:
        assert live_instances(region) == []
        assert ec2(region).describe_key_pairs()["KeyPairs"] == []
        groups = ec2(region).describe_security_groups()["SecurityGroups"]
        assert [g["GroupName"] for g in groups if g["GroupName"] != "default"] == []


def tags_of(resource: dict) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in resource.get("Tags", [])}


def test_credentials_checked_through_the_standard_chain(aws: FaultyMotoServer, monkeypatch) -> None:
    AWSProvider().check_credentials()
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(CredentialsError, match=r"no AWS credentials found.*AWS_PROFILE") as failure:
        AWSProvider().check_credentials()
    assert "kcb-test-secret" not in str(failure.value)
    assert aws.injector.count("RunInstances") == 0


def test_launch_creates_tagged_resources_and_the_self_destruct(aws: FaultyMotoServer) -> None:
    provider = AWSProvider()
    instance = provider.launch(launch_request())
    running = provider.wait_until_running(instance, timeout_s=30)

    described = live_instances()[0]
    assert described["InstanceType"] == "g4dn.xlarge"
    assert described["Placement"]["AvailabilityZone"] == "us-east-1a"
    assert described.get("InstanceLifecycle") is None  # on-demand
    expected = {"project": PROJECT_TAG, "run-id": "20250101T000000Z-a1b2", "owner": "alice@laptop"}
    assert expected.items() <= tags_of(described).items()
    assert "expiry" in tags_of(described)
    volume = ec2().describe_volumes(VolumeIds=[described["BlockDeviceMappings"][0]["Ebs"]["VolumeId"]])
    assert volume["Volumes"][0]["Size"] == 60
    assert expected.items() <= tags_of(volume["Volumes"][0]).items()

    attribute = ec2().describe_instance_attribute(InstanceId=instance.instance_id, Attribute="userData")
    user_data = base64.b64decode(attribute["UserData"]["Value"]).decode()
    assert "shutdown -h +90" in user_data  # 5400 s
    shutdown = ec2().describe_instance_attribute(
        InstanceId=instance.instance_id, Attribute="instanceInitiatedShutdownBehavior"
    )
    assert shutdown["InstanceInitiatedShutdownBehavior"]["Value"] == "terminate"

    [group] = [g for g in ec2().describe_security_groups()["SecurityGroups"] if g["GroupName"] != "default"]
    assert expected.items() <= tags_of(group).items()
    assert [(p["FromPort"], p["ToPort"], [r["CidrIp"] for r in p["IpRanges"]]) for p in group["IpPermissions"]] == [
        (22, 22, [INGRESS_CIDR])
    ]
    [key_pair] = ec2().describe_key_pairs(IncludePublicKey=True)["KeyPairs"]
    assert expected.items() <= tags_of(key_pair).items()
    key_file = running.ssh.key_filename
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    assert running.ssh.host == described["PublicIpAddress"]
    assert running.ssh.user == "ec2-user"

    provider.terminate(running)
    provider.release_run(instance.tags["run-id"])
    assert_nothing_left("us-east-1")
    assert not os.path.exists(key_file)
    provider.terminate(running)  # idempotent: a second teardown (Ctrl-C, then the sweep) must not fail
    provider.release_run(instance.tags["run-id"])


def test_the_private_key_matches_the_imported_public_key(aws: FaultyMotoServer) -> None:
    from cryptography.hazmat.primitives import serialization

    provider = AWSProvider()
    instance = provider.wait_until_running(provider.launch(launch_request()), timeout_s=30)
    private = serialization.load_ssh_private_key(Path(instance.ssh.key_filename).read_bytes(), password=None)
    public = private.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    [key_pair] = ec2().describe_key_pairs(IncludePublicKey=True)["KeyPairs"]
    assert key_pair["PublicKey"].split()[:2] == public.decode().split()[:2]
    provider.terminate(instance)
    provider.release_run(instance.tags["run-id"])


def test_ssh_address_setting_routes_ssh_elsewhere(aws: FaultyMotoServer) -> None:
    forwarded = AWSProvider.from_settings({"ssh_address": "127.0.0.1:2222"})
    instance = forwarded.wait_until_running(forwarded.launch(launch_request()), timeout_s=30)
    assert (instance.ssh.host, instance.ssh.port) == ("127.0.0.1", 2222)
    in_vpc = AWSProvider.from_settings({"ssh_address": "{private_ip}"})
    other = in_vpc.wait_until_running(in_vpc.launch(launch_request()), timeout_s=30)
    assert other.ssh.host == next(
        i["PrivateIpAddress"] for i in live_instances() if i["InstanceId"] == other.instance_id
    )
    for launched in (instance, other):
        forwarded.terminate(launched)
    forwarded.release_run(instance.tags["run-id"])
    assert_nothing_left("us-east-1")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"ssh_address": "{public_ip}:ssh"}, "ssh_address='{public_ip}:ssh' is not HOST"),
        ({"ssh_address": "{nat_ip}"}, "ssh_address='{nat_ip}' is not HOST"),
        ({"ssh_address": "10.0.0.1:70000"}, "is not HOST"),
        ({"region": "us-east-1"}, "unknown setting.*region"),
    ],
)
def test_bad_settings_are_refused_by_name(settings: dict, message: str) -> None:
    with pytest.raises(ProviderError, match=message):
        AWSProvider.from_settings(settings)


def test_spot_request_and_interruption_reads_as_preempted(aws: FaultyMotoServer) -> None:
    provider = AWSProvider()
    instance = provider.wait_until_running(provider.launch(launch_request(spot=True)), timeout_s=30)
    assert live_instances()[0]["InstanceLifecycle"] == "spot"
    assert provider.state(instance) is InstanceState.RUNNING

    interrupt_spot_instance("us-east-1", instance.instance_id)
    assert provider.state(instance) is InstanceState.PREEMPTED
    provider.terminate(instance)
    provider.release_run(instance.tags["run-id"])
    assert_nothing_left("us-east-1")


def test_our_own_termination_is_not_a_preemption(aws: FaultyMotoServer) -> None:
    provider = AWSProvider()
    instance = provider.wait_until_running(provider.launch(launch_request(spot=True)), timeout_s=30)
    provider.terminate(instance)
    assert provider.state(instance) is InstanceState.TERMINATED
    provider.release_run(instance.tags["run-id"])


def test_capacity_error_fails_over_to_the_next_zone(aws: FaultyMotoServer) -> None:
    fault = aws.injector.add(
        Fault(
            "RunInstances",
            "InsufficientInstanceCapacity",
            "We currently do not have sufficient g4dn.xlarge capacity in the Availability Zone you requested "
            "(us-east-1a).",
            times=None,
            params={"Placement.AvailabilityZone": "us-east-1a"},
        )
    )
    provider = AWSProvider()
    with pytest.raises(CapacityError, match=r"us-east-1a: no capacity \(InsufficientInstanceCapacity\)"):
        provider.launch(launch_request("us-east-1a"))
    assert fault.hits == 5  # botocore's standard mode retried the 500 answer 4 times, as AWS recommends
    instance = provider.launch(launch_request("us-east-1b"))
    assert live_instances()[0]["Placement"]["AvailabilityZone"] == "us-east-1b"
    provider.terminate(instance)
    provider.release_run(instance.tags["run-id"])
    assert_nothing_left("us-east-1")


def test_failover_across_regions_releases_both_regions(aws: FaultyMotoServer) -> None:
    aws.injector.add(Fault("RunInstances", "Unsupported", "g4dn.xlarge is not supported in us-east-1b", None))
    provider = AWSProvider()
    with pytest.raises(CapacityError, match="Unsupported"):
        provider.launch(launch_request("us-east-1b"))
    aws.injector.clear()
    instance = provider.launch(launch_request("us-west-2a"))
    assert live_instances("us-west-2")[0]["Placement"]["AvailabilityZone"] == "us-west-2a"
    provider.terminate(instance)
    provider.release_run(instance.tags["run-id"])
    assert_nothing_left("us-east-1", "us-west-2")


def test_quota_errors_say_which_quota(aws: FaultyMotoServer) -> None:
    aws.injector.add(
        Fault(
            "RunInstances",
            "VcpuLimitExceeded",
            "You have requested more vCPU capacity than your current "
            "vCPU limit of 0 allows for the instance bucket that the specified instance type belongs to.",
            None,
        )
    )
    provider = AWSProvider()
    with pytest.raises(CapacityError, match=r"quota exceeded.*Service Quotas"):
        provider.launch(launch_request(spot=True))
    provider.release_run(launch_request().run_id)
    assert_nothing_left("us-east-1")


def test_throttling_is_retried_with_backoff(aws: FaultyMotoServer) -> None:
    provider = AWSProvider()
    instance = provider.launch(launch_request())
    fault = aws.injector.add(Fault("DescribeInstances", "RequestLimitExceeded", "Request limit exceeded.", times=2))
    calls_before = aws.injector.count("DescribeInstances")
    assert provider.state(instance) in (InstanceState.PENDING, InstanceState.RUNNING)
    assert fault.hits == 2
    assert aws.injector.count("DescribeInstances") - calls_before == 3  # two throttled, then the answer
    provider.terminate(instance)
    provider.release_run(instance.tags["run-id"])


def test_list_instances_finds_every_region_by_the_project_tag(aws: FaultyMotoServer, monkeypatch) -> None:
    monkeypatch.delenv("KCB_AWS_REGIONS")  # search every region the account has, as by default
    provider = AWSProvider()
    east = provider.launch(launch_request("us-east-1a", run_id="20250101T000000Z-0001"))
    west = provider.launch(launch_request("us-west-2a", run_id="20250101T000000Z-0002"))
    ec2().run_instances(ImageId=live_instances()[0]["ImageId"], MinCount=1, MaxCount=1)  # not ours

    fresh = AWSProvider()  # a new process knows nothing of the launches: the sweep's situation
    found = {i.instance_id: i for i in fresh.list_instances()}
    assert set(found) == {east.instance_id, west.instance_id}
    assert found[west.instance_id].zone == "us-west-2a"
    assert found[west.instance_id].tags["run-id"] == "20250101T000000Z-0002"

    for instance in found.values():
        fresh.terminate(instance)
        fresh.release_run(instance.tags["run-id"])
    assert fresh.list_instances() == []
    assert ec2().describe_key_pairs()["KeyPairs"] == []
    assert ec2("us-west-2").describe_security_groups(GroupNames=["default"])  # the default group stays


def test_bad_image_parameter_fails_before_anything_is_created(aws: FaultyMotoServer) -> None:
    profile = replace(PROFILE, image="resolve:ssm:/aws/service/no/such/parameter")
    with pytest.raises(ProviderError, match="image parameter /aws/service/no/such/parameter"):
        AWSProvider().launch(replace(launch_request(), profile=profile))
    assert_nothing_left("us-east-1")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"zones": ()}, "zones is required"),
        ({"zones": ("us-east-1",)}, "not an availability zone"),
        ({"machine_type": None}, "machine_type is required"),
        ({"image": "ubuntu-22.04"}, "neither an AMI id"),
        ({"extra": {"disk_size": "50"}}, "unknown extra setting.*disk_size"),
        ({"extra": {"disk_gb": "big"}}, "extra.disk_gb"),
    ],
)
def test_profile_validation_names_the_field(change: dict, message: str) -> None:
    with pytest.raises(ProviderError, match=message):
        AWSProvider().validate_profile(replace(PROFILE, **change))


def test_every_aws_profile_in_the_catalog_is_launchable() -> None:
    profiles = [p for p in load_catalog().values() if p.provider == "aws"]
    assert profiles
    for profile in profiles:
        AWSProvider().validate_profile(profile)


def test_an_unreachable_endpoint_is_a_provider_error(aws: FaultyMotoServer, monkeypatch) -> None:
    provider = AWSProvider()
    instance = provider.launch(launch_request())
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens on the discard port
    with pytest.raises(ProviderError, match=r"cannot describe i-"):
        AWSProvider().state(instance)  # the lifecycle reports a ProviderError and goes on
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws.url)
    provider.terminate(instance)
    provider.release_run(instance.tags["run-id"])


def test_an_unreachable_api_is_not_called_bad_credentials_and_the_dry_run_still_plans(
    aws: FaultyMotoServer, monkeypatch, tmp_path, capsys
) -> None:
    from orchestrate.cli import main
    from orchestrate.provider import UnreachableError

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens on the discard port
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    with pytest.raises(UnreachableError, match=r"^cannot reach the AWS API, credentials not checked: ") as failure:
        AWSProvider().check_credentials()
    assert not isinstance(failure.value, CredentialsError)
    args = ["run", "--profile", "aws-g4dn.xlarge", "--ledger", str(tmp_path / "l"), "--logs", str(tmp_path / "logs")]
    assert main([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "Plan (dry run: nothing is launched)" in out and "aws-g4dn.xlarge" in out
    assert "credentials  cannot reach the AWS API" in out
    assert main(args) == 2  # a real run refuses to start
    assert capsys.readouterr().err.startswith("error: cannot reach the AWS API, credentials not checked")


def test_provider_private_data_travels_with_the_instance(aws: FaultyMotoServer) -> None:
    """The SSH login the profile names lives on the Instance, not in the provider object that launched it."""
    instance = AWSProvider().launch(launch_request(run_id="20250101T000000Z-priv"))
    assert instance.private == {"ssh_user": "ec2-user"}
    other = AWSProvider()  # e.g. a relaunched orchestrator's, or the sweep's
    try:
        assert other.wait_until_running(instance, timeout_s=30).ssh.user == "ec2-user"
    finally:
        other.terminate(instance)
        other.release_run("20250101T000000Z-priv")


def test_the_end_time_is_read_from_ec2s_state_transition_reason() -> None:
    """EC2 documents `User initiated (YYYY-MM-DD hh:mm:ss GMT)`; moto writes UTC; a reason without a time is None."""
    from orchestrate.providers.aws.compute import transition_time

    assert transition_time("User initiated (2016-05-10 22:59:27 GMT)") == 1462921167.0
    assert transition_time("User initiated (2016-05-10 22:59:27 UTC)") == 1462921167.0
    assert transition_time("Server.SpotInstanceTermination") is None
    assert transition_time("") is None
