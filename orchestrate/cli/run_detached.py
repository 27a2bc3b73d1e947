"""`run --profile P --detach`: every check of an attached run, then the bucket's, before the launch; then launch
and return (`status RUN_ID` follows the run, `collect RUN_ID` fetches it)."""

from __future__ import annotations

import sys
import time
from dataclasses import replace

from orchestrate.batch import detached_lifecycle
from orchestrate.capabilities import offered, offering
from orchestrate.cli.common import UsageError, credentials, row
from orchestrate.cli.planning import (
    check_workloads,
    checked_plan,
    make_plan,
    make_provider,
    print_estimate,
    print_plan,
    profile_to_run,
    refuse_existing_run,
    with_validation_time,
)
from orchestrate.cli.request import DetachedRun
from orchestrate.detached import DETACHED_IMAGE_SOURCES, DetachedSpec, boot_script
from orchestrate.detached_runs import (
    DetachedRunError,
    Launched,
    check_bucket,
    launch,
    local_image,
    placeholder_bucket,
    resolve_bucket,
)
from orchestrate.images import is_registry_ref
from orchestrate.progress import make_reporter
from orchestrate.provider import Capability, Provider
from orchestrate.storage import StorageError, StorageURL
from orchestrate.workload_files import run_workloads
from records.catalog import Profile
from records.ledger import STATUS_DETACHED, Ledger, StageRecord


def run(request: DetachedRun) -> int:
    options = request.options
    started = time.time()
    profile = profile_to_run(request.profile, options)
    provider = make_provider(profile, options)
    check_boot_script(profile, provider)
    if offered(provider, Capability.BATCH):
        check_batch_detach(request)
        return _submit_and_return(request, profile, provider, started)
    plan = make_plan(options, profile, provider, run_workloads(options.workload_file))
    refuse_existing_run(plan, Ledger(options.ledger))
    image_source = _detached_image_source(options.image_source, plan.image_ref)
    if image_source == "load" and not options.dry_run:
        try:
            local_image(plan.image_ref)  # a bad input: refused with the others, before the bucket is touched
        except DetachedRunError as exc:
            raise UsageError(str(exc)) from None
    given = request.detach.bucket
    bucket, create = resolve_bucket(given, profile) if not options.dry_run else _dry_bucket(given, profile)
    spec = DetachedSpec(
        profile.provider, str(bucket), plan.spec, image_source, max_lifetime_s=plan.max_lifetime_s,
        upload_interval_s=request.detach.upload_interval,
    )  # fmt: skip
    boot_script(spec)  # its own checks (and EC2's 16 KB user-data limit) before anything is created
    check_workloads(plan)
    status = credentials(provider)
    plan = with_validation_time(plan, started)
    print_plan(plan, provider, status, Ledger(options.ledger), dry_run=options.dry_run)
    data = "; payload: payload.tar beside them, unpacked on the machine" if spec.payload_key else ""
    row("detached", f"logs to {bucket}runs/{plan.run_id}/ ({'created if missing' if create else 'yours'}); "
        f"image: {image_source}{data}")  # fmt: skip
    if options.dry_run:
        print_estimate(plan, options.owned)
        return 0
    if status != "ok":
        raise UsageError(status)
    region = check_bucket(bucket, create, profile, plan.run_id)
    spec = replace(spec, storage_region=region)
    stages = [StageRecord("validate", started, time.time())]
    reporter = make_reporter(force_plain=True)
    try:
        launched = launch(plan, provider, Ledger(options.ledger), spec, reporter.note, stages)
    except KeyboardInterrupt:  # a machine may exist already, and would run the suite: say where to look
        where = f"`python -m orchestrate status {plan.run_id}`"
        print(f"\ninterrupted launching run {plan.run_id}: a machine may run it; see {where}", file=sys.stderr)
        return 130
    finally:
        reporter.close()
    return _print_launched(launched)


def check_boot_script(profile: Profile, provider: Provider) -> None:
    """A run detaches where its machine runs alone from a boot script, or its batch job without an orchestrator;
    the refusal names every installed provider that detaches (plug-ins too), from their capabilities."""
    if not (provider.has(Capability.BOOT_SCRIPT) or offered(provider, Capability.BATCH)):
        raise UsageError(
            f"--detach needs a provider that runs boot scripts or batch jobs "
            f"({offering(Capability.BOOT_SCRIPT, Capability.BATCH)}); {profile.name} is {profile.provider}"
        )


def check_batch_detach(request: DetachedRun) -> None:
    """A batch job's files stay in the cluster's shared folder, and its tasks get their image themselves."""
    if request.detach.bucket is not None:
        raise UsageError(f"--bucket: {request.profile} runs on a batch scheduler, whose files stay on the cluster")
    if request.options.image_source == "load":
        raise UsageError(f"--image-source load: {request.profile}'s tasks pull their image or find it on the node")


def check_detachable(profile: Profile, provider: Provider, bucket: str | None) -> None:
    """A detached fan-out launches nothing unless every profile can run detached into the bucket given."""
    check_boot_script(profile, provider)
    if offered(provider, Capability.BATCH):
        if bucket is not None:
            raise UsageError(f"{profile.name}: --bucket: its batch job's files stay on the cluster; leave --bucket out")
        return
    if bucket is not None:
        try:
            resolve_bucket(bucket, profile)
        except StorageError as exc:
            raise UsageError(
                f"{profile.name}: {exc}; leave --bucket out to give each cloud the project's own"
            ) from None


def _submit_and_return(request: DetachedRun, profile: Profile, provider: Provider, started: float) -> int:
    """`run --detach` on a batch scheduler: every check of an attached run, then the job is submitted and left to
    run (orchestrate.batch.detached_lifecycle)."""
    options = request.options
    plan, status = checked_plan(options, profile, provider, started)
    row("detached", "the job is submitted and left to run; `status` follows it, `collect` finalises it")
    if options.dry_run:
        print_estimate(plan)
        return 0
    if status != "ok":
        raise UsageError(status)
    reporter = make_reporter(force_plain=True)
    try:
        outcome = detached_lifecycle(plan, provider, Ledger(options.ledger), reporter).run()
    finally:
        reporter.close()
    record = outcome.record
    if record.status != STATUS_DETACHED:
        print(f"\nRun {record.run_id}: {record.status}: {record.message}")
        return outcome.exit_code
    print(f"\nRun {record.run_id}: detached as {provider.name} job {record.instances[-1].instance_id}")
    print(f"  logs        on the cluster until collected (then {record.logs_dir})")
    print(f"  follow      python -m orchestrate status {record.run_id}")
    print(
        f"  fetch       python -m orchestrate collect {record.run_id}   (once its job has ended: records and bills it)"
    )
    return 0


def _detached_image_source(source: str, ref: str) -> str:
    """`auto` is `pull` for a registry reference, else `load` (this machine's image, through the bucket)."""
    if source == "auto":
        return "pull" if is_registry_ref(ref) else "load"
    if source not in DETACHED_IMAGE_SOURCES:
        raise UsageError(
            f"--image-source {source}: a detached machine gets its image by {', '.join(DETACHED_IMAGE_SOURCES)} "
            "(nothing streams or builds it from here)"
        )
    return source


def _dry_bucket(bucket: str | None, profile: Profile) -> tuple[StorageURL, bool]:
    """A dry run names the bucket without asking the cloud for the account that names the project's own."""
    if bucket is not None:
        return resolve_bucket(bucket, profile)
    return placeholder_bucket(profile.provider, "account-id"), True


def _print_launched(launched: Launched) -> int:
    record = launched.record
    if launched.instance is None:
        print(f"\nRun {record.run_id}: {record.status}: {record.message}")
        return 1
    instance = launched.instance
    print(f"\nRun {record.run_id}: detached on {instance.instance_id} in {instance.zone}")
    print(f"  logs        {record.storage}runs/{record.run_id}/ (then {record.logs_dir})")
    print(f"  follow      python -m orchestrate status {record.run_id}")
    print(f"  fetch       python -m orchestrate collect {record.run_id}   (idempotent; resumes a preempted run)")
    return 0
