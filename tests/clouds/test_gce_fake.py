"""The Compute Engine fake refuses what Compute Engine refuses, in Compute Engine's error format.

A fake that accepted anything would let a provider bug through; these tests pin the documented rules the fake
enforces, by sending raw REST requests (not through the provider).
"""

from __future__ import annotations

import os

import pytest
import requests
from google.auth.transport.requests import Request
from google.oauth2 import service_account

from tests.clouds.gce_fake import GCEFake

IMAGE = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts"


@pytest.fixture
def api(gce: GCEFake) -> requests.Session:
    credentials = service_account.Credentials.from_service_account_file(
        os.environ["GOOGLE_APPLICATION_CREDENTIALS"], scopes=["https://www.googleapis.com/auth/compute"]
    )
    credentials.refresh(Request())
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {credentials.token}"
    return session


def instance_body(**changes) -> dict:
    body = {
        "name": "kcb-probe",
        "machineType": "zones/us-central1-a/machineTypes/n1-standard-4",
        "disks": [{"boot": True, "autoDelete": True, "initializeParams": {"sourceImage": IMAGE}}],
        "networkInterfaces": [{"network": "global/networks/default", "accessConfigs": [{"type": "ONE_TO_ONE_NAT"}]}],
        "scheduling": {"onHostMaintenance": "TERMINATE", "automaticRestart": False},
    }
    body.update(changes)
    return body


def insert(api: requests.Session, gce: GCEFake, body: dict) -> requests.Response:
    return api.post(f"{gce.url}/compute/v1/projects/{gce.project}/zones/us-central1-a/instances", json=body)


def test_a_valid_insert_runs_through_the_documented_states(api: requests.Session, gce: GCEFake) -> None:
    response = insert(api, gce, instance_body())
    assert response.status_code == 200
    operation = response.json()
    assert operation["kind"] == "compute#operation"
    assert operation["operationType"] == "insert"
    assert operation["status"] in ("PENDING", "RUNNING")
    waited = api.post(f"{operation['selfLink'].replace('https://www.googleapis.com', gce.url)}/wait").json()
    assert waited["status"] == "DONE"
    assert "error" not in waited
    seen = set()
    url = f"{gce.url}/compute/v1/projects/{gce.project}/zones/us-central1-a/instances/kcb-probe"
    while "RUNNING" not in seen:
        seen.add(api.get(url).json()["status"])
    assert seen <= {"PROVISIONING", "STAGING", "RUNNING"}
    assert api.get(url).json()["networkInterfaces"][0]["accessConfigs"][0]["natIP"]


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"name": "Bad_Name"}, "resource.name"),
        ({"machineType": "n1-standard-4"}, "resource.machineType"),
        ({"machineType": "zones/us-central1-b/machineTypes/n1-standard-4"}, "resource.machineType"),
        ({"disks": []}, "Boot disk must be specified"),
        ({"networkInterfaces": []}, "network interface"),
        (
            {
                "guestAccelerators": [
                    {"acceleratorType": "zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4", "acceleratorCount": 1}
                ],
                "scheduling": {"onHostMaintenance": "MIGRATE"},
            },
            "do not support live migration",
        ),
        (
            {
                "guestAccelerators": [
                    {"acceleratorType": "zones/us-central1-a/acceleratorTypes/nvidia-tesla-v99", "acceleratorCount": 1}
                ]
            },
            "does not exist in zone",
        ),
        ({"scheduling": {"provisioningModel": "SPOT", "onHostMaintenance": "TERMINATE"}}, "automatically restarted"),
        ({"scheduling": {"maxRunDuration": {"seconds": "3600"}, "automaticRestart": False}}, "instanceTermination"),
        ({"labels": {"owner": "Alice@Laptop"}}, "resource.labels.owner"),
        ({"metadata": {"items": [{"key": "bad key", "value": "x"}]}}, "metadata.items[0].key"),
        ({"scheduling": {"provisioningModel": "CHEAP"}}, "provisioningModel"),
    ],
)
def test_malformed_inserts_get_a_400_in_the_documented_format(
    api: requests.Session, gce: GCEFake, changes: dict, fragment: str
) -> None:
    response = insert(api, gce, instance_body(**changes))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == 400
    assert fragment in error["message"]
    assert error["errors"][0]["domain"] == "global"
    assert error["errors"][0]["reason"] == "invalid"
    assert gce.all_instances() == []


def test_unknown_fields_and_wrong_types_are_refused(api: requests.Session, gce: GCEFake) -> None:
    unknown = insert(api, gce, instance_body(preemptible=True))  # belongs in scheduling, not at the top
    assert unknown.status_code == 400
    assert "preemptible" in unknown.json()["error"]["message"]
    wrong_type = insert(api, gce, instance_body(labels=["project"]))
    assert wrong_type.status_code == 400


def test_calls_without_a_valid_token_are_unauthenticated(gce: GCEFake) -> None:
    url = f"{gce.url}/compute/v1/projects/{gce.project}/zones/us-central1-a/instances"
    assert requests.get(url).status_code == 401
    forged = requests.get(url, headers={"Authorization": "Bearer ya29.not-issued-here"})
    assert forged.status_code == 401
    assert forged.json()["error"]["status"] == "UNAUTHENTICATED"


def test_exhausted_zone_fails_in_the_operation(api: requests.Session, gce: GCEFake) -> None:
    gce.fail_inserts("us-central1-a", code="ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", times=1)
    operation = insert(api, gce, instance_body()).json()
    done = api.post(f"{operation['selfLink'].replace('https://www.googleapis.com', gce.url)}/wait").json()
    assert done["status"] == "DONE"
    assert done["error"]["errors"][0]["code"] == "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
    assert done["httpErrorStatusCode"] == 503
    assert gce.all_instances() == []
    assert insert(api, gce, instance_body()).status_code == 200  # `times=1`: the next insert gets through


def test_list_filters_by_label(api: requests.Session, gce: GCEFake) -> None:
    insert(api, gce, instance_body(name="ours", labels={"project": "keras-cloud-bench"}))
    insert(api, gce, instance_body(name="theirs", labels={"project": "other"}))
    url = f"{gce.url}/compute/v1/projects/{gce.project}/aggregated/instances"
    listed = api.get(url, params={"filter": 'labels.project = "keras-cloud-bench"'}).json()
    names = [i["name"] for scope in listed["items"].values() for i in scope.get("instances", [])]
    assert names == ["ours"]
    assert api.get(url, params={"filter": "labels.project ~ x"}).status_code == 400
