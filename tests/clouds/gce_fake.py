"""A local fake of the Compute Engine v1 REST API: the subset the GCE provider uses, nothing more.

Google ships no Compute Engine emulator, so the provider's tests talk to this HTTP server through the real
google-cloud-compute client (REST transport, `api_endpoint` pointed here). It follows the documented request
and response shapes:

- instances insert/get/delete/list and aggregatedList (`filter` with `field = value` terms joined by AND),
  zoneOperations get/list/wait, images getFromFamily, and an OAuth2 token endpoint for service-account keys;
- Operation resources (`kind: compute#operation`, status PENDING -> RUNNING -> DONE, `error.errors[{code,
  message}]`, `httpErrorStatusCode`), instance status PROVISIONING -> STAGING -> RUNNING and STOPPING ->
  TERMINATED / deleted, `networkInterfaces[].accessConfigs[].natIP`, labels, scheduling, guestAccelerators;
- request bodies are parsed against the Compute v1 message descriptors (unknown names and wrong types are
  refused) and checked against the documented rules the provider must respect (name and label syntax,
  accelerators need onHostMaintenance=TERMINATE, Spot needs automaticRestart=false, maxRunDuration needs an
  instanceTerminationAction); refusals use the documented error body `{"error": {code, message, errors[]}}`;
- every API call needs a bearer token: one this server issued, or a JWT signed by a registered service key.

The test plays Google's side through Python methods: `fail_inserts` (ZONE_RESOURCE_POOL_EXHAUSTED and
friends, quota and rate-limit errors), `preempt` (a Spot reclaim, recorded as a `compute.instances.preempted`
operation), `after_insert` (a hook run when an insert has made its VM, before the reply), `live_instances`.
A Spot or standard VM with `maxRunDuration` is deleted (or stopped) once it has run that long.

VMs' own identity (detached runs): `vm_token(email)` is the access token the metadata server hands a VM running as
that service account. Such a token may do one thing here: delete an instance whose IAM policy
(instances.setIamPolicy) binds that account; anything else is 403, as least privilege would answer.
`running_startup_scripts` lists what the guest agent of each RUNNING VM would run; `power_off` is the guest
shutting itself down (status TERMINATED, as Compute Engine does); `deleted_by` says who deleted each instance.
"""

from __future__ import annotations

import itertools
import json
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from google.auth import jwt
from google.cloud import compute_v1
from google.protobuf import json_format

NAME_RE = re.compile(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")
LABEL_KEY_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
LABEL_VALUE_RE = re.compile(r"^[a-z0-9_-]{0,63}$")
METADATA_KEY_RE = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
ACCELERATOR_OPTIMIZED = {"a2", "a3", "a4", "g2", "g4"}  # machine families whose GPUs come with the type
PROVISIONING_MODELS = {"STANDARD", "SPOT"}
TERMINATION_ACTIONS = {"DELETE", "STOP"}
HOST_MAINTENANCE = {"MIGRATE", "TERMINATE"}
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
GOOGLE_TOKEN_ENDPOINT = "https://oauth2.googleapis.com/token"


class ApiError(Exception):
    """An error answered in the documented Compute error format."""

    def __init__(self, code: int, message: str, reason: str, **extra: Any) -> None:
        super().__init__(message)
        self.code, self.message, self.reason, self.extra = code, message, reason, extra

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {
            "code": self.code,
            "message": self.message,
            "errors": [{"message": self.message, "domain": "global", "reason": self.reason}],
        }
        error.update(self.extra)
        return {"error": error}


def invalid(field_path: str, value: Any, why: str) -> ApiError:
    return ApiError(400, f"Invalid value for field '{field_path}': '{value}'. {why}", "invalid")


def not_found(resource: str) -> ApiError:
    return ApiError(404, f"The resource '{resource}' was not found", "notFound")


def timestamp(epoch: float | None = None) -> str:
    return datetime.fromtimestamp(epoch if epoch is not None else time.time(), UTC).isoformat(timespec="milliseconds")


@dataclass
class InsertFault:
    """Inserts in `zone` fail with `code` (asynchronously in the operation, or synchronously on the call)."""

    zone: str
    code: str
    message: str
    times: int | None  # None: every insert until cleared
    synchronous: bool = False
    http_status: int = 503


@dataclass
class FakeInstance:
    resource: dict[str, Any]
    project: str
    zone: str
    created: float
    stop_requested: float | None = None
    delete_after_stop: bool = True
    preempted: bool = False
    iam_policy: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.resource["name"]


@dataclass
class FakeOperation:
    resource: dict[str, Any]
    done_at: float
    finish: Any = None  # callable run once, when the operation turns DONE
    finished: bool = False


@dataclass
class Timings:
    """Seconds each phase lasts: small, so tests poll for real without waiting long."""

    provisioning: float = 0.2
    staging: float = 0.2
    stopping: float = 0.2
    operation: float = 0.3


@dataclass
class GCEFake:
    project: str = "kcb-test-project"
    zones: tuple[str, ...] = ("us-central1-a", "us-central1-b", "us-central1-c")
    accelerators: tuple[str, ...] = ("nvidia-tesla-t4", "nvidia-l4")
    timings: Timings = field(default_factory=Timings)
    images: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)  # (method, path) of every API call
    after_insert: Callable[[], None] | None = None  # called once, when an insert created its VM, before replying

    def __post_init__(self) -> None:
        self._lock = threading.RLock()
        self._instances: dict[tuple[str, str, str], FakeInstance] = {}
        self._operations: dict[tuple[str, str, str], FakeOperation] = {}
        self._faults: list[InsertFault] = []
        self._tokens: set[str] = set()
        self._vm_tokens: dict[str, str] = {}  # token -> the VM's service account
        self.deleted_by: dict[str, str] = {}  # instance name -> "user", or "vm:<service account>"
        self._request_ids: dict[str, dict[str, Any]] = {}  # insert requestId -> its operation
        self._service_keys: dict[str, str] = {}  # client_email -> PEM public key
        self._ids = itertools.count(int(time.time()) * 1000)
        self._addresses = itertools.count(10)
        self._server: ThreadingHTTPServer | None = None
        self._storage: Any = None
        self.storage_url = ""  # Cloud Storage's API (an emulator), once started
        self.add_image("ubuntu-os-cloud", "ubuntu-2204-lts", "ubuntu-2204-jammy-v20250101")

    # -- server ----------------------------------------------------------------------------------------------

    def start(self) -> str:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        # Cloud Storage beside Compute Engine: gcp-storage-emulator, where a machine saves its run's logs
        from gcp_storage_emulator.server import create_server

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self._storage = create_server("127.0.0.1", port, in_memory=True)
        self._storage.start()
        self.storage_url = f"http://127.0.0.1:{port}"
        return self.url

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._storage is not None:
            self._storage.stop()
            self._storage = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def token_uri(self) -> str:
        return f"{self.url}/token"

    # -- Google's side, driven by the test -------------------------------------------------------------------

    def add_image(self, project: str, family: str, name: str) -> None:
        self.images[(project, family)] = {
            "kind": "compute#image",
            "id": str(next(self._ids)),
            "name": name,
            "family": family,
            "status": "READY",
            "selfLink": f"https://www.googleapis.com/compute/v1/projects/{project}/global/images/{name}",
            "creationTimestamp": timestamp(),
        }

    def register_service_account(self, client_email: str, public_key_pem: str) -> None:
        self._service_keys[client_email] = public_key_pem

    def fail_inserts(
        self,
        zone: str,
        code: str = "ZONE_RESOURCE_POOL_EXHAUSTED",
        message: str | None = None,
        times: int | None = None,
        synchronous: bool = False,
        http_status: int = 503,
    ) -> None:
        message = message or (
            f"The zone 'projects/{self.project}/zones/{zone}' does not have enough resources available to "
            "fulfill the request.  Try a different zone, or try again later."
        )
        with self._lock:
            self._faults.append(InsertFault(zone, code, message, times, synchronous, http_status))

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def preempt(self, zone: str, name: str) -> None:
        """Reclaim a Spot VM as Compute Engine does: a preempted operation, then STOPPING -> deleted/stopped."""
        with self._lock:
            instance = self._instances.get((self.project, zone, name))
            if instance is None:
                raise KeyError(f"no instance {zone}/{name}")
            if instance.resource["scheduling"].get("provisioningModel") != "SPOT":
                raise ValueError(f"{name} is not a Spot VM; Compute Engine preempts only Spot VMs")
            instance.preempted = True
            self._stop(instance, delete=instance.resource["scheduling"]["instanceTerminationAction"] == "DELETE")
            self._new_operation(instance, "compute.instances.preempted", delay=0.0)

    def vm_token(self, service_account: str) -> str:
        token = "ya29.vm-" + secrets.token_urlsafe(24)
        with self._lock:
            self._vm_tokens[token] = service_account
        return token

    def power_off(self, zone: str, name: str) -> None:
        """The guest shut itself down: the VM stops (TERMINATED) and stays, as on Compute Engine."""
        with self._lock:
            instance = self._instances.get((self.project, zone, name))
            if instance is not None:
                self._stop(instance, delete=False)

    def reach_max_run_duration(self, zone: str, name: str) -> None:
        """The VM's `maxRunDuration` ran out now: Compute Engine deletes it and records no delete operation."""
        with self._lock:
            instance = self._instances.get((self.project, zone, name))
            if instance is not None:
                self._stop(instance, delete=True)

    def running_startup_scripts(self) -> list[dict[str, str]]:
        """name, zone, startup-script and service account of every RUNNING VM that has a startup script."""
        found = []
        with self._lock:
            self._advance()
            for instance in self._instances.values():
                if instance.resource["status"] != "RUNNING":
                    continue
                items = {i["key"]: i.get("value", "") for i in instance.resource.get("metadata", {}).get("items", [])}
                accounts = instance.resource.get("serviceAccounts") or [{}]
                if "startup-script" in items:
                    found.append(
                        {
                            "name": instance.name,
                            "zone": instance.zone,
                            "script": items["startup-script"],
                            "service_account": accounts[0].get("email", ""),
                        }
                    )
        return found

    def live_instances(self) -> list[dict[str, Any]]:
        """Every instance not deleted and not TERMINATED, as the API would show it."""
        with self._lock:
            self._advance()
            return [dict(i.resource) for i in self._instances.values() if i.resource["status"] != "TERMINATED"]

    def all_instances(self) -> list[dict[str, Any]]:
        with self._lock:
            self._advance()
            return [dict(i.resource) for i in self._instances.values()]

    def running_ssh_keys(self) -> list[str]:
        """The public keys in `ssh-keys` metadata of RUNNING instances (what the guest agent installs)."""
        keys = []
        with self._lock:
            self._advance()
            for instance in self._instances.values():
                if instance.resource["status"] != "RUNNING":
                    continue
                for item in instance.resource.get("metadata", {}).get("items", []):
                    if item["key"] == "ssh-keys":
                        keys.extend(line.split(":", 1)[1] for line in item["value"].splitlines() if ":" in line)
        return keys

    # -- state machine ---------------------------------------------------------------------------------------

    def _advance(self) -> None:
        now = time.time()
        for key, instance in list(self._instances.items()):
            self._advance_instance(key, instance, now)
        for operation in self._operations.values():
            self._advance_operation(operation, now)

    def _advance_instance(self, key: tuple[str, str, str], instance: FakeInstance, now: float) -> None:
        resource = instance.resource
        if instance.stop_requested is not None:
            if now >= instance.stop_requested + self.timings.stopping:
                if instance.delete_after_stop:
                    del self._instances[key]
                else:
                    resource["status"] = "TERMINATED"
                    resource["lastStopTimestamp"] = timestamp(instance.stop_requested + self.timings.stopping)
            return
        age = now - instance.created
        if age >= self.timings.provisioning + self.timings.staging:
            if resource["status"] != "RUNNING":
                resource["status"] = "RUNNING"
                resource["lastStartTimestamp"] = timestamp(
                    instance.created + self.timings.provisioning + self.timings.staging
                )
        elif age >= self.timings.provisioning:
            resource["status"] = "STAGING"
            self._assign_external_address(resource)
        self._enforce_run_duration(instance, now)

    def _enforce_run_duration(self, instance: FakeInstance, now: float) -> None:
        scheduling = instance.resource["scheduling"]
        limit = scheduling.get("maxRunDuration")
        if limit and instance.stop_requested is None:
            started = instance.created + self.timings.provisioning + self.timings.staging
            if now >= started + float(limit.get("seconds", 0)) + float(limit.get("nanos", 0)) / 1e9:
                self._stop(instance, delete=scheduling["instanceTerminationAction"] == "DELETE", at=now)

    def _assign_external_address(self, resource: dict[str, Any]) -> None:
        for interface in resource["networkInterfaces"]:
            for config in interface.get("accessConfigs", []):
                config.setdefault("natIP", f"203.0.113.{next(self._addresses) % 250 + 1}")

    def _advance_operation(self, operation: FakeOperation, now: float) -> None:
        resource = operation.resource
        if resource["status"] == "DONE":
            return
        if now >= operation.done_at:
            if operation.finish is not None and not operation.finished:
                operation.finish()
                operation.finished = True
            resource.update(status="DONE", progress=100, endTime=timestamp(now))
        elif now >= float(resource["_created"]) + 0.05:
            resource.update(status="RUNNING", startTime=resource.get("startTime") or timestamp(now))

    def _stop(self, instance: FakeInstance, delete: bool, at: float | None = None) -> None:
        if instance.stop_requested is None:
            instance.stop_requested = at if at is not None else time.time()
            instance.delete_after_stop = delete
            instance.resource["status"] = "STOPPING"

    def _new_operation(
        self,
        target: FakeInstance | None,
        kind: str,
        delay: float | None = None,
        *,
        zone: str | None = None,
        project: str | None = None,
        target_name: str = "",
        error: InsertFault | None = None,
        finish: Any = None,
    ) -> dict[str, Any]:
        project = project or (target.project if target else self.project)
        zone = zone or (target.zone if target else self.zones[0])
        name = f"operation-{int(time.time() * 1000)}-{secrets.token_hex(8)}"
        zone_link = f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}"
        instance_name = target.name if target else target_name
        now = time.time()
        resource: dict[str, Any] = {
            "kind": "compute#operation",
            "id": str(next(self._ids)),
            "name": name,
            "zone": zone_link,
            "operationType": kind,
            "targetLink": f"{zone_link}/instances/{instance_name}",
            "targetId": target.resource["id"] if target else str(next(self._ids)),
            "status": "PENDING",
            "user": "fake@kcb-test",
            "progress": 0,
            "insertTime": timestamp(now),
            "selfLink": f"{zone_link}/operations/{name}",
            "_created": now,
        }
        if error is not None:
            resource["error"] = {"errors": [{"code": error.code, "message": error.message}]}
            resource["httpErrorStatusCode"] = error.http_status
            resource["httpErrorMessage"] = HTTPStatus(error.http_status).phrase.upper()
        self._operations[(project, zone, name)] = FakeOperation(
            resource, now + (self.timings.operation if delay is None else delay), finish
        )
        return self._public(resource)

    @staticmethod
    def _public(resource: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in resource.items() if not key.startswith("_")}

    # -- API -------------------------------------------------------------------------------------------------

    def check_zone(self, project: str, zone: str) -> None:
        if project != self.project:
            raise ApiError(404, f"The resource 'projects/{project}' was not found", "notFound")
        if zone not in self.zones:
            raise ApiError(400, f"Invalid value for field 'zone': '{zone}'. Unknown zone.", "invalid")

    def insert_instance(
        self, project: str, zone: str, body: dict[str, Any], request_id: str | None = None
    ) -> dict[str, Any]:
        self.check_zone(project, zone)
        resource = validate_instance(body, project, zone, self)
        with self._lock:
            self._advance()
            if request_id in self._request_ids:  # a retried insert: the first one's operation, no second VM
                return self._public(self._request_ids[request_id])
            if (project, zone, resource["name"]) in self._instances:
                raise ApiError(
                    409,
                    f"The resource 'projects/{project}/zones/{zone}/instances/{resource['name']}' already exists",
                    "alreadyExists",
                )
            fault = self._take_fault(zone)
            if fault is not None and fault.synchronous:
                raise ApiError(fault.http_status, fault.message, _reason_for(fault.code))
            if fault is not None:
                return self._new_operation(
                    None, "insert", zone=zone, project=project, target_name=resource["name"], error=fault
                )
            instance = FakeInstance(resource, project, zone, time.time())
            self._instances[(project, zone, resource["name"])] = instance
            operation = self._new_operation(instance, "insert")
            if self.after_insert is not None:
                hook, self.after_insert = self.after_insert, None
                hook()
            if request_id:
                self._request_ids[request_id] = self._operations[(project, zone, operation["name"])].resource
            return operation

    def _take_fault(self, zone: str) -> InsertFault | None:
        for fault in self._faults:
            if fault.zone == zone:
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times == 0:
                        self._faults.remove(fault)
                return fault
        return None

    def get_instance(self, project: str, zone: str, name: str) -> dict[str, Any]:
        self.check_zone(project, zone)
        with self._lock:
            self._advance()
            instance = self._instances.get((project, zone, name))
            if instance is None:
                raise not_found(f"projects/{project}/zones/{zone}/instances/{name}")
            return dict(instance.resource)

    def delete_instance(self, project: str, zone: str, name: str, caller: str = "user") -> dict[str, Any]:
        self.check_zone(project, zone)
        with self._lock:
            self._advance()
            instance = self._instances.get((project, zone, name))
            if instance is None:
                raise not_found(f"projects/{project}/zones/{zone}/instances/{name}")
            self.deleted_by.setdefault(name, caller)
            key = (project, zone, name)

            def remove() -> None:
                self._instances.pop(key, None)

            if instance.stop_requested is None:
                self._stop(instance, delete=True)
            else:
                instance.delete_after_stop = True
            return self._new_operation(instance, "delete", delay=self.timings.stopping, finish=remove)

    def set_instance_iam_policy(self, project: str, zone: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        self.check_zone(project, zone)
        with self._lock:
            instance = self._instances.get((project, zone, name))
            if instance is None:
                raise not_found(f"projects/{project}/zones/{zone}/instances/{name}")
            policy = body.get("policy") or {}
            instance.iam_policy = {"bindings": policy.get("bindings", []), "etag": secrets.token_urlsafe(8)}
            return dict(instance.iam_policy)

    def vm_may(self, token: str, method: str, path: str) -> bool:
        """What a VM's own token may do: delete an instance whose policy names its service account."""
        account = self._vm_tokens[token]
        match = re.fullmatch(r"/compute/v1/projects/([^/]+)/zones/([^/]+)/instances/([^/]+)", path)
        if method != "DELETE" or match is None:
            return False
        with self._lock:
            instance = self._instances.get(match.groups())
            members = [m for b in (instance.iam_policy if instance else {}).get("bindings", []) for m in b["members"]]
        return f"serviceAccount:{account}" in members

    def list_instances(self, project: str, zone: str, query: dict[str, str]) -> dict[str, Any]:
        self.check_zone(project, zone)
        matches = parse_filter(query.get("filter", ""))
        with self._lock:
            self._advance()
            items = [
                dict(i.resource)
                for (p, z, _), i in self._instances.items()
                if p == project and z == zone and matches(i.resource)
            ]
        base = f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}/instances"
        return {"kind": "compute#instanceList", "id": base, "items": items, "selfLink": base}

    def aggregated_instances(self, project: str, query: dict[str, str]) -> dict[str, Any]:
        if project != self.project:
            raise ApiError(404, f"The resource 'projects/{project}' was not found", "notFound")
        matches = parse_filter(query.get("filter", ""))
        scopes: dict[str, Any] = {}
        with self._lock:
            self._advance()
            for zone in self.zones:
                found = [
                    dict(i.resource)
                    for (p, z, _), i in self._instances.items()
                    if p == project and z == zone and matches(i.resource)
                ]
                scopes[f"zones/{zone}"] = (
                    {"instances": found}
                    if found
                    else {
                        "warning": {
                            "code": "NO_RESULTS_ON_PAGE",
                            "message": "There are no results for scope 'zones/" + zone + "' on this page.",
                        }
                    }
                )
        link = f"https://www.googleapis.com/compute/v1/projects/{project}/aggregated/instances"
        return {"kind": "compute#instanceAggregatedList", "id": link, "items": scopes, "selfLink": link}

    def get_operation(self, project: str, zone: str, name: str, wait_s: float = 0.0) -> dict[str, Any]:
        self.check_zone(project, zone)
        deadline = time.time() + wait_s
        while True:
            with self._lock:
                self._advance()
                operation = self._operations.get((project, zone, name))
                if operation is None:
                    raise not_found(f"projects/{project}/zones/{zone}/operations/{name}")
                if operation.resource["status"] == "DONE" or time.time() >= deadline:
                    return self._public(operation.resource)
            time.sleep(0.02)

    def list_operations(self, project: str, zone: str, query: dict[str, str]) -> dict[str, Any]:
        self.check_zone(project, zone)
        matches = parse_filter(query.get("filter", ""))
        with self._lock:
            self._advance()
            items = [
                self._public(o.resource)
                for (p, z, _), o in self._operations.items()
                if p == project and z == zone and matches(o.resource)
            ]
        link = f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}/operations"
        return {"kind": "compute#operationList", "id": link, "items": items, "selfLink": link}

    def image_from_family(self, project: str, family: str) -> dict[str, Any]:
        image = self.images.get((project, family))
        if image is None:
            raise not_found(f"projects/{project}/global/images/family/{family}")
        return image

    def image_by_link(self, link: str) -> dict[str, Any] | None:
        tail = link.split("/compute/v1/")[-1]
        for image in self.images.values():
            if image["selfLink"].endswith(tail) or image["selfLink"].split("/compute/v1/")[-1] == tail:
                return image
        family = re.fullmatch(r"projects/([^/]+)/global/images/family/([^/]+)", tail)
        return self.images.get((family.group(1), family.group(2))) if family else None

    # -- authentication --------------------------------------------------------------------------------------

    def issue_token(self, form: dict[str, str]) -> dict[str, Any]:
        if form.get("grant_type") != JWT_BEARER:
            raise _OAuthError("unsupported_grant_type", f"grant_type must be {JWT_BEARER}")
        claims = self._verified_claims(form.get("assertion", ""))
        # google-auth addresses the assertion to Google's token endpoint whatever token_uri says
        if claims is None or claims.get("aud") not in (self.token_uri, GOOGLE_TOKEN_ENDPOINT):
            raise _OAuthError("invalid_grant", "Invalid JWT Signature.")
        token = "ya29.fake-" + secrets.token_urlsafe(24)
        with self._lock:
            self._tokens.add(token)
        return {"access_token": token, "expires_in": 3599, "token_type": "Bearer"}

    def authorized(self, header: str | None) -> bool:
        scheme, _, token = (header or "").partition(" ")
        if scheme != "Bearer" or not token:
            return False
        with self._lock:
            if token in self._tokens:
                return True
        return self._verified_claims(token) is not None  # a self-signed JWT from a service-account key

    def _verified_claims(self, token: str) -> dict[str, Any] | None:
        try:
            unverified = jwt.decode(token, verify=False)
        except ValueError:
            return None
        public_key = self._service_keys.get(unverified.get("iss", ""))
        if public_key is None:
            return None
        try:
            return jwt.decode(token, certs=public_key, verify=True, audience=None)
        except ValueError:
            return None


class _OAuthError(Exception):
    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error, self.description = error, description


def _reason_for(code: str) -> str:
    """The `errors[].reason` of a synchronous error for an operation error code."""
    return {"QUOTA_EXCEEDED": "quotaExceeded", "ZONE_RESOURCE_POOL_EXHAUSTED": "resourceExhausted"}.get(code, code)


# -- request validation ----------------------------------------------------------------------------------------


def validate_instance(body: Any, project: str, zone: str, fake: GCEFake) -> dict[str, Any]:
    """The stored instance resource for an insert body; ApiError(400) for what Compute Engine refuses."""
    if not isinstance(body, dict):
        raise ApiError(400, "Invalid JSON payload received. Expected an object.", "parseError")
    try:
        json_format.ParseDict(body, compute_v1.Instance.pb()(), ignore_unknown_fields=False)
    except json_format.ParseError as error:
        raise ApiError(400, f"Invalid JSON payload received. {error}", "invalid", status="INVALID_ARGUMENT") from None
    name = body.get("name", "")
    if not NAME_RE.match(name):
        raise invalid("resource.name", name, f"Must be a match of regex '{NAME_RE.pattern}'")
    _check_machine_type(body.get("machineType", ""), project, zone)
    _check_disks(body.get("disks", []), fake)
    _check_network(body.get("networkInterfaces", []))
    _check_accelerators(body, project, zone, fake)
    _check_scheduling(body.get("scheduling", {}), bool(body.get("guestAccelerators")))
    _check_labels(body.get("labels", {}))
    _check_metadata(body.get("metadata", {}))
    return _stored_instance(body, project, zone, fake)


def _check_machine_type(machine_type: str, project: str, zone: str) -> None:
    match = re.fullmatch(r"(?:.*/projects/[^/]+/)?zones/([^/]+)/machineTypes/([a-z0-9-]+)", machine_type)
    if not match:
        raise invalid("resource.machineType", machine_type, "Must be zones/ZONE/machineTypes/TYPE.")
    if match.group(1) != zone:
        raise invalid("resource.machineType", machine_type, f"Machine type must be in zone {zone}.")


def _check_disks(disks: list[dict[str, Any]], fake: GCEFake) -> None:
    boot = [disk for disk in disks if disk.get("boot")]
    if len(boot) != 1:
        raise ApiError(400, "Invalid value for field 'resource.disks': ''. Boot disk must be specified.", "invalid")
    source = boot[0].get("initializeParams", {}).get("sourceImage") or ""
    if not source:
        raise invalid("resource.disks[0].initializeParams.sourceImage", "", "Source image must be specified.")
    if fake.image_by_link(source) is None:
        raise not_found(source.split("/compute/v1/")[-1])
    size = boot[0].get("initializeParams", {}).get("diskSizeGb")
    if size is not None and not 10 <= int(size) <= 65536:
        raise invalid("resource.disks[0].initializeParams.diskSizeGb", size, "Disk size must be 10-65536 GB.")


def _check_network(interfaces: list[dict[str, Any]]) -> None:
    if not interfaces:
        raise ApiError(
            400,
            "Invalid value for field 'resource.networkInterfaces': ''. At least one network interface is required.",
            "invalid",
        )
    for index, interface in enumerate(interfaces):
        network = interface.get("network", "global/networks/default")
        if not re.fullmatch(r"(?:.*/projects/[^/]+/)?global/networks/[a-z0-9-]+", network):
            raise invalid(f"resource.networkInterfaces[{index}].network", network, "Invalid network.")
        for config in interface.get("accessConfigs", []):
            if config.get("type", "ONE_TO_ONE_NAT") != "ONE_TO_ONE_NAT":
                raise invalid(
                    f"resource.networkInterfaces[{index}].accessConfigs[0].type",
                    config["type"],
                    "Only ONE_TO_ONE_NAT is supported for IPv4.",
                )


def _check_accelerators(body: dict[str, Any], project: str, zone: str, fake: GCEFake) -> None:
    machine_type = body.get("machineType", "").rsplit("/", 1)[-1]
    if body.get("guestAccelerators") and machine_type.split("-")[0] in ACCELERATOR_OPTIMIZED:
        raise invalid(
            "resource.guestAccelerators",
            machine_type,
            "Accelerator-optimized machine types come with their GPUs; guestAccelerators must be empty.",
        )
    for index, accelerator in enumerate(body.get("guestAccelerators", [])):
        field_path = f"resource.guestAccelerators[{index}].acceleratorType"
        kind = accelerator.get("acceleratorType", "")
        match = re.fullmatch(r"(?:.*/projects/[^/]+/)?zones/([^/]+)/acceleratorTypes/([a-z0-9-]+)", kind)
        if not match or match.group(1) != zone:
            raise invalid(field_path, kind, f"Must be zones/{zone}/acceleratorTypes/TYPE.")
        if match.group(2) not in fake.accelerators:
            raise invalid(field_path, kind, f"Accelerator type '{match.group(2)}' does not exist in zone {zone}.")
        if int(accelerator.get("acceleratorCount", 0)) < 1:
            raise invalid(
                f"resource.guestAccelerators[{index}].acceleratorCount",
                accelerator.get("acceleratorCount", 0),
                "Must be at least 1.",
            )


def _check_scheduling(scheduling: dict[str, Any], has_accelerators: bool) -> None:
    model = scheduling.get("provisioningModel", "STANDARD")
    if model not in PROVISIONING_MODELS:
        raise invalid("resource.scheduling.provisioningModel", model, "Unsupported provisioning model.")
    maintenance = scheduling.get("onHostMaintenance", "MIGRATE")
    if maintenance not in HOST_MAINTENANCE:
        raise invalid("resource.scheduling.onHostMaintenance", maintenance, "Unknown value.")
    spot = model == "SPOT" or scheduling.get("preemptible", False)
    if has_accelerators and maintenance != "TERMINATE":
        raise invalid(
            "resource.scheduling.onHostMaintenance",
            maintenance,
            "Instances with guest accelerators do not support live migration.",
        )
    if spot and scheduling.get("automaticRestart", True):
        raise invalid(
            "resource.scheduling.automaticRestart",
            "true",
            "Preemptible instances cannot be automatically restarted.",
        )
    if spot and maintenance != "TERMINATE":
        raise invalid(
            "resource.scheduling.onHostMaintenance",
            maintenance,
            "Preemptible instances must have onHostMaintenance set to TERMINATE.",
        )
    action = scheduling.get("instanceTerminationAction")
    if action is not None and action not in TERMINATION_ACTIONS:
        raise invalid("resource.scheduling.instanceTerminationAction", action, "Unknown value.")
    if "maxRunDuration" in scheduling:
        if action is None:
            raise invalid(
                "resource.scheduling.instanceTerminationAction",
                "",
                "instanceTerminationAction must be set when maxRunDuration is set.",
            )
        seconds = int(scheduling["maxRunDuration"].get("seconds", 0))
        if not 30 <= seconds <= 120 * 86400:
            raise invalid(
                "resource.scheduling.maxRunDuration.seconds",
                seconds,
                "Must be between 30 seconds and 120 days.",
            )


def _check_labels(labels: dict[str, str]) -> None:
    if len(labels) > 64:
        raise invalid("resource.labels", len(labels), "At most 64 labels are allowed.")
    for key, value in labels.items():
        if not LABEL_KEY_RE.match(key):
            raise invalid(f"resource.labels.{key}", key, f"Label keys must match '{LABEL_KEY_RE.pattern}'.")
        if not LABEL_VALUE_RE.match(value):
            raise invalid(f"resource.labels.{key}", value, f"Label values must match '{LABEL_VALUE_RE.pattern}'.")


def _check_metadata(metadata: dict[str, Any]) -> None:
    items = metadata.get("items", [])
    for index, item in enumerate(items):
        if not METADATA_KEY_RE.match(item.get("key", "")):
            raise invalid(f"resource.metadata.items[{index}].key", item.get("key", ""), "Invalid metadata key.")
    if sum(len(item.get("value", "")) for item in items) > 512 * 1024:
        raise invalid("resource.metadata", "", "Metadata exceeds 512 KB.")


def _stored_instance(body: dict[str, Any], project: str, zone: str, fake: GCEFake) -> dict[str, Any]:
    zone_link = f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}"
    machine_type = body["machineType"].split("/")[-1]
    scheduling = {
        "onHostMaintenance": "MIGRATE",
        "automaticRestart": True,
        "preemptible": False,
        "provisioningModel": "STANDARD",
        **body.get("scheduling", {}),
    }
    if scheduling["provisioningModel"] == "SPOT":
        scheduling["preemptible"] = True
    if scheduling.get("preemptible") and "instanceTerminationAction" not in scheduling:
        scheduling["instanceTerminationAction"] = "STOP"  # the documented default for Spot VMs
    interfaces = []
    for index, interface in enumerate(body["networkInterfaces"]):
        configs = [
            {
                "kind": "compute#accessConfig",
                "type": "ONE_TO_ONE_NAT",
                "name": "External NAT",
                "networkTier": "PREMIUM",
                **config,
            }
            for config in interface.get("accessConfigs", [])
        ]
        interfaces.append(
            {
                "kind": "compute#networkInterface",
                "name": f"nic{index}",
                "network": "https://www.googleapis.com/compute/v1/projects/"
                f"{project}/global/networks/{interface.get('network', 'default').split('/')[-1]}",
                "networkIP": f"10.128.0.{next(fake._addresses) % 250 + 1}",
                "accessConfigs": configs,
            }
        )
    return {
        **body,
        "kind": "compute#instance",
        "id": str(next(fake._ids)),
        "creationTimestamp": timestamp(),
        "zone": zone_link,
        "machineType": f"{zone_link}/machineTypes/{machine_type}",
        "status": "PROVISIONING",
        "selfLink": f"{zone_link}/instances/{body['name']}",
        "networkInterfaces": interfaces,
        "scheduling": scheduling,
        "labels": dict(body.get("labels", {})),
        "labelFingerprint": secrets.token_urlsafe(8),
        "metadata": {
            "kind": "compute#metadata",
            "fingerprint": secrets.token_urlsafe(8),
            **body.get("metadata", {}),
        },
        "disks": [
            {
                "kind": "compute#attachedDisk",
                "type": "PERSISTENT",
                "mode": "READ_WRITE",
                "boot": True,
                "autoDelete": True,
                "deviceName": body["name"],
                "index": 0,
                "source": f"{zone_link}/disks/{body['name']}",
                "diskSizeGb": str(body["disks"][0].get("initializeParams", {}).get("diskSizeGb", "10")),
            },
        ],
        "guestAccelerators": [
            {
                "acceleratorType": f"{zone_link}/acceleratorTypes/{a['acceleratorType'].split('/')[-1]}",
                "acceleratorCount": int(a["acceleratorCount"]),
            }
            for a in body.get("guestAccelerators", [])
        ],
    }


# -- list filters ------------------------------------------------------------------------------------------

_TERM = re.compile(r"\(?\s*([A-Za-z][\w.]*)\s*(=|!=)\s*(\"[^\"]*\"|[^\s()]+)\s*\)?")


def parse_filter(expression: str) -> Any:
    """A predicate for Compute's list `filter`: `field = value` / `field != value` terms joined by AND."""
    expression = expression.strip()
    if not expression:
        return lambda resource: True
    terms = []
    for part in re.split(r"\s+AND\s+", expression):
        match = _TERM.fullmatch(part.strip())
        if match is None:
            raise ApiError(
                400,
                f"Invalid value for field 'filter': '{expression}'. Invalid list filter expression.",
                "invalid",
            )
        terms.append((match.group(1), match.group(2), match.group(3).strip('"')))

    def matches(resource: dict[str, Any]) -> bool:
        for path, operator, value in terms:
            actual: Any = resource
            for part in path.split("."):
                actual = actual.get(part) if isinstance(actual, dict) else None
            equal = str(actual).lower() == value.lower() if isinstance(actual, bool) else actual == value
            if equal != (operator == "="):
                return False
        return True

    return matches


# -- HTTP ------------------------------------------------------------------------------------------------------

_ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    ("POST", re.compile(r"/compute/v1/projects/([^/]+)/zones/([^/]+)/instances"), "insert"),
    ("GET", re.compile(r"/compute/v1/projects/([^/]+)/zones/([^/]+)/instances"), "list"),
    ("GET", re.compile(r"/compute/v1/projects/([^/]+)/zones/([^/]+)/instances/([^/]+)"), "get"),
    ("DELETE", re.compile(r"/compute/v1/projects/([^/]+)/zones/([^/]+)/instances/([^/]+)"), "delete"),
    ("POST", re.compile(r"/compute/v1/projects/([^/]+)/zones/([^/]+)/instances/([^/]+)/setIamPolicy"), "iam"),
    ("GET", re.compile(r"/compute/v1/projects/([^/]+)/aggregated/instances"), "aggregated"),
    ("GET", re.compile(r"/compute/v1/projects/([^/]+)/zones/([^/]+)/operations/([^/]+)"), "operation"),
    ("POST", re.compile(r"/compute/v1/projects/([^/]+)/zones/([^/]+)/operations/([^/]+)/wait"), "wait"),
    ("GET", re.compile(r"/compute/v1/projects/([^/]+)/zones/([^/]+)/operations"), "operations"),
    ("GET", re.compile(r"/compute/v1/projects/([^/]+)/global/images/family/([^/]+)"), "family"),
]


class _Handler(BaseHTTPRequestHandler):
    fake: GCEFake
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: pytest shows failures, not traffic
        return

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        url = urlsplit(self.path)
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        body = self._body()
        if self.command == "POST" and url.path == "/token":
            self._token(body)
            return
        self.fake.requests.append((self.command, url.path))
        try:
            header = self.headers.get("Authorization") or ""
            token = header.partition(" ")[2]
            if token in self.fake._vm_tokens:
                if not self.fake.vm_may(token, self.command, url.path):
                    account = self.fake._vm_tokens[token]
                    raise ApiError(403, f"Required permission denied for {account}", "forbidden")
                project, zone, name = url.path.split("/")[4::2][:3]
                account = self.fake._vm_tokens[token]
                self._send(200, self.fake.delete_instance(project, zone, name, caller=f"vm:{account}"))
                return
            if not self.fake.authorized(header):
                raise ApiError(
                    401,
                    "Request is missing required authentication credential. Expected OAuth 2 "
                    "access token or other valid authentication credential.",
                    "required",
                    status="UNAUTHENTICATED",
                )
            self._send(200, self._route(url.path, query, body))
        except ApiError as error:
            self._send(error.code, error.body())
        except Exception as error:  # a bug in the fake: answer 500 so the test fails loudly, not a hang
            self._send(500, ApiError(500, f"fake internal error: {error!r}", "backendError").body())
            raise

    def _route(self, path: str, query: dict[str, str], body: bytes) -> dict[str, Any]:
        for method, pattern, action in _ROUTES:
            match = pattern.fullmatch(path)
            if method != self.command or match is None:
                continue
            return self._call(action, match.groups(), query, body)
        raise ApiError(404, f"Not Found: {self.command} {path}", "notFound")

    def _call(self, action: str, args: tuple[str, ...], query: dict[str, str], body: bytes) -> dict[str, Any]:
        fake = self.fake
        if action == "insert":
            try:
                payload = json.loads(body or b"{}")
            except json.JSONDecodeError as error:
                raise ApiError(400, f"Invalid JSON payload received. {error}", "parseError") from None
            return fake.insert_instance(args[0], args[1], payload, query.get("requestId"))
        if action == "list":
            return fake.list_instances(args[0], args[1], query)
        if action == "get":
            return fake.get_instance(*args)
        if action == "delete":
            return fake.delete_instance(*args)
        if action == "iam":
            return fake.set_instance_iam_policy(*args, json.loads(body or b"{}"))
        if action == "aggregated":
            return fake.aggregated_instances(args[0], query)
        if action == "operation":
            return fake.get_operation(*args)
        if action == "wait":
            return fake.get_operation(*args, wait_s=10.0)  # Compute waits up to about 2 minutes
        if action == "operations":
            return fake.list_operations(args[0], args[1], query)
        return fake.image_from_family(*args)

    def _token(self, body: bytes) -> None:
        form = {key: values[-1] for key, values in parse_qs(body.decode()).items()}
        try:
            self._send(200, self.fake.issue_token(form))
        except _OAuthError as error:
            self._send(400, {"error": error.error, "error_description": error.description})

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps({k: v for k, v in payload.items() if not k.startswith("_")}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
