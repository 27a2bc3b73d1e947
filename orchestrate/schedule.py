"""Scheduled runs: `orchestrate schedule create|list|delete`. The cloud's own scheduler starts a machine on a cron
schedule; the machine runs the suite detached (`orchestrate.detached`'s boot script: logs to the bucket, then it
deletes itself). Nothing of this project runs in between: no orchestrator, no always-on machine, no functions.

Any provider with `Capability.SCHEDULER` can hold a schedule (`orchestrate.capabilities.CloudScheduler`): on AWS
an EventBridge Scheduler schedule calling RunInstances with a launch template (`orchestrate.providers.aws.scheduler`),
on Google Cloud a Cloud Scheduler job POSTing to Compute Engine's `instances.insert`
(`orchestrate.providers.gce.scheduler`).

Schedules launch in the profile's first zone (there is no orchestrator to try the next one) with the image resolved
when the schedule is created, so every run of a schedule runs on the same image and a trend over time measures
the cloud, not image updates. Every input (profile, cron, time zone, suite, name, lifetime) is checked before
anything is created, and a create that fails half-way deletes what it had created. `delete` is idempotent and
also removes what a failed create may have left. The monthly cost's arithmetic is `orchestrate.schedule_cost`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.suites import UnknownSuite, get_suite
from benchmarks.workload_set import Workloads, built_in
from estimator.suite import Shape, SuiteEstimate, estimate_suite, suite_lines
from orchestrate.capabilities import (
    CloudScheduler,
    Scheduler,
    cloud_scheduler,
    offered,
    offering,
    open_store,
)
from orchestrate.cron import CronError, check_time_zone, parse_cron
from orchestrate.data_dir import DataDir, read_data_dir
from orchestrate.detached import DetachedSpec
from orchestrate.detached import boot_script as detached_boot_script
from orchestrate.detached_runs import check_bucket, placeholder_bucket, resolve_bucket
from orchestrate.images import is_registry_ref
from orchestrate.plan import WorkItem
from orchestrate.provider import Capability, ProviderError, safe_name
from orchestrate.registry import load_provider_class, provider_names
from orchestrate.runspec import (
    RunSpec,
    check_runner_options,
    estimate_shape,
    payload_archive,
    plan_spec,
    runner_options,
)
from orchestrate.schedule_cost import (
    PRICES_FILE,
    UnitPrice,
    Usage,
    cloud_prices,
    format_lines,
    load_study,
    monthly_cost,
    price_sources,
    study_cost,
    total,
)
from orchestrate.schedule_spec import (
    ScheduleFailure,
    ScheduleSpec,
)
from orchestrate.storage import StorageError, StorageURL
from orchestrate.workload_files import (
    check_workload_files,
    run_workloads,
    suite_workloads,
)
from records.catalog import Profile, get_profile, load_catalogs
from records.ledger import Ledger

NAME_RE = re.compile(r"[a-z][a-z0-9-]{0,37}[a-z0-9]")  # "kcb-schedule-<name>-machine" fits IAM's 64 characters
STALE_PRICE_DAYS = 365  # as `run`'s plan flags a price


class ScheduleError(ValueError):
    """A bad input: one line, nothing created."""


def default_name(profile: str, suite: str) -> str:
    return safe_name(f"{profile}-{suite}", 39)


def check_spec(
    name: str,
    profile: Profile,
    cron_text: str,
    time_zone: str,
    suite_name: str,
    backends: str | None,
    workloads: str | None,
    spot: bool | None,
    max_lifetime_min: int,
    owner: str,
    known: Workloads | None = None,
) -> ScheduleSpec:
    """Every input of `schedule create`, checked before anything is created; ScheduleError names the bad one."""
    if not NAME_RE.fullmatch(name):
        raise ScheduleError(
            f"--name {name!r}: 2-39 lowercase letters, digits and '-', starting with a letter "
            "(it names the cloud resources)"
        )
    if not _schedules(profile.provider):
        raise ScheduleError(
            f"profile {profile.name} is a {profile.provider} host: scheduled runs need a cloud profile "
            f"({offering(Capability.SCHEDULER)}), whose scheduler starts the machine"
        )
    if not profile.zones or not profile.machine_type:
        raise ScheduleError(f"profile {profile.name}: a scheduled run needs a machine_type and zones")
    try:
        cron = parse_cron(cron_text)
        check_time_zone(time_zone)
        suite = get_suite(suite_name)
        chosen_backends = suite.subset("backend", backends)
        chosen_workloads = suite_workloads(suite, workloads, known or built_in())
    except (CronError, UnknownSuite) as exc:
        raise ScheduleError(str(exc)) from None
    use_spot = profile.use_spot if spot is None else spot
    if profile.hourly_price(use_spot) is None:
        market = "spot" if use_spot else "on-demand"
        raise ScheduleError(f"profile {profile.name} has no {market} price: its monthly cost cannot be estimated")
    if not 10 <= max_lifetime_min <= 7 * 24 * 60:
        raise ScheduleError(f"--max-lifetime {max_lifetime_min}: 10 to {7 * 24 * 60} minutes")
    gap = cron.shortest_gap_minutes()
    if gap < max_lifetime_min:
        raise ScheduleError(
            f"cron {cron.text!r} fires {gap:g} min apart, within --max-lifetime {max_lifetime_min} min: "
            "two machines of the schedule could run at once; space the runs or lower --max-lifetime"
        )
    return ScheduleSpec(
        name=name,
        profile=profile,
        cron=cron,
        time_zone=time_zone,
        suite=suite.name,
        backends=tuple(chosen_backends),
        workloads=tuple(chosen_workloads),
        spot=use_spot,
        max_lifetime_s=max_lifetime_min * 60,
        owner=owner,
    )


def _schedules(provider: str) -> bool:
    try:
        return offered(load_provider_class(provider), Capability.SCHEDULER)
    except ProviderError:
        return False


def scheduler_providers() -> list[str]:
    """The registered providers whose cloud holds schedules."""
    return [name for name in provider_names() if _schedules(name)]


def make_scheduler(provider: str, account: str | None, settings: dict[str, str]) -> Scheduler:
    """The scheduler of `provider`, built from its settings (e.g. the machine's identity); `account` is the one
    the scheduler launches as, where the cloud needs one. ProviderError when a setting does not apply."""
    cls = load_provider_class(provider)
    cloud_scheduler(cls)
    cloud = cls.from_settings(settings)
    assert isinstance(cloud, CloudScheduler)  # cloud_scheduler() checked the class
    return cloud.scheduler(account)


# ---- the monthly cost ------------------------------------------------------------------------------------------

LOG_MB_PER_ITEM = 0.1  # a CSV, its metadata JSON and the console log of one workload x backend
UPLOADS_PER_ITEM = 4  # those three files and the status after the item
UPLOADS_PER_MINUTE = 3  # while an item runs: its partial files and the status heartbeat (upload_interval_s 60 s)
UPLOADS_PER_RUN = 6  # spec, first status, the agent's console, the image log, the summary, the last status


@dataclass(frozen=True)
class MonthlyEstimate:
    lines: list[Any]  # schedule_cost.CostLine
    low: float  # the total with every run at the low end of the time estimate
    high: float
    cap: float  # the total with every run reaching the max lifetime
    basis: str  # where the time per run came from
    high_s: float  # one run's machine time at the high end
    suite: SuiteEstimate  # estimator.suite's, itemised as every dry run prints it
    from_ledger: bool  # the time per run is the median of earlier runs, not `suite`


def estimate(
    spec: ScheduleSpec,
    logs: Any,
    ledger_runs: Sequence[Any],
    workloads: Workloads | None = None,
    shape: Shape | None = None,
    carried: int = 0,
) -> MonthlyEstimate:
    """Today's monthly cost of `spec`: machine time per run from earlier complete runs of its suite on its profile
    in the ledger, else estimator.suite's: the runs from measured or published throughput, plus the machine's start."""
    profile = spec.profile
    price = profile.hourly_price(spec.spot)
    assert price is not None, "check_spec refuses a profile without a price"
    compute = UnitPrice(price.usd_per_hour, "hour", price.date, price.source)
    cloud = cloud_scheduler(load_provider_class(spec.provider))
    prices = cloud_prices(spec.provider, compute, cloud.schedule_prices or PRICES_FILE)
    earlier = sorted(
        r.billed_seconds
        for r in ledger_runs
        if r.profile == profile.name and r.suite == spec.suite and r.status == "complete" and r.billed_seconds
    )
    suite = estimate_suite(profile, spec.suite, spec.items, logs, shape or Shape(), carried, workloads)
    if earlier:
        seconds = low = high = float(earlier[len(earlier) // 2])
        basis = f"median of {len(earlier)} earlier complete {spec.suite} run(s) of {profile.name} in the ledger"
        training = seconds
    else:
        training, seconds, low, high = suite.runs, suite.seconds, suite.low, suite.high
        bases = ", ".join(sorted({i.basis for i in suite.estimated}))
        per_run = f"at least {seconds / 60:.1f} min" if suite.unestimated else f"{seconds / 60:.1f} min"
        per_run += f" ({suite.lower_bound})" if suite.unestimated else f" ({low / 60:.1f}-{high / 60:.1f})"
        basis = (
            f"{per_run}: {suite.runs / 60:.1f} min of runs (basis: {bases or 'none'}; itemised below) + "
            f"{suite.start.seconds / 60:.1f} min to start the machine and containers ({suite.start.source})"
        )
    items = len(spec.items)
    disk_gb = cloud.default_disk_gb

    def usage(run_seconds: float) -> Usage:
        return Usage(
            runs_per_month=spec.cron.runs_per_month(),
            seconds_per_run=min(run_seconds, spec.max_lifetime_s),
            disk_gb=float(profile.extra.get("disk_gb", disk_gb)),
            scheduler_jobs=1,
            log_mb_per_run=LOG_MB_PER_ITEM * items,
            uploads_per_run=UPLOADS_PER_ITEM * items + UPLOADS_PER_RUN + round(UPLOADS_PER_MINUTE * training / 60),
            billing_increment_s=profile.billing_increment_s,
            billing_minimum_s=profile.billing_minimum_s,
        )

    return MonthlyEstimate(
        lines=monthly_cost(usage(seconds), prices),
        low=total(monthly_cost(usage(low), prices)),
        high=total(monthly_cost(usage(high), prices)),
        cap=total(monthly_cost(usage(spec.max_lifetime_s), prices)),
        basis=basis,
        high_s=high,
        suite=suite,
        from_ledger=bool(earlier),
    )


def estimate_text(spec: ScheduleSpec, found: MonthlyEstimate) -> list[str]:
    runs = spec.cron.runs_per_month()
    market = "spot" if spec.spot else "on-demand"
    warnings = []
    compute = found.lines[0].price
    if compute is not None and (dt.date.today() - dt.date.fromisoformat(compute.date)).days > STALE_PRICE_DAYS:
        warnings.append(f"warning: the {market} price of {spec.profile.name} is from {compute.date}: check today's")
    if found.from_ledger and found.high_s > spec.max_lifetime_s:  # else the itemised estimate warns
        warnings.append(
            f"warning: a run may take up to {found.high_s / 60:.0f} min, beyond --max-lifetime "
            f"{spec.max_lifetime_s // 60} min: the machine would end itself mid-suite (raise --max-lifetime)"
        )
    monthly = f"range ${found.low:.2f}-${found.high:.2f} a month"
    if not found.from_ledger and found.suite.unestimated:
        monthly = f"at least ${found.low:.2f} a month ({found.suite.lower_bound})"
    return [
        f"Monthly cost of schedule {spec.name}: {runs:.2f} runs a month of suite {spec.suite} on {spec.profile.name} "
        f"({market})",
        f"  per run: {found.basis}",
        *format_lines(found.lines),
        f"  {monthly}; at most ${found.cap:.2f} if every run reached --max-lifetime {spec.max_lifetime_s // 60} min",
        "  prices:",
        *price_sources(found.lines),
        "One run, itemised (the estimate of `run --dry-run`):",
        *suite_lines(found.suite, spec.profile, spec.spot, spec.max_lifetime_s),
        *warnings,
    ]


def published_text() -> list[str]:
    """The 2018 study's scheduled run, recomputed from its inputs and 2018 prices, beside its published figures."""
    study = load_study()
    lines = study_cost(study)
    return [
        f"{study.title}",
        f"  source: {study.source}",
        f"  inputs: {study.usage.runs_per_month:.2f} runs a month of {study.usage.seconds_per_run / 60:g} min, "
        f"a {study.usage.disk_gb:g} GB disk kept all month, {study.usage.scheduler_jobs} scheduler jobs",
        *format_lines(lines, study.published),
        "  prices:",
        *price_sources(lines),
        f"  this project's scheduled runs have no functions line: {NO_FUNCTIONS_NOTE}",
    ]


NO_FUNCTIONS_NOTE = (
    "the scheduler calls the compute API directly and the machine deletes itself, so nothing starts or stops it "
    "and its disk lives only as long as the run"
)


# ---- `python -m orchestrate schedule ...` ------------------------------------------------------------------------


def run_command(args: argparse.Namespace, owner: str) -> int:
    if args.schedule_command == "create":
        return _create(args, owner)
    if args.schedule_command == "published":
        print("\n".join(published_text()))
        return 0
    if args.schedule_command == "collect":
        return _collect(args)
    providers = scheduler_providers()
    if args.provider:
        if args.provider not in providers:
            raise ScheduleError(f"--provider {args.provider}: schedules are held by {', '.join(providers)}")
        providers = [args.provider]
    if args.schedule_command == "list":
        return _list(providers)
    return _delete(args.name, providers)


def _create(args: argparse.Namespace, owner: str) -> int:
    """Everything is checked (inputs, image, bucket URL, the boot script's size) before the first cloud call;
    then the credentials, then that the name is free; only then is anything created."""
    profile = get_profile(load_catalogs(args.catalog), args.profile)
    name = args.name or default_name(profile.name, args.suite)
    workloads = run_workloads(args.workload_file)
    data = read_data_dir(args.data_dir) if args.data_dir is not None else None
    spec = check_spec(
        name, profile, args.cron, args.time_zone, args.suite, args.backends, args.workloads, args.spot,
        args.max_lifetime, owner, workloads,
    )  # fmt: skip
    run = run_spec(args, spec, workloads, data)
    for line in check_workload_files(workloads, spec.backends):  # on the CPU here, before anything is created
        print(f"  workload: {line}")
    settings = dict(_key_value(text) for text in args.provider_setting)
    try:
        scheduler = make_scheduler(spec.provider, args.service_account, settings)
    except ProviderError as exc:
        raise ScheduleError(str(exc)) from None
    storage = resolve_bucket(args.bucket, profile)[0] if args.bucket is not None else None
    detached = DetachedSpec(
        spec.provider, str(schedule_storage(storage or placeholder_bucket(spec.provider), name)), run,
        args.image_source, max_lifetime_s=spec.max_lifetime_s,
    )  # fmt: skip
    detached_boot_script(detached)  # its checks (image source, size limit) before anything else
    carried = run.payload.size if run.payload is not None else 0
    shape = estimate_shape(runner_options(args), profile)
    found = estimate(spec, args.logs, list(Ledger(args.ledger).runs().values()), workloads, shape, carried)
    _print_plan(spec, args, storage, scheduler.how(spec), run)
    print("\n".join(estimate_text(spec, found)))
    credentials = _credentials(scheduler)
    print(f"  credentials: {credentials}")
    if args.dry_run:
        return 0
    if credentials != "ok":
        raise ScheduleError(f"{credentials}; nothing created")
    if scheduler.exists(spec):
        raise ScheduleError(f"schedule {spec.name} exists in {spec.region}: `schedule delete {spec.name}` first")
    bucket, region = _ready_bucket(args.bucket, spec)
    runs = schedule_storage(bucket, spec.name)
    detached = replace(detached, storage_url=str(runs), storage_region=region)
    script = detached_boot_script(detached)
    created = _create_with_payload(scheduler, spec, script, detached)
    print(f"\nSchedule {spec.name} created: {spec.cron.text} ({spec.time_zone}); logs to {runs}runs/<run-id>/")
    print("  created " + "\n          ".join(created))
    print(f"  `python -m orchestrate schedule collect {spec.name} --profile {spec.profile.name} --bucket {bucket}`")
    print(f"  `python -m orchestrate schedule delete {spec.name}` removes the schedule and its resources")
    return 0


def schedule_storage(bucket: StorageURL, name: str) -> StorageURL:
    """Where a schedule's runs write: `<bucket prefix>schedules/<name>/runs/<run-id>/`, apart from other runs, so
    that the machine's grant and `schedule collect` cover exactly the schedule's runs."""
    return replace(bucket, prefix=f"{bucket.prefix}schedules/{name}/")


def collect_runs(provider: str, storage: StorageURL, platform: str, logs: Path) -> dict[str, list[str]]:
    """Every run of a schedule into `logs/<platform>/<run-id>/` (the layout of attached runs), from the `files/` the
    machines uploaded; what was new or changed, per run id. Idempotent: a file of the same size is not fetched."""
    store = open_store(provider, storage)
    base = f"{storage.prefix}runs/"
    fetched: dict[str, list[str]] = {}
    for key, size in sorted(store.list(base).items()):
        run_id, _, rest = key.removeprefix(base).partition("/")
        relative = rest.removeprefix("files/")
        if relative == rest or not _plain_path(run_id) or not all(_plain_path(p) for p in relative.split("/")):
            continue
        target = logs / platform / run_id / relative
        fetched.setdefault(run_id, [])
        if not target.is_file() or target.stat().st_size != size:
            store.download(key, target)
            fetched[run_id].append(str(target))
    return fetched


def _plain_path(part: str) -> bool:
    return bool(part) and part not in (".", "..") and not part.startswith(".")


def _collect(args: argparse.Namespace) -> int:
    if not NAME_RE.fullmatch(args.name):
        raise ScheduleError(f"schedule name {args.name!r}: 2-39 lowercase letters, digits and '-'")
    profile = get_profile(load_catalogs(args.catalog), args.profile, allow_retired=True)
    if not _schedules(profile.provider):
        raise ScheduleError(f"profile {profile.name} is a {profile.provider} host, not a cloud profile")
    try:
        bucket, _ = resolve_bucket(args.bucket, profile)
        fetched = collect_runs(profile.provider, schedule_storage(bucket, args.name), profile.name, args.logs)
    except StorageError as exc:
        raise ScheduleFailure(str(exc)) from None
    for run_id, files in sorted(fetched.items()):
        print(f"run {run_id}: {len(files)} new file(s) in {args.logs / profile.name / run_id}")
    if not fetched:
        print(f"schedule {args.name}: no runs in {schedule_storage(bucket, args.name)}runs/ yet")
    return 0


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ScheduleError(f"--provider-setting {text!r}: expected KEY=VALUE")
    return key, value


def _ready_bucket(bucket: str | None, spec: ScheduleSpec) -> tuple[StorageURL, str | None]:
    """The bucket, as a detached run's (the user's, else the project's own, created in the schedule's region),
    checked writable where the schedule's runs will write; and its region (S3)."""
    try:
        url, create = resolve_bucket(bucket, spec.profile)
        region = check_bucket(schedule_storage(url, spec.name), create, spec.profile, "write-check")
    except StorageError as exc:
        raise ScheduleFailure(str(exc)) from None
    return url, region


def run_spec(args: argparse.Namespace, spec: ScheduleSpec, workloads: Workloads, data: DataDir | None) -> RunSpec:
    """What each run of the schedule runs: its spec, planned here once, the run named at boot by its machine."""
    if args.image_source == "pull" and not is_registry_ref(args.image):
        raise ScheduleError(f"--image {args.image}: every run pulls it, so name a registry (REGISTRY/NAME:TAG)")
    runner = runner_options(args)
    check_runner_options(runner, spec.profile, spec.backends, exact=True)
    items = [WorkItem(workload, backend) for workload, backend in spec.items]
    profile = spec.profile
    return plan_spec(None, profile.name, spec.suite, args.image, profile.has_gpu, items, 1, runner, workloads, data)


def _create_with_payload(scheduler: Scheduler, spec: ScheduleSpec, script: str, detached: DetachedSpec) -> list[str]:
    """The schedule, its payload (if any) put in its bucket first (the first run may start at once) and named in
    its description, so that `delete` removes it; taken out again when the create fails."""
    key, storage = detached.payload_key, detached.storage
    if key is None or detached.run.payload is None:
        return scheduler.create(spec, script, storage)
    store, url = open_store(spec.provider, storage), f"{storage.scheme}://{storage.bucket}/{key}"
    try:
        with payload_archive(detached.run.payload) as archive:
            store.upload_file(key, archive)
        created = scheduler.create(replace(spec, payload=url), script, storage)
    except BaseException:
        store.delete(key)
        raise
    return [*created, f"its payload {url}"]


def _credentials(scheduler: Scheduler) -> str:
    try:
        scheduler.check_credentials()
    except ProviderError as exc:
        return str(exc)
    return "ok"


def _print_plan(
    spec: ScheduleSpec, args: argparse.Namespace, storage: StorageURL | None, how: str, run: RunSpec
) -> None:
    head = "Schedule (dry run: nothing is created)" if args.dry_run else "Schedule"
    print(f"{head} {spec.name}")
    print(f"  when         {spec.cron.text} ({spec.time_zone}): {spec.cron.runs_per_month():.2f} runs a month")
    print(f"  how          {how}")
    print(f"  machine      {spec.profile.name}: {spec.profile.description or spec.profile.machine_type}")
    print(f"  suite        {spec.suite}: {len(spec.workloads)} workloads x {len(spec.backends)} backends")
    print(f"  image        {args.image} ({args.image_source} at every run)")
    bucket = str(storage) if storage else "<the project's own bucket, created if missing>/"
    print(f"  logs         {bucket}schedules/{spec.name}/runs/<run-id>/ (`schedule collect {spec.name}` fetches them)")
    if run.payload is not None:
        print(f"  payload      {run.payload.describe()}: payload.tar beside the runs, unpacked by each machine")
    print(f"  spec         sha256 {run.sha256[:12]}: runner {' '.join(run.items[0].argv[1:])}")
    print(f"  max lifetime {spec.max_lifetime_s // 60} min, then the machine ends itself")


def _list(providers: Sequence[str]) -> int:
    rows, problems = [], []
    for provider in providers:
        scheduler = make_scheduler(provider, None, {})
        credentials = _credentials(scheduler)
        if credentials != "ok":
            problems.append(f"{provider}: skipped: {credentials}")
            continue
        try:
            rows += scheduler.list()
        except ScheduleFailure as exc:
            problems.append(str(exc))
    if rows:
        print(f"{'name':<24} {'cloud':<5} {'where':<14} {'cron':<16} {'time zone':<16} {'state':<8} profile / suite")
        for row in sorted(rows, key=lambda r: (r.provider, r.name)):
            print(
                f"{row.name:<24} {row.provider:<5} {row.where:<14} {row.cron:<16} {row.time_zone:<16} "
                f"{row.state:<8} {row.profile} / {row.suite}"
                + (f"  last run: {row.last_attempt}" if row.last_attempt else "")
            )
    else:
        print("no schedules of this project" + (" (some clouds were skipped)" if problems else ""))
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems and not rows else 0


def _delete(name: str, providers: Sequence[str]) -> int:
    if not NAME_RE.fullmatch(name):
        raise ScheduleError(f"schedule name {name!r}: 2-39 lowercase letters, digits and '-'")
    deleted: list[str] = []
    for provider in providers:
        scheduler = make_scheduler(provider, None, {})
        credentials = _credentials(scheduler)
        if credentials != "ok":
            if len(providers) == 1:
                raise ScheduleError(f"{provider}: {credentials}; nothing deleted")
            print(f"{provider}: skipped: {credentials}", file=sys.stderr)
            continue
        payloads = [info.payload for info in scheduler.list() if info.name == name and info.payload]
        deleted += scheduler.delete(name)
        for url in payloads:  # the schedule's own payload.tar: no run reads it any more
            scheme, _, rest = url.partition("://")
            bucket, _, key = rest.partition("/")
            open_store(provider, StorageURL(scheme, bucket)).delete(key)
            deleted.append(f"its payload {url}")
    if not deleted:
        print(f"schedule {name}: nothing to delete (already gone)")
    for what in deleted:
        print(f"deleted {what}")
    return 0
