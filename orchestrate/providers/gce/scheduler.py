"""Cloud Scheduler, the GCE provider's scheduler (`Capability.SCHEDULER`): a job whose HTTP target POSTs the instance
resource to Compute Engine's `instances.insert`, with an OAuth token of a service account; the resource's
`startup-script` metadata is the boot script. The VM has a fixed name, so a firing while the previous machine still
runs is refused by Compute Engine instead of starting a second one. The SDK loads only when a job is read or made.
"""

from __future__ import annotations

import builtins
import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from orchestrate.provider import LaunchRequest, ProviderError
from orchestrate.schedule_spec import (
    RESOURCE_PREFIX,
    ScheduleFailure,
    ScheduleInfo,
    ScheduleSpec,
    description_facts,
    resource_name,
)
from orchestrate.storage import StorageURL

if TYPE_CHECKING:
    from records.catalog import Profile


class ComputeEngine(Protocol):
    """What the scheduler uses of `GCEProvider`: the project, credentials, and the launch's instance resource."""

    def project_id(self) -> str: ...
    def application_default_credentials(self) -> tuple[Any, str | None]: ...
    def check_credentials(self) -> None: ...
    def resolve_image(self, profile: Profile) -> str: ...
    def instance_resource(self, request: LaunchRequest, image: str, tags: dict[str, str], name: str | None) -> Any: ...


COMPUTE_API = "https://compute.googleapis.com/compute/v1"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
SCHEDULER_ENDPOINT_ENV = "KCB_SCHEDULER_API_ENDPOINT"  # Cloud Scheduler's endpoint (the tests' fake)


class GCEScheduler:
    """Cloud Scheduler -> Compute Engine instances.insert."""

    provider: ClassVar[str] = "gce"

    def __init__(self, gce: ComputeEngine, scheduler_account: str | None) -> None:
        self._client_instance: Any = None
        self._scheduler_account = scheduler_account  # the account Cloud Scheduler's OAuth token is for
        self._gce = gce  # the VM's own identity is a detached run's (settings service_account, self_delete_role)

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

    def how(self, spec: ScheduleSpec) -> str:
        return f"Cloud Scheduler job in {spec.region} -> Compute Engine instances.insert in {spec.zone}"

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
                        payload=facts.get("payload", ""),
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
