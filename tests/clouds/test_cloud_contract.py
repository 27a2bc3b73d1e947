"""Both cloud providers pass the provider contract (orchestrate/testing/contract.py), SSH login included."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from orchestrate.provider import Provider
from orchestrate.providers.aws import AWSProvider
from orchestrate.providers.gce import GCEProvider
from orchestrate.testing import ProviderContract
from orchestrate.testing.sshd import SSHServer
from records.catalog import Profile
from tests.clouds.aws_faults import FaultyMotoServer
from tests.clouds.gce_fake import GCEFake
from tests.clouds.guests import GuestKeys, ec2_running_instance_keys, gce_running_instance_keys

pytestmark = pytest.mark.sshd


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


@pytest.mark.parametrize(
    ("leaky", "message"),
    [
        (HidesItsLeftovers, "killed after launch: leftover_runs\\(\\) does not name run"),
        (ReleasesNothing, "release_run left resources that leftover_runs still names"),
    ],
)
def test_the_contract_fails_a_provider_that_can_leak(
    leaky: type[AWSProvider], message: str, aws: FaultyMotoServer, sshd: SSHServer
) -> None:
    contract = TestAWSContract()
    contract.server = sshd
    provider = leaky.from_settings({"ssh_address": f"127.0.0.1:{sshd.port}"})
    request = contract.make_request(contract.make_profile())
    try:
        with pytest.raises(AssertionError, match=message):
            contract.test_a_crash_at_any_step_leaves_nothing_the_sweep_cannot_find(provider, request)
    finally:
        AWSProvider().release_run(request.run_id)
    assert request.run_id not in AWSProvider().leftover_runs()
