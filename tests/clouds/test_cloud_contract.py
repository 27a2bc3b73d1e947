"""Both cloud providers pass the provider contract (orchestrate/testing/contract.py), SSH login included."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import boto3
import pytest

from orchestrate.provider import PROJECT_TAG, Provider
from orchestrate.providers.aws import AWSProvider
from orchestrate.providers.cloud import forget_run_key, local_key_runs, run_key_path
from orchestrate.providers.gce import GCEProvider
from orchestrate.testing import ProviderContract
from orchestrate.testing.sshd import SSHServer
from records.catalog import Profile
from tests.clouds.aws_faults import FaultyMotoServer
from tests.clouds.gce_fake import GCEFake
from tests.clouds.guests import GuestKeys, ec2_running_instance_keys, gce_running_instance_keys

pytestmark = pytest.mark.sshd


def local_key_file(run_id: str) -> dict[str, Callable[[], None]]:
    return {"local key file": lambda: forget_run_key(run_id)} if run_key_path(run_id).exists() else {}


class TestAWSContract(ProviderContract):
    ssh_reachable = True
    boot_timeout_s = 30.0

    @pytest.fixture(autouse=True)
    def cloud(self, aws: FaultyMotoServer, sshd: SSHServer) -> Iterator[None]:
        self.server = sshd
        with GuestKeys(sshd, ec2_running_instance_keys(("us-east-1",))):
            yield

    def make_provider(self) -> Provider:
        return AWSProvider.from_settings({"ssh_address": f"127.0.0.1:{self.server.port}"})

    def run_resources(self, run_id: str) -> dict[str, Callable[[], None]]:
        """Read from moto with a plain boto3 client, not through AWSProvider."""
        ec2 = boto3.client("ec2", region_name="us-east-1")
        run = [{"Name": "tag:project", "Values": [PROJECT_TAG]}, {"Name": "tag:run-id", "Values": [run_id]}]
        found: dict[str, Callable[[], None]] = {}
        for key in ec2.describe_key_pairs(Filters=run)["KeyPairs"]:
            found["key pair"] = lambda name=key["KeyName"]: ec2.delete_key_pair(KeyName=name)
        for group in ec2.describe_security_groups(Filters=run)["SecurityGroups"]:
            found["security group"] = lambda group_id=group["GroupId"]: ec2.delete_security_group(GroupId=group_id)
        return found | local_key_file(run_id)

    def make_profile(self) -> Profile:
        return Profile(
            name="aws-contract",
            provider="aws",
            machine_type="c7i.large",
            zones=("us-east-1a",),
            image="resolve:ssm:/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-6.1-x86_64",
            ssh_user=self.server.user,
        )


class TestGCEContract(ProviderContract):
    ssh_reachable = True
    boot_timeout_s = 30.0

    @pytest.fixture(autouse=True)
    def cloud(self, gce: GCEFake, sshd: SSHServer) -> Iterator[None]:
        self.server = sshd
        with GuestKeys(sshd, gce_running_instance_keys(gce)):
            yield

    def make_provider(self) -> Provider:
        return GCEProvider.from_settings({"ssh_address": f"127.0.0.1:{self.server.port}"})

    def run_resources(self, run_id: str) -> dict[str, Callable[[], None]]:
        return local_key_file(run_id)  # nothing of a run outlives a GCE VM in the cloud

    def make_profile(self) -> Profile:
        return Profile(
            name="gce-contract",
            provider="gce",
            machine_type="n2-highcpu-2",
            zones=("us-central1-a",),
            image="projects/debian-cloud/global/images/family/debian-12",
            ssh_user=self.server.user,
        )


class HidesItsLeftovers(AWSProvider):
    """Leaks after a crash: the sweep is never told of the key pair and security group a launch created."""

    def leftover_runs(self) -> dict[str, dict[str, str]]:
        return {}


class ReleasesNothing(AWSProvider):
    def release_run(self, run_id: str) -> None:
        pass


class LeavesTheCloudKeyUnlisted(AWSProvider):
    """Deletes the security groups and the local key but not the key pair, and never lists key pairs: its own
    `leftover_runs` is empty after `release_run`, so only the cloud itself shows the leak."""

    def release_run(self, run_id: str) -> None:
        ec2 = self.client("ec2", "us-east-1")
        run = [{"Name": "tag:project", "Values": [PROJECT_TAG]}, {"Name": "tag:run-id", "Values": [run_id]}]
        for group in ec2.describe_security_groups(Filters=run)["SecurityGroups"]:
            ec2.delete_security_group(GroupId=group["GroupId"])
        forget_run_key(run_id)

    def leftover_runs(self) -> dict[str, dict[str, str]]:
        return KeyPairsUnlisted.leftover_runs(self)


class KeyPairsUnlisted(AWSProvider):
    """Releases everything, but a key pair left alone (a kill half-way through release_run) is never swept."""

    def leftover_runs(self) -> dict[str, dict[str, str]]:
        ec2 = self.client("ec2", "us-east-1")
        groups = ec2.describe_security_groups(Filters=[{"Name": "tag:project", "Values": [PROJECT_TAG]}])
        found: dict[str, dict[str, str]] = {run_id: {} for run_id in local_key_runs()}
        for group in groups["SecurityGroups"]:
            tags = {tag["Key"]: tag["Value"] for tag in group.get("Tags", [])}
            found[tags["run-id"]] = tags
        return found


CRASH = "test_a_crash_at_any_step_leaves_nothing_the_sweep_cannot_find"
ALONE = "test_each_resource_left_alone_is_found_by_the_sweep"


@pytest.mark.parametrize(
    ("leaky", "contract_test", "message"),
    [
        (
            HidesItsLeftovers,
            CRASH,
            "killed after launch: the cloud holds the run's key pair, local key file, "
            "security group, but leftover_runs\\(\\) does not name run",
        ),
        (ReleasesNothing, CRASH, "release_run left the run's key pair, local key file, security group in the cloud"),
        (LeavesTheCloudKeyUnlisted, CRASH, "release_run left the run's key pair in the cloud"),
        (KeyPairsUnlisted, ALONE, "only the run's key pair left: leftover_runs\\(\\) does not name run"),
    ],
)
def test_the_contract_fails_a_provider_that_can_leak(
    leaky: type[AWSProvider], contract_test: str, message: str, aws: FaultyMotoServer, sshd: SSHServer
) -> None:
    contract = TestAWSContract()
    contract.server = sshd
    provider = leaky.from_settings({"ssh_address": f"127.0.0.1:{sshd.port}"})
    request = contract.make_request(contract.make_profile())
    try:
        with pytest.raises(AssertionError, match=message):
            getattr(contract, contract_test)(provider, request)
    finally:
        honest = AWSProvider()
        for run_id in honest.leftover_runs():
            honest.release_run(run_id)
    assert AWSProvider().leftover_runs() == {}


class SaysItCreatesNothing(TestAWSContract):
    """A careless plug-in's contract: it declares that launch creates nothing per run, an attribute the suite once
    trusted; the suite asks the cloud instead."""

    creates_run_resources = False


class ReadsNothingOfTheCloud(SaysItCreatesNothing):
    def run_resources(self, run_id: str) -> dict[str, Callable[[], None]]:
        return ProviderContract.run_resources(self, run_id)  # left out, as the flag let it be


@pytest.mark.parametrize(
    ("contract_class", "failure", "message"),
    [
        (SaysItCreatesNothing, AssertionError, "the cloud holds the run's key pair, local key file, security group"),
        (ReadsNothingOfTheCloud, NotImplementedError, "define run_resources\\(run_id\\) in the contract subclass"),
    ],
)
def test_the_contract_asks_the_cloud_not_the_contracts_flag(
    contract_class: type[TestAWSContract],
    failure: type[Exception],
    message: str,
    aws: FaultyMotoServer,
    sshd: SSHServer,
) -> None:
    contract = contract_class()
    contract.server = sshd
    provider = HidesItsLeftovers.from_settings({"ssh_address": f"127.0.0.1:{sshd.port}"})
    request = contract.make_request(contract.make_profile())
    try:
        with pytest.raises(failure, match=message):
            contract.test_a_crash_at_any_step_leaves_nothing_the_sweep_cannot_find(provider, request)
    finally:
        honest = AWSProvider()
        for run_id in honest.leftover_runs():
            honest.release_run(run_id)
    assert AWSProvider().leftover_runs() == {}
