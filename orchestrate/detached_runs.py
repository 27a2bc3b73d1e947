"""The orchestrator's side of detached runs: launch and return, then `status` and `collect` from the bucket.

    python -m orchestrate run --profile gce-t4 --detach [--bucket gs://my-bucket/bench]   # returns the run id
    python -m orchestrate status RUN_ID                                                  # progress, read-only
    python -m orchestrate collect RUN_ID                                                 # logs -> logs/, ledger

Launch: the bucket is checked (named and writable, or the project's own created and tagged) before anything is
launched; the spec goes to the bucket (`spec.json`); the ledger records the run as `detached` with its bucket; the
machine is launched with the boot script (`orchestrate.detached.boot_script`), zone by zone as attached runs are.

Collect (idempotent): downloads the run's files into `logs/<platform>/<run-id>/` (the layout attached runs give),
the partial files of items a preemption cut short into `preempted/attempt-N/`, and updates the ledger from the
machine's own status. With the summary there, it finalises the ledger: status and message from the summary, each
machine billed from its launch to the time it recorded before deleting itself; a machine still running then is
terminated. Without a summary and with the machine gone: a preempted machine is relaunched with the same spec (the
new machine skips what is finished, up to --max-preemptions), any other loss finalises the run as failed. A run
that never got a machine (its orchestrator killed before the launch, e.g. during the image upload) is finalised as
failed once that orchestrator is gone, and its uploads are aborted (or its image.tar and payload.tar deleted).
"""

from __future__ import annotations

import json
import socket
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrate.accounting import close_accounts, launch_in_zones, machine_record, run_tags
from orchestrate.capabilities import (
    ObjectStore,
    check_storage_url,
    offered,
    offering,
    open_store,
    region_of,
    storage_of,
)
from orchestrate.detached import DetachedSpec, boot_script
from orchestrate.plan import RunPlan, WorkItem
from orchestrate.provider import (
    Capability,
    Instance,
    InstanceState,
    LaunchRequest,
    Provider,
    ProviderError,
)
from orchestrate.runspec import PAYLOAD_ARCHIVE, payload_archive
from orchestrate.storage import StorageError, StorageURL, own_bucket_name
from orchestrate.sweep import local_process_alive
from records.catalog import Profile
from records.ledger import (
    FINAL_STATUSES,
    STATUS_DETACHED,
    STATUS_FAILED,
    InstanceRecord,
    ItemRecord,
    Ledger,
    RunRecord,
    StageRecord,
)

Note = Callable[[str], None]
FINISHED = ("complete", "failed")  # the agent never reruns these


class DetachedRunError(RuntimeError):
    """A detached run cannot be launched, followed or collected; the message says why."""


# ---- before launch ---------------------------------------------------------------------------------------------


def resolve_bucket(bucket: str | None, profile: Profile) -> tuple[StorageURL, bool]:
    """The run's bucket (the user's, or the project's own) and whether the project may create it."""
    if bucket is not None:
        url = StorageURL.parse(bucket)
        check_storage_url(url, profile.provider, bucket)
        return url, False
    storage = storage_of(profile.provider)
    account = storage.storage_account(region_of(profile))
    return StorageURL(storage.storage_scheme, own_bucket_name(account)), True


def placeholder_bucket(provider: str, account: str = "account") -> StorageURL:
    """The project's own bucket of an account not named yet: for the checks and plans made before asking the cloud
    (a dry run, a schedule's boot-script size check)."""
    return StorageURL(storage_of(provider).storage_scheme, own_bucket_name(account))


def check_bucket(url: StorageURL, create: bool, profile: Profile, run_id: str) -> str | None:
    """The bucket exists (or is created and tagged) and the run's prefix is writable; the region the machine must
    address it in, where its store needs one (S3)."""
    store = open_store(profile.provider, url)
    location = store.ensure_bucket(create, region_of(profile))
    store.check_writable(url.run_prefix(run_id) + ".write-check")
    return location


# ---- launch --------------------------------------------------------------------------------------------------


@dataclass
class Launched:
    record: RunRecord
    instance: Instance | None


def launch(
    plan: RunPlan, provider: Provider, ledger: Ledger, spec: DetachedSpec, note: Note, stages: list[StageRecord]
) -> Launched:
    """Spec (and payload.tar, image.tar) into the bucket, the run into the ledger (`detached`), the machine launched;
    then return."""
    if not offered(provider, Capability.BOOT_SCRIPT):
        raise DetachedRunError(
            f"provider {provider.name} cannot run a boot script: --detach needs {offering(Capability.BOOT_SCRIPT)}"
        )
    url, payload = spec.storage, spec.run.payload
    with ExitStack() as packed:
        # both refused before any record: an image this engine lacks, a payload file changed since its check
        image = local_image(spec.run.image) if spec.image_source == "load" else None
        data = packed.enter_context(payload_archive(payload)) if payload is not None else None
        store = open_store(provider.name, url)
        # its pid until the machine is launched: `collect` leaves a run its orchestrator still launches
        record = plan.record(provider.name, status=STATUS_DETACHED, stages=list(stages), storage=str(url))
        ledger.append(record)  # before anything exists in the cloud: `collect` and the sweep can always find it
        plan.write_spec()
        script, prefix = boot_script(spec), url.run_prefix(plan.run_id)
        try:
            store.put(prefix + "spec.json", json.dumps(spec.to_json(), indent=1).encode())
            if data is not None and spec.payload_key is not None:
                note(f"putting the run's payload into {url}{spec.payload_key.removeprefix(url.prefix)}")
                store.upload_file(spec.payload_key, data)
            if image is not None:
                upload_image(store, prefix + "image.tar", image, spec.run.image, note)
        except StorageError as error:  # nothing launched: the run ends here, not `detached` until collected
            record.status, record.message, record.ended_at = (
                STATUS_FAILED,
                f"nothing was launched: {error}",
                time.time(),
            )
            close_accounts(record, plan.profile, provider.has(Capability.BILLABLE))
            ledger.append(record)
            raise
    record.pid = 0  # from here no orchestrator process watches the run: its machine works alone
    instance = launch_machine(provider, record, plan.profile, spec, script, plan.max_lifetime_s, note)
    if instance is None:
        record.status = STATUS_FAILED
        record.message = f"no capacity for {plan.profile.name} in any of its zones"
        _release(provider, record, note)
        close_accounts(record, plan.profile, provider.has(Capability.BILLABLE))
    ledger.append(record)
    return Launched(record, instance)


def local_image(ref: str) -> Any:
    """The image `--image-source load` sends, from this machine's Docker engine."""
    import docker

    try:
        return docker.from_env().images.get(ref)
    except docker.errors.DockerException as error:
        raise DetachedRunError(f"--image-source load: {ref} is not in this machine's Docker engine ({error})") from None


def upload_image(store: ObjectStore, key: str, image: Any, ref: str, note: Note) -> None:
    """`docker save` of the local image into the bucket, for the machine to `docker load` (image source load).
    Saved under the name the run uses: an image with several tags would otherwise be saved under its first.
    Spooled to a file without a name, which the system frees however this process ends (even kill -9)."""
    note(f"saving {ref} to {store.url}{key.removeprefix(store.url.prefix)}")
    name = next((tag for tag in (ref, f"{ref}:latest") if tag in image.tags), True)
    with tempfile.TemporaryFile(suffix=".tar") as handle:
        for chunk in image.save(chunk_size=1 << 20, named=name):
            handle.write(chunk)
        handle.flush()
        handle.seek(0)
        store.upload_file(key, handle)


def launch_machine(
    provider: Provider,
    record: RunRecord,
    profile: Profile,
    spec: DetachedSpec,
    script: str,
    max_lifetime_s: int,
    note: Note,
) -> Instance | None:
    """The machine in the first zone with capacity, recorded in `record`; None when no zone had any."""
    tags = run_tags(record.run_id, record.owner, profile.name, max_lifetime_s, mode="detached")
    started, prefix = time.time(), f"{spec.storage}runs/{record.run_id}/"
    request = LaunchRequest(
        record.run_id, profile, None, record.spot, max_lifetime_s, tags, boot_script=script, storage_prefix=prefix
    )
    launched = launch_in_zones(provider, request, note)
    if isinstance(launched, list):
        record.stages.append(StageRecord("launch", started, time.time(), "no capacity"))
        return None
    instance, asked_at = launched
    record.instances.append(machine_record(instance, asked_at))
    record.stages.append(StageRecord("launch", started, time.time(), f"{instance.instance_id} in {instance.zone}"))
    return instance


def _release(provider: Provider, record: RunRecord, note: Note) -> None:
    try:
        provider.release_run(record.run_id)
    except ProviderError as error:
        record.teardown_failures.append(f"could not release {provider.name} resources of {record.run_id}: {error}")
        note(f"could not release the run's resources: {error}; run `python -m orchestrate sweep`")


# ---- progress ------------------------------------------------------------------------------------------------


@dataclass
class Progress:
    """What the bucket says about a run: the machine's status, its summary once it is over, the objects."""

    status: dict[str, Any] | None
    summary: dict[str, Any] | None
    objects: dict[str, int] = field(default_factory=dict)

    @property
    def latest(self) -> dict[str, Any] | None:
        return self.summary or self.status


def read_progress(record: RunRecord) -> tuple[ObjectStore, Progress]:
    url = run_storage(record)
    store = open_store(record.provider, url)
    prefix = url.run_prefix(record.run_id)
    objects = store.list(prefix)
    status = _json(store, prefix + "status.json") if prefix + "status.json" in objects else None
    summary = _json(store, prefix + "summary.json") if prefix + "summary.json" in objects else None
    return store, Progress(status, summary, objects)


def run_storage(record: RunRecord) -> StorageURL:
    if not record.storage:
        raise DetachedRunError(f"run {record.run_id} is not a detached run (it has no bucket in the ledger)")
    return StorageURL.parse(record.storage)


def _json(store: ObjectStore, key: str) -> dict[str, Any] | None:
    data = store.read(key)
    return json.loads(data) if data else None


def item_counts(progress: Progress, planned: int) -> str:
    latest = progress.latest
    if latest is None:
        return f"0 of {planned} items done (the machine has not reported yet)"
    states = _latest_items(latest)
    done = sum(1 for status in states.values() if status in FINISHED)
    running = [f"{w} [{b}]" for (w, b, _), status in states.items() if status == "running"]
    text = f"{done} of {planned} items done"
    return text + (f", running {', '.join(running)}" if running else "")


def _latest_items(status: dict[str, Any]) -> dict[tuple[str, str, int | None], str]:
    return {(i["workload"], i["backend"], i["repeat"]): i["status"] for i in status.get("items", [])}


def machine_state(provider: Provider, record: RunRecord) -> InstanceState | None:
    """The state of the run's latest machine; None when there is none. A machine the ledger does not know (its
    orchestrator died right after the launch, before it reported yet) is found by its run-id tag and recorded."""
    if not record.instances:
        found = [i for i in provider.list_instances() if i.tags.get("run-id") == record.run_id]
        for instance in found:
            record.instances.append(machine_record(instance, record.started_at))
        if not found:
            return None
    last = record.instances[-1]
    tags = {"run-id": record.run_id}
    instance = Instance(provider.name, last.instance_id, last.zone, None, spot=last.spot, tags=tags)
    return provider.state(instance)


# ---- collect -------------------------------------------------------------------------------------------------


@dataclass
class Collected:
    record: RunRecord
    downloaded: list[str]
    action: str  # what collect did beyond downloading: "finalised", "relaunched ...", "still running", ...


def collect(
    record: RunRecord,
    provider: Provider,
    profile: Profile,
    ledger: Ledger,
    max_preemptions: int,
    note: Note,
    relaunch: bool = True,
) -> Collected:
    store, progress = read_progress(record)
    url = run_storage(record)
    prefix = url.run_prefix(record.run_id)
    run_logs = Path(record.logs_dir or "")
    downloaded = _download_files(store, progress.objects, prefix, run_logs)
    latest = progress.latest
    if latest is not None:
        downloaded += _download_partials(store, progress.objects, prefix, run_logs, latest)
        _apply_status(record, latest, run_logs)
    if record.final:
        action = f"already {record.status}; logs refreshed"
    elif progress.summary is not None:
        action = _finalise(record, progress.summary, provider, profile, note)
    else:
        action = _follow(record, store, prefix, provider, profile, max_preemptions, note, relaunch)
    if record.final:  # first: a ledger line torn by a kill mid-write is restored from it (sweep.settle_ledger)
        run_logs.joinpath("orchestrate").mkdir(parents=True, exist_ok=True)
        summary = json.dumps(record.to_json(), indent=2, sort_keys=True, default=str)
        run_logs.joinpath("orchestrate", "run.json").write_text(summary)
    ledger.append(record)
    return Collected(record, downloaded, action)


def _download_files(store: ObjectStore, objects: dict[str, int], prefix: str, run_logs: Path) -> list[str]:
    """New or changed objects under files/ into the run's log folder (sizes compared: collect is idempotent)."""
    copied = []
    for key, size in sorted(objects.items()):
        relative = key.removeprefix(prefix + "files/")
        if relative == key or not _safe_relative(relative):
            continue
        target = run_logs / relative
        if not target.is_file() or target.stat().st_size != size:
            store.download(key, target)
            copied.append(str(target))
    return copied


def _download_partials(
    store: ObjectStore, objects: dict[str, int], prefix: str, run_logs: Path, status: dict[str, Any]
) -> list[str]:
    """Files of items a preemption (or an interruption) cut short: into preempted/attempt-N/, never results."""
    copied = []
    for item in status.get("items", []):
        if item["status"] in FINISHED or item["status"] == "running":
            continue
        folder = f"{prefix}partial/attempt-{item['attempt']}/"
        work = WorkItem(item["workload"], item["backend"], item["repeat"])
        for key, size in sorted(objects.items()):
            name = key.removeprefix(folder)
            if name == key or not (work.owns_log(name) or name == f"orchestrate/{work.stem}.console.log"):
                continue
            target = run_logs / "preempted" / f"attempt-{item['attempt']}" / name.removeprefix("orchestrate/")
            if not target.is_file() or target.stat().st_size != size:
                store.download(key, target)
                copied.append(str(target))
    return copied


def _safe_relative(path: str) -> bool:
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and ".." not in parts and "" not in parts


def _apply_status(record: RunRecord, status: dict[str, Any], run_logs: Path) -> None:
    """The ledger's items and machines as the machine reported them."""
    record.image_digest = status.get("image_digest") or record.image_digest
    record.items = []
    for item in status.get("items", []):
        work = WorkItem(item["workload"], item["backend"], item["repeat"])
        logs = [str(path) for path in sorted(run_logs.glob("*")) if work.owns_log(path.name)]
        record.items.append(
            ItemRecord(
                workload=item["workload"],
                backend=item["backend"],
                status=item["status"],
                exit_code=item["exit_code"],
                started_at=item["started_at"],
                ended_at=item["ended_at"],
                attempt=item["attempt"],
                logs=logs if item["status"] in FINISHED else [],
                repeat=item["repeat"],
            )
        )
    known = {i.instance_id: i for i in record.instances}
    for attempt in status.get("attempts", []):
        machine = known.get(attempt["machine"])
        if machine is None:  # launched by an orchestrator that died before it could record it, or by a schedule
            machine = InstanceRecord(
                provider=record.provider,
                instance_id=attempt["machine"],
                zone=attempt.get("zone"),
                spot=record.spot,
                launched_at=attempt["started_at"],  # the machine's own boot: the best the run knows
            )
            record.instances.append(machine)
            known[machine.instance_id] = machine
        machine.preempted = machine.preempted or attempt["outcome"] == "preempted"
        if attempt.get("ended_at") and attempt["outcome"] != "running":
            machine.terminated_at = attempt["ended_at"]  # when it asked to be deleted (or last reported)
    record.preemptions = sum(1 for i in record.instances if i.preempted)


def _finalise(record: RunRecord, summary: dict[str, Any], provider: Provider, profile: Profile, note: Note) -> str:
    record.status = summary["state"] if summary["state"] in FINAL_STATUSES else STATUS_FAILED
    record.message = summary.get("message") or record.message
    record.ended_at = summary.get("ended_at") or time.time()
    _make_sure_gone(record, provider, note)
    _release(provider, record, note)
    close_accounts(record, profile, provider.has(Capability.BILLABLE))
    return f"finalised: {record.status}"


def _make_sure_gone(record: RunRecord, provider: Provider, note: Note) -> None:
    """The machine deletes itself; one that could not (a failed API call) is terminated here."""
    for machine in record.instances:
        instance = Instance(provider.name, machine.instance_id, machine.zone, None, tags={"run-id": record.run_id})
        try:
            state = provider.state(instance)
            if state in (InstanceState.RUNNING, InstanceState.PENDING, InstanceState.UNKNOWN):
                note(f"{machine.instance_id} is still {state}: terminating it")
                provider.terminate(instance)
                machine.terminated_at = machine.terminated_at or time.time()
        except ProviderError as error:
            record.teardown_failures.append(f"could not check or terminate {machine.instance_id}: {error}")


def _follow(
    record: RunRecord,
    store: ObjectStore,
    prefix: str,
    provider: Provider,
    profile: Profile,
    max_preemptions: int,
    note: Note,
    relaunch: bool,
) -> str:
    """No summary yet: the machine runs, or it was preempted (relaunch), or it is gone for good (finalise)."""
    state = machine_state(provider, record)
    if state in (InstanceState.PENDING, InstanceState.RUNNING, InstanceState.UNKNOWN):
        return f"still running ({state})"
    last = record.instances[-1] if record.instances else None
    if state == InstanceState.PREEMPTED and last is not None:
        last.preempted = True
        last.terminated_at = last.terminated_at or time.time()
        record.preemptions = sum(1 for i in record.instances if i.preempted)
        if not relaunch:
            return f"{last.instance_id} was preempted; run collect without --no-relaunch to resume it"
        if record.preemptions > max_preemptions:
            return _give_up(
                record, provider, profile, note, f"preempted {record.preemptions} times (limit --max-preemptions)"
            )
        return _relaunch(record, store, prefix, provider, profile, note)
    if last is None:
        return _never_launched(record, store, prefix, provider, profile, note)
    why = f"the machine {last.instance_id} ended without a summary (see its console in the logs)"
    return _give_up(record, provider, profile, note, why)


def _never_launched(
    record: RunRecord, store: ObjectStore, prefix: str, provider: Provider, profile: Profile, note: Note
) -> str:
    """No machine recorded, found by its tag, or reporting: the orchestrator stopped (kill -9, a crash) between
    the ledger record and the launch. Unless it is still at work, the run ends before it began (failed, nothing
    billed) and what it put in the bucket for a machine goes (see `discard_uploads`)."""
    if _launching_here(record):
        return (
            f"still launching: its orchestrator (pid {record.pid}, {record.owner}) has not launched a machine yet; "
            "collect again once it has returned"
        )
    cleaned = discard_uploads(store, prefix)
    why = "no machine was launched: its orchestrator stopped before the launch" + "".join(f"; {c}" for c in cleaned)
    return _give_up(record, provider, profile, note, why)


def _launching_here(record: RunRecord) -> bool:
    """Its orchestrator is alive on this host (its pid is in the ledger until the launch). One on another host
    cannot be checked: its run is treated as dead, since the ledger is normally this machine's own."""
    here = socket.gethostname()
    return bool(record.pid) and record.owner.rpartition("@")[2] == here and local_process_alive(here)(record)


def discard_uploads(store: ObjectStore, prefix: str) -> list[str]:
    """The image and payload of a run that never launched, gone: an unfinished upload (S3 multipart: no
    object, yet its parts are billed until aborted) is aborted, and a finished image.tar or payload.tar deleted (a
    failed run is never relaunched, so nothing reads them). Cloud Storage has nothing to abort (see
    `GCSStore.abort_uploads`). What was done."""
    done = [f"aborted its unfinished upload of {key.removeprefix(prefix)}" for key in store.abort_uploads(prefix)]
    for name in ("image.tar", PAYLOAD_ARCHIVE):
        if prefix + name in store.list(prefix + name):
            store.delete(prefix + name)
            done.append(f"deleted its unused {name}")
    return done


def _relaunch(
    record: RunRecord, store: ObjectStore, prefix: str, provider: Provider, profile: Profile, note: Note
) -> str:
    data = _json(store, prefix + "spec.json")
    if data is None:
        return _give_up(record, provider, profile, note, f"{prefix}spec.json is missing: cannot relaunch")
    spec = DetachedSpec.from_json(data)
    note(f"relaunching run {record.run_id} for its unfinished items (preemption {record.preemptions})")
    instance = launch_machine(provider, record, profile, spec, boot_script(spec), spec.max_lifetime_s, note)
    if instance is None:
        return f"{record.instances[-1].instance_id} was preempted and no zone has capacity now: collect again later"
    return f"relaunched on {instance.instance_id} in {instance.zone} (after preemption {record.preemptions})"


def _give_up(record: RunRecord, provider: Provider, profile: Profile, note: Note, why: str) -> str:
    record.status, record.message = STATUS_FAILED, why
    for item in record.items:
        if item.status == "running":
            item.status = "interrupted"
    record.ended_at = max([i.terminated_at or 0 for i in record.instances] + [record.started_at])
    _make_sure_gone(record, provider, note)
    _release(provider, record, note)
    close_accounts(record, profile, provider.has(Capability.BILLABLE))
    return f"finalised: failed ({why})"
