"""The GCE provider against the local Compute Engine fake, through the real google-cloud-compute client."""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import replace
from pathlib import Path

import pytest

from orchestrate.provider import (
    PROJECT_TAG,
    CapacityError,
    CredentialsError,
    InstanceState,
    LaunchRequest,
    ProviderError,
)
from orchestrate.providers.gce import GCEProvider
from records.catalog import Profile, load_catalog
from tests.clouds.gce_fake import GCEFake

PROFILE = Profile(
    name="gce-test-t4",
    provider="gce",
    machine_type="n1-standard-4",
    accelerator="nvidia-tesla-t4",
    accelerator_count=1,
    zones=("us-central1-a", "us-central1-b"),
    image="projects/deeplearning-platform-release/global/images/family/common-cu128-ubuntu-2204-nvidia-570",
    ssh_user="bench",
    docker_image="gpu",
    extra={"disk_gb": "100"},
)
RUN_ID = "20250101T000000Z-A1B2"


def launch_request(zone: str = "us-central1-a", spot: bool = False, profile: Profile = PROFILE) -> LaunchRequest:
    return LaunchRequest(
        run_id=RUN_ID,
        profile=profile,
        zone=zone,
        spot=spot,
        max_lifetime_s=5400,
        tags={"owner": "Alice@Laptop", "expiry": "1900000000"},
    )


def metadata(resource: dict) -> dict[str, str]:
    return {item["key"]: item["value"] for item in resource["metadata"].get("items", [])}


def test_credentials_come_from_application_default_credentials(gce: GCEFake, monkeypatch) -> None:
    GCEProvider().check_credentials()  # a token was obtained from the key file's token_uri
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS")
    with pytest.raises(CredentialsError, match="gcloud auth application-default login"):
        GCEProvider().check_credentials()
    assert gce.requests == []  # nothing reached the Compute API


def test_a_key_google_does_not_know_is_refused_before_launch(gce: GCEFake, tmp_path, monkeypatch) -> None:
    key_file = json.loads(Path(os.environ["GOOGLE_APPLICATION_CREDENTIALS"]).read_text())
    key_file["client_email"] = "revoked@kcb-test-project.iam.gserviceaccount.com"
    (tmp_path / "revoked.json").write_text(json.dumps(key_file))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "revoked.json"))
    with pytest.raises(CredentialsError, match=r"Google credentials unusable.*invalid_grant") as failure:
        GCEProvider().check_credentials()
    assert "PRIVATE KEY" not in str(failure.value)


def test_an_unreachable_token_endpoint_is_not_called_bad_credentials(gce: GCEFake, tmp_path, monkeypatch) -> None:
    from orchestrate.provider import UnreachableError

    key_file = json.loads(Path(os.environ["GOOGLE_APPLICATION_CREDENTIALS"]).read_text())
    key_file["token_uri"] = "http://127.0.0.1:9/token"  # nothing listens on the discard port
    (tmp_path / "offline.json").write_text(json.dumps(key_file))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "offline.json"))
    with pytest.raises(UnreachableError, match=r"^cannot reach Google's token endpoint, credentials not checked"):
        GCEProvider().check_credentials()


def test_launch_spot_gpu_vm_with_labels_key_and_self_destruct(gce: GCEFake) -> None:
    provider = GCEProvider()
    instance = provider.launch(launch_request(spot=True))
    running = provider.wait_until_running(instance, timeout_s=30)

    [resource] = gce.live_instances()
    assert resource["name"] == instance.instance_id
    assert resource["machineType"].endswith("/zones/us-central1-a/machineTypes/n1-standard-4")
    assert resource["guestAccelerators"] == [
        {
            "acceleratorType": "https://www.googleapis.com/compute/v1/projects/kcb-test-project/zones/"
            "us-central1-a/acceleratorTypes/nvidia-tesla-t4",
            "acceleratorCount": 1,
        }
    ]
    scheduling = resource["scheduling"]
    assert scheduling["provisioningModel"] == "SPOT"
    assert scheduling["instanceTerminationAction"] == "DELETE"
    assert scheduling["onHostMaintenance"] == "TERMINATE"
    assert scheduling["automaticRestart"] is False
    assert scheduling["maxRunDuration"] == {"seconds": "5400"}
    assert resource["labels"] == {
        "project": PROJECT_TAG,
        "run-id": "20250101t000000z-a1b2",
        "owner": "alice_laptop",
        "expiry": "1900000000",
    }
    items = metadata(resource)
    assert json.loads(items["kcb-tags"])["run-id"] == RUN_ID
    assert items["install-nvidia-driver"] == "True"
    user, public_key = items["ssh-keys"].split(":", 1)
    assert user == "bench"
    assert public_key.startswith("ssh-ed25519 ")

    assert running.ssh.host == resource["networkInterfaces"][0]["accessConfigs"][0]["natIP"]
    assert running.ssh.user == "bench"
    assert stat.S_IMODE(os.stat(running.ssh.key_filename).st_mode) == 0o600
    assert provider.state(running) is InstanceState.RUNNING

    provider.terminate(running)
    assert gce.all_instances() == []
    assert provider.state(running) is InstanceState.TERMINATED
    provider.terminate(running)  # idempotent
    provider.release_run(RUN_ID)
    assert not os.path.exists(running.ssh.key_filename)


def test_standard_vm_also_gets_the_run_duration_limit(gce: GCEFake) -> None:
    provider = GCEProvider()
    cpu = Profile(
        name="gce-test-cpu",
        provider="gce",
        machine_type="n2-highcpu-16",
        zones=("us-central1-a",),
        image="projects/debian-cloud/global/images/family/debian-12",
        extra={"min_cpu_platform": "Intel Ice Lake"},
    )
    instance = provider.launch(launch_request(profile=cpu))
    [resource] = gce.live_instances()
    assert resource["scheduling"]["provisioningModel"] == "STANDARD"
    assert resource["scheduling"]["maxRunDuration"] == {"seconds": "5400"}
    assert resource["scheduling"]["instanceTerminationAction"] == "DELETE"
    assert resource["minCpuPlatform"] == "Intel Ice Lake"
    assert resource["guestAccelerators"] == []
    assert "install-nvidia-driver" not in metadata(resource)
    assert metadata(resource)["ssh-keys"].startswith("kcb:")  # the default user when the profile names none
    provider.terminate(instance)


def test_machine_types_with_attached_gpus_request_no_accelerator(gce: GCEFake) -> None:
    l4 = replace(PROFILE, machine_type="g2-standard-4", accelerator="nvidia-l4", extra={"gpu_attached": "true"})
    provider = GCEProvider()
    instance = provider.launch(launch_request(profile=l4))
    [resource] = gce.live_instances()
    assert resource["guestAccelerators"] == []
    assert resource["scheduling"]["onHostMaintenance"] == "TERMINATE"
    provider.terminate(instance)


def test_preempted_spot_vm_reads_as_preempted(gce: GCEFake) -> None:
    provider = GCEProvider()
    instance = provider.wait_until_running(provider.launch(launch_request(spot=True)), timeout_s=30)
    gce.preempt("us-central1-a", instance.instance_id)
    assert provider.state(instance) is InstanceState.PREEMPTED
    deadline = time.monotonic() + 10
    while gce.all_instances() and time.monotonic() < deadline:  # Spot with DELETE: Google deletes it
        time.sleep(0.1)
    assert gce.all_instances() == []
    assert provider.state(instance) is InstanceState.PREEMPTED  # still known as preempted once gone
    provider.terminate(instance)  # nothing to delete: no error


@pytest.mark.parametrize("code", ["ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"])
def test_exhausted_zone_is_a_capacity_error_and_the_next_zone_works(gce: GCEFake, code: str) -> None:
    gce.fail_inserts("us-central1-a", code=code)
    provider = GCEProvider()
    with pytest.raises(CapacityError, match=f"us-central1-a: no capacity \\({code}\\)"):
        provider.launch(launch_request("us-central1-a", spot=True))
    assert gce.all_instances() == []
    instance = provider.launch(launch_request("us-central1-b", spot=True))
    assert [i["zone"].rsplit("/", 1)[-1] for i in gce.live_instances()] == ["us-central1-b"]
    provider.terminate(instance)
    assert gce.all_instances() == []


def test_quota_errors_are_capacity_errors_naming_the_quota(gce: GCEFake) -> None:
    gce.fail_inserts(
        "us-central1-a",
        code="QUOTA_EXCEEDED",
        message="Quota 'NVIDIA_T4_GPUS' exceeded.  Limit: 0.0 in region us-central1.",
        synchronous=True,
        http_status=403,
    )
    gce.fail_inserts(
        "us-central1-b",
        code="QUOTA_EXCEEDED",
        message="Quota 'PREEMPTIBLE_NVIDIA_T4_GPUS' exceeded.  Limit: 0.0 in region us-central1.",
        http_status=403,
    )
    provider = GCEProvider()
    with pytest.raises(CapacityError, match=r"quota exceeded.*NVIDIA_T4_GPUS.*Quotas"):
        provider.launch(launch_request("us-central1-a"))
    with pytest.raises(CapacityError, match=r"quota exceeded.*PREEMPTIBLE_NVIDIA_T4_GPUS"):
        provider.launch(launch_request("us-central1-b", spot=True))
    assert gce.all_instances() == []


def test_throttled_calls_are_retried(gce: GCEFake) -> None:
    gce.fail_inserts(
        "us-central1-a",
        code="rateLimitExceeded",
        message="Rate Limit Exceeded",
        times=2,
        synchronous=True,
        http_status=429,
    )
    provider = GCEProvider()
    instance = provider.launch(launch_request())
    inserts = [path for method, path in gce.requests if method == "POST" and path.endswith("/instances")]
    assert len(inserts) == 3  # two throttled answers, then the insert (the same requestId each time)
    assert len(gce.live_instances()) == 1
    provider.terminate(instance)


def test_list_instances_finds_our_vms_with_their_exact_tags(gce: GCEFake) -> None:
    provider = GCEProvider()
    ours = provider.launch(launch_request("us-central1-b", spot=True))
    fresh = GCEProvider()  # the sweep's view: a new process
    [found] = fresh.list_instances()
    assert (found.instance_id, found.zone, found.spot) == (ours.instance_id, "us-central1-b", True)
    assert found.tags["run-id"] == RUN_ID  # not the lowercased label
    fresh.terminate(found)
    assert fresh.list_instances() == []


def test_unknown_image_family_fails_before_anything_starts(gce: GCEFake) -> None:
    profile = replace(PROFILE, image="projects/deeplearning-platform-release/global/images/family/no-such")
    with pytest.raises(ProviderError, match=r"looking up image .*no-such failed"):
        GCEProvider().launch(launch_request(profile=profile))
    assert gce.all_instances() == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"zones": ("us-central1",)}, "not a GCE zone"),
        ({"image": None}, "image is required for GPU profiles"),
        ({"image": "ubuntu-2204-lts"}, "is not projects/P"),
        ({"extra": {"disk": "100"}}, "unknown extra setting.*disk"),
        ({"extra": {"gpu_attached": "yes"}}, "gpu_attached"),
        ({"machine_type": None}, "machine_type is required"),
    ],
)
def test_profile_validation_names_the_field(change: dict, message: str) -> None:
    with pytest.raises(ProviderError, match=message):
        GCEProvider().validate_profile(replace(PROFILE, **change))


def test_every_gce_profile_in_the_catalog_is_launchable() -> None:
    profiles = [p for p in load_catalog().values() if p.provider == "gce"]
    assert profiles
    for profile in profiles:
        GCEProvider().validate_profile(profile)
