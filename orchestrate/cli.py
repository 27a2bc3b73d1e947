"""`python -m orchestrate`: run a suite on a machine profile, list profiles, sweep leftovers, show costs.

Every input is checked before anything starts: profile (and retirement), provider and its settings, suite,
backends, workloads, flags, credentials. A bad one is a one-line error and exit status 2.
"""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import NoReturn

from benchmarks.cli import new_run_id
from benchmarks.command import BATCH_POLICIES
from benchmarks.harness.backends import BACKENDS
from benchmarks.harness.distribution import SINGLE_DEVICE_BACKENDS, TORCH_SINGLE_DEVICE
from benchmarks.repeats import planned_rounds
from benchmarks.suites import SUITES, UnknownSuite, get_suite
from benchmarks.work import WorkItem
from orchestrate.detached import DETACHED_IMAGE_SOURCES, DetachedError, DetachedSpec, boot_script
from orchestrate.detached_runs import (
    DetachedRunError,
    Launched,
    check_bucket,
    collect,
    item_counts,
    launch,
    local_image,
    machine_state,
    read_progress,
    resolve_bucket,
)
from orchestrate.fanout import (
    SUMMARY,
    Candidate,
    CandidateEstimate,
    CandidateResult,
    Member,
    candidates_of,
    collect_result,
    estimate_candidate,
    estimate_shape,
    estimate_table,
    fanout_run_id,
    manifest_path,
    member_of,
    report_commands,
    resolve_candidates,
    results_table,
    run_all,
    worst_case_usd,
    write_summary,
)
from orchestrate.fanout import Manifest as FanoutManifest
from orchestrate.images import IMAGE_SOURCES, default_build_spec, default_image_ref, is_registry_ref
from orchestrate.lifecycle import Interrupted, Lifecycle, Outcome, raise_interrupted
from orchestrate.plan import RunPlan
from orchestrate.progress import make_reporter
from orchestrate.provider import Capability, InstanceState, Provider, ProviderError
from orchestrate.recover import recover_dead_runs, recover_run
from orchestrate.registry import load_provider_class, provider_names, provider_source
from orchestrate.schedule import ScheduleError, ScheduleFailure
from orchestrate.schedule import add_commands as add_schedule_commands
from orchestrate.schedule import run_command as run_schedule_command
from orchestrate.storage import StorageError, StorageURL
from orchestrate.sweep import SweepContext, SweepReport, run_sweep, settle_ledger
from records.catalog import CatalogError, Profile, get_profile, load_catalogs, retired_notice, runs_as
from records.ledger import (
    STATUS_COMPLETE,
    STATUS_DETACHED,
    STATUS_FAILED,
    TERMINATED_BY_EXPIRY,
    Ledger,
    RunRecord,
    StageRecord,
    default_ledger_path,
)
from report.estimate import estimate_lines
from report.studies import load_studies

EXIT_USAGE = 2
STALE_PRICE_DAYS = 365
MAX_LIFETIME_MIN = 7 * 24 * 60  # a week: beyond it a typo, not a benchmark
MAX_REPEATS = 100
# `--remote-dir`: `~`, `~/path` or `/path` of plain characters; it reaches a remote shell and `docker -v`.
REMOTE_DIR_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+@")
ORCHESTRATION_STAGES = ("launch", "connect", "prepare", "image", "pull_logs", "teardown")


class UsageError(ValueError):
    """A bad input: printed as one line, exit status 2, nothing started."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line instead of the usage block
        raise UsageError(f"{message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m orchestrate", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="run a suite on a profile: launch, run, pull logs, tear down")
    _run_options(run)

    sub.add_parser("providers", help="list the installed providers, their settings and where they come from")

    profiles = sub.add_parser("profiles", help="list the catalog's profiles")
    profiles.add_argument("--names", action="store_true", help="names only, one a line")
    _catalog_option(profiles)

    sweep = sub.add_parser("sweep", help="delete machines this project left running")
    sweep.add_argument("--dry-run", action="store_true", help="say what would be deleted")
    sweep.add_argument("--provider", help="only this provider")
    sweep.add_argument(
        "--provider-setting",
        action="append",
        default=[],
        metavar="PROVIDER:KEY=VALUE",
        help="a setting for one provider, e.g. aws:ssh_address={private_ip}",
    )
    sweep.add_argument("--ledger", type=Path, help=f"ledger file (default: {default_ledger_path()})")
    _catalog_option(sweep)

    cost = sub.add_parser("cost", help="estimated cost per run and per profile, from the ledger")
    cost.add_argument("--ledger", type=Path, help=f"ledger file (default: {default_ledger_path()})")

    schedule = sub.add_parser("schedule", help="scheduled runs: the cloud's own scheduler starts a detached run")
    add_schedule_commands(schedule, _Parser)

    status = sub.add_parser("status", help="a detached run's progress, read from its bucket (changes nothing)")
    status.add_argument("run_id", metavar="RUN_ID")
    status.add_argument("--ledger", type=Path, help=f"ledger file (default: {default_ledger_path()})")
    status.add_argument("--provider-setting", action="append", default=[], metavar="KEY=VALUE")
    _catalog_option(status)

    collect = sub.add_parser(
        "collect", help="fetch a detached run's logs from its bucket into logs/, finalise it, resume it if preempted"
    )
    collect.add_argument("run_id", metavar="RUN_ID")
    collect.add_argument("--ledger", type=Path, help=f"ledger file (default: {default_ledger_path()})")
    collect.add_argument("--provider-setting", action="append", default=[], metavar="KEY=VALUE")
    collect.add_argument("--max-preemptions", type=_non_negative_int, default=3, help="relaunches after preemption")
    collect.add_argument("--no-relaunch", action="store_true", help="do not relaunch a preempted run's machine")
    _catalog_option(collect)
    return parser


def _run_options(run: argparse.ArgumentParser) -> None:
    which = run.add_mutually_exclusive_group(required=True)
    which.add_argument("--profile", help="catalog profile (python -m orchestrate profiles)")
    which.add_argument("--profiles", help="comma-separated profiles: run on each at once (a fan-out)")
    run.add_argument("--max-cost", type=_positive_float, help="--profiles: refuse above this many dollars")
    run.add_argument("--report-out", type=Path, help="--profiles: report folder (default: report-out/<run-id>)")
    _catalog_option(run)
    run.add_argument("--suite", default="quick", help=f"one of {', '.join(SUITES)} (default: quick)")
    run.add_argument("--backends", help=f"comma-separated subset of {', '.join(BACKENDS)} (default: the suite's)")
    run.add_argument("--workloads", help="comma-separated subset of the suite's workloads")
    run.add_argument("--dry-run", action="store_true", help="print the plan and cost estimate; launch nothing")
    run.add_argument("--host", help="ssh profiles: user@box or an ~/.ssh/config alias")
    run.add_argument("--port", help="ssh profiles: SSH port (default: ~/.ssh/config, else 22)")
    run.add_argument("--identity", help="ssh profiles: private key file (default: ~/.ssh/config and the agent)")
    run.add_argument("--ssh-config", type=Path, help="SSH config file to use instead of ~/.ssh/config")
    run.add_argument(
        "--provider-setting",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="provider-specific setting",
    )
    run.add_argument("--platform", help="name of the machine in the logs (default: the profile name)")
    market = run.add_mutually_exclusive_group()
    market.add_argument("--spot", dest="spot", action="store_true", default=None, help="spot/preemptible")
    market.add_argument("--on-demand", dest="spot", action="store_false", help="on-demand (not preemptible)")
    run.add_argument("--allow-retired", action="store_true", help="try a retired profile anyway")
    run.add_argument("--image", help="image reference (default: keras-cloud-bench:cpu or :gpu)")
    run.add_argument(
        "--image-source",
        choices=sorted({*IMAGE_SOURCES, *DETACHED_IMAGE_SOURCES}),
        default="auto",
        help="how the image gets there (load: through the bucket, detached runs only)",
    )
    run.add_argument("--epochs", type=_positive_int, help="runner --epochs: override the suite's epochs")
    run.add_argument("--train-limit", type=_positive_int, help="runner --train-limit: first N training samples")
    run.add_argument("--val-limit", type=_positive_int, help="runner --val-limit: first N validation samples")
    run.add_argument("--strict-data", action="store_true", help="fail instead of using labelled synthetic data")
    run.add_argument(
        "--repeats",
        type=_positive_int,
        default=1,
        help=f"run every workload x backend N times (1-{MAX_REPEATS}), interleaved, each in a fresh container",
    )
    run.add_argument("--gpus", type=_gpus, help="runner --gpus: how many GPUs each run uses, N or all (GPU profiles)")
    run.add_argument("--batch-policy", choices=BATCH_POLICIES, help="runner --batch-policy on several GPUs")
    run.add_argument("--logs", type=Path, default=Path("logs"), help="local log root (default: logs)")
    run.add_argument("--ledger", type=Path, help=f"ledger file (default: {default_ledger_path()})")
    run.add_argument("--run-id", help="name of this run's log folder (default: UTC time + random)")
    run.add_argument("--remote-dir", default="~/keras-cloud-bench", help="work folder on the host")
    run.add_argument("--ssh-timeout", type=_positive_float, default=300.0, help="seconds to wait for SSH")
    run.add_argument("--boot-timeout", type=_positive_float, default=600.0, help="seconds to wait for boot")
    run.add_argument(
        "--max-lifetime",
        type=_positive_int,
        default=240,
        help=f"minutes after which the machine ends itself (at most {MAX_LIFETIME_MIN})",
    )
    run.add_argument("--max-preemptions", type=_non_negative_int, default=3, help="relaunches after preemption")
    run.add_argument(
        "--install-host-software",
        action="store_true",
        help="ssh/local hosts: install Docker / the NVIDIA toolkit when missing (rented machines always may)",
    )
    run.add_argument("--plain", action="store_true", help="plain progress lines even on a terminal")
    run.add_argument(
        "--detach",
        action="store_true",
        help="aws/gce: the machine runs the suite alone, uploads its logs to a bucket and deletes itself; "
        "this command returns after the launch (then: status RUN_ID, collect RUN_ID)",
    )
    run.add_argument(
        "--upload-interval",
        type=_positive_float,
        default=60.0,
        help="--detach: seconds between uploads of a running item's files (default: 60)",
    )
    run.add_argument(
        "--bucket",
        help="--detach: s3://BUCKET[/PREFIX] or gs://BUCKET[/PREFIX] (default: the project's own, created and tagged)",
    )


def _catalog_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--catalog",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="an extra catalog of profiles (repeatable; see also $KCB_CATALOG and docs/providers.md)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _dispatch(argv)
    except KeyboardInterrupt:  # before a run started (a run turns Ctrl-C into its own teardown)
        print("interrupted: nothing was started", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of stdout left (`| head`): stop printing, quietly
        _silence_stdout()
        return 1


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not print a traceback of its own."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _dispatch(argv: Sequence[str] | None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if getattr(args, "ledger", None) is not None:
            _check_ledger_path(args.ledger)
        if args.command == "run":
            return cmd_run(args)
        if args.command == "profiles":
            return cmd_profiles(args)
        if args.command == "providers":
            return cmd_providers(args)
        if args.command == "sweep":
            return cmd_sweep(args)
        if args.command == "status":
            return cmd_status(args)
        if args.command == "collect":
            return cmd_collect(args)
        if args.command == "schedule":
            return run_schedule_command(args, owner_id())
        return cmd_cost(args)
    except (UsageError, CatalogError, ProviderError, UnknownSuite, StorageError, DetachedError, ScheduleError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ScheduleFailure as exc:  # the cloud refused part of a create or delete; what was undone is said
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _check_ledger_path(path: Path) -> None:
    """`--ledger` names a file, existing or to be made in an existing folder."""
    if path.is_dir():
        raise UsageError(f"--ledger {path}: is a folder; give the ledger's file, e.g. {path / 'ledger.jsonl'}")
    if path.parent.exists() and not path.parent.is_dir():
        raise UsageError(f"--ledger {path}: {path.parent} is not a folder")


# ---- run ---------------------------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    if args.bucket is not None and not args.detach:
        raise UsageError("--bucket applies to detached runs (--detach)")
    if args.profiles is not None:
        return cmd_fanout(args)
    if args.detach:
        return cmd_run_detached(args)
    if args.image_source not in IMAGE_SOURCES:
        raise UsageError(f"--image-source {args.image_source} applies to detached runs (--detach); attached: stream")
    for flag, value in (("--max-cost", args.max_cost), ("--report-out", args.report_out)):
        if value is not None:
            raise UsageError(f"{flag} applies to a fan-out (--profiles a,b,...)")
    started = time.time()
    profile = _profile_to_run(args)
    provider = _make_provider(profile, args)
    plan = _make_plan(args, profile, provider)
    _refuse_existing_run(plan, Ledger(args.ledger))
    credentials = _credentials(provider)
    plan = _with_validation_time(plan, started)
    _print_plan(plan, provider, credentials, Ledger(args.ledger), dry_run=args.dry_run)
    if args.dry_run:
        items = [(i.workload, i.backend) for i in plan.items]
        shape = estimate_shape(plan)
        lines = estimate_lines(profile, plan.suite, items, plan.spot, plan.max_lifetime_s, plan.logs_dir, shape)
        print("\n".join(lines))
        return 0
    if credentials != "ok":
        raise UsageError(credentials)
    reporter = make_reporter(force_plain=args.plain)
    previous = {sig: signal.signal(sig, raise_interrupted) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        outcome = Lifecycle(plan, provider, Ledger(args.ledger), reporter).run()
    except Interrupted:  # a signal between the run's last step and its teardown guard: teardown still ran
        print(f"\nRun {plan.run_id}: interrupted; see the ledger for what was torn down", file=sys.stderr)
        return 130
    finally:
        reporter.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    try:
        _print_outcome(outcome)
    except BrokenPipeError:  # nobody reads the summary; the run's exit status still tells its outcome
        _silence_stdout()
    return outcome.exit_code


def _profile_to_run(args: argparse.Namespace) -> Profile:
    """`--profile`, or its replacement when retired (as in a fan-out), said before anything is checked or launched."""
    catalog = load_catalogs(args.catalog)
    profile = runs_as(catalog, args.profile, args.allow_retired)
    if profile.name != args.profile:
        print(retired_notice(catalog[args.profile]))
    return profile


# ---- run --detach, status, collect ------------------------------------------------------------------------


def cmd_run_detached(args: argparse.Namespace) -> int:
    """Every check of an attached run, then the bucket's, before the launch; then launch and return."""
    started = time.time()
    profile = _profile_to_run(args)
    provider = _make_provider(profile, args)
    _check_boot_script(profile, provider)
    plan = _make_plan(args, profile, provider)
    _refuse_existing_run(plan, Ledger(args.ledger))
    image_source = _detached_image_source(args.image_source, plan.image_ref)
    if image_source == "load" and not args.dry_run:
        try:
            local_image(plan.image_ref)  # a bad input: refused with the others, before the bucket is touched
        except DetachedRunError as exc:
            raise UsageError(str(exc)) from None
    bucket, create = resolve_bucket(args.bucket, profile) if not args.dry_run else _dry_bucket(args.bucket, profile)
    spec = DetachedSpec.from_plan(plan, str(bucket), image_source, upload_interval_s=args.upload_interval)
    boot_script(spec)  # its own checks (and EC2's 16 KB user-data limit) before anything is created
    credentials = _credentials(provider)
    plan = _with_validation_time(plan, started)
    _print_plan(plan, provider, credentials, Ledger(args.ledger), dry_run=args.dry_run)
    _row("detached", f"logs to {bucket}runs/{plan.run_id}/ ({'created if missing' if create else 'yours'}); "
         f"image: {image_source}")  # fmt: skip
    if args.dry_run:
        return 0
    if credentials != "ok":
        raise UsageError(credentials)
    region = check_bucket(bucket, create, profile, plan.run_id)
    spec = replace(spec, storage_region=region)
    stages = [StageRecord("validate", started, time.time())]
    reporter = make_reporter(force_plain=True)
    try:
        launched = launch(plan, provider, Ledger(args.ledger), spec, reporter.note, stages)
    except KeyboardInterrupt:  # a machine may exist already, and would run the suite: say where to look
        where = f"`python -m orchestrate status {plan.run_id}`"
        print(f"\ninterrupted launching run {plan.run_id}: a machine may run it; see {where}", file=sys.stderr)
        return 130
    finally:
        reporter.close()
    return _print_launched(launched)


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
    if profile.provider == "aws":
        return StorageURL("s3", "keras-cloud-bench-account-id-region"), True
    return StorageURL("gs", "keras-cloud-bench-project-id"), True


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


def _detached_record(args: argparse.Namespace) -> tuple[RunRecord, Profile, Provider]:
    record = Ledger(args.ledger).runs().get(args.run_id)
    if record is None:
        raise UsageError(f"run {args.run_id} is not in the ledger {args.ledger or default_ledger_path()}")
    if not record.storage:
        raise UsageError(f"run {args.run_id} is not a detached run: its logs are in {record.logs_dir}")
    profile = get_profile(load_catalogs(args.catalog), record.profile, allow_retired=True)
    settings = dict(_key_value(text) for text in args.provider_setting)
    return record, profile, load_provider_class(profile.provider).from_settings(settings)


def cmd_status(args: argparse.Namespace) -> int:
    record, _, provider = _detached_record(args)
    _, progress = read_progress(record)
    latest = progress.latest or {}
    planned = len(latest.get("planned", [])) or len(record.items) or 0
    state = latest.get("state", "not reported yet") if record.status == "detached" else record.status
    print(f"Run {record.run_id} ({record.profile}, detached): {state}")
    print(f"  items       {item_counts(progress, planned)}")
    for attempt in latest.get("attempts", []):
        where = f"{attempt['machine']} in {attempt['zone']}"
        print(f"  machine     {where}: attempt {attempt['attempt']}, {attempt['outcome']}")
    if progress.summary is None and not record.final:
        try:
            machine = machine_state(provider, record)
        except ProviderError as exc:
            machine = None
            print(f"  machine     state unknown: {exc}")
        if machine in (InstanceState.PREEMPTED, InstanceState.TERMINATED):
            print(f"  machine     {machine} before the run ended: `python -m orchestrate collect {record.run_id}` "
                  "fetches its logs and relaunches a preempted run")  # fmt: skip
    if latest.get("message"):
        print(f"  message     {latest['message']}")
    print(f"  bucket      {record.storage}runs/{record.run_id}/ ({len(progress.objects)} objects)")
    return 0


def cmd_collect(args: argparse.Namespace) -> int:
    ledger = Ledger(args.ledger)
    if args.run_id not in ledger.runs() and manifest_path(ledger.path, args.run_id).exists():
        return cmd_collect_fanout(args.run_id, ledger)
    record, profile, provider = _detached_record(args)
    reporter = make_reporter(force_plain=True)
    try:
        done = collect(
            record, provider, profile, Ledger(args.ledger), args.max_preemptions, reporter.note, not args.no_relaunch
        )
    finally:
        reporter.close()
    record = done.record
    items = record.latest_items()
    finished = [i for i in items if i.status == STATUS_COMPLETE]
    print(f"Run {record.run_id}: {done.action}")
    print(f"  logs        {record.logs_dir} ({len(done.downloaded)} file(s) fetched; {len(finished)} of "
          f"{len(items)} runs complete)")  # fmt: skip
    if record.message:
        print(f"  message     {record.message}")
    if record.estimated_cost_usd is not None:
        print(f"  cost        ${record.estimated_cost_usd:.4f} estimated ({record.billed_seconds} s billed)")
    for failure in record.teardown_failures:
        print(f"  TEARDOWN PROBLEM: {failure}  -> run `python -m orchestrate sweep`")
    return 1 if record.final and (record.status != STATUS_COMPLETE or record.teardown_failures) else 0


# ---- run --profiles: a fan-out ------------------------------------------------------------------------------

FANOUT_ONLY = frozenset({"profiles", "max_cost", "report_out", "dry_run", "help"})


def cmd_fanout(args: argparse.Namespace) -> int:
    """Every input of every profile is checked, and the combined estimate held against `--max-cost`, before the
    first machine is launched."""
    if args.platform is not None:
        raise UsageError("--platform names one machine; in a fan-out each run's platform is its profile")
    base = args.run_id or new_run_id()
    if not _is_safe_name(base):
        raise UsageError(f"--run-id {base!r}: use letters, digits, '-', '_' and '.' only")
    names = _expand_study(args.profiles, args.suite)
    candidates = resolve_candidates(load_catalogs(args.catalog), names, args.allow_retired)
    _check_settings_apply(args, candidates)
    ledger = Ledger(args.ledger)
    plans: dict[str, tuple[RunPlan, bool, str]] = {}
    for candidate in candidates:
        profile_args = _profile_args(args, candidate, base)
        provider = _make_provider(candidate.profile, profile_args)
        plan = _make_plan(profile_args, candidate.profile, provider)
        _refuse_existing_run(plan, ledger)
        if args.detach:
            _check_detachable(candidate.profile, provider, args.bucket)
        plans[candidate.profile.name] = (plan, provider.has(Capability.BILLABLE), _credentials(provider))
    estimates = [estimate_candidate(c, *plans[c.profile.name][:2]) for c in candidates]
    _print_fanout_plan(base, candidates, plans, estimates, args.dry_run)
    worst = sum(worst_case_usd(e) for e in estimates)
    if args.max_cost is not None and worst > args.max_cost:
        raise UsageError(f"--max-cost {args.max_cost:g}: the fan-out may cost up to ${worst:.2f}; nothing launched")
    if args.dry_run:
        return 0
    for name, (_, _, credentials) in plans.items():
        if credentials != "ok":
            raise UsageError(f"{name}: {credentials}; nothing launched")
    manifest = _fanout_manifest(args, base, candidates, plans, manifest_path(ledger.path, base))
    manifest.save(manifest_path(ledger.path, base))
    by_run = {fanout_run_id(base, c.profile.name): c for c in candidates}
    codes, interrupted = run_all(manifest.members, lambda m: _run_argv(_profile_args(args, by_run[m.run_id], base)))
    records = Ledger(args.ledger).runs()
    if args.detach:
        return _print_detached_fanout(args, base, candidates, codes, records, interrupted)
    members = [m for m in manifest.members if m.run_id in codes]
    status = _fanout_results(manifest, [by_run[m.run_id] for m in members], members, records, codes)
    return 130 if interrupted else status


def _fanout_manifest(
    args: argparse.Namespace,
    base: str,
    candidates: Sequence[Candidate],
    plans: Mapping[str, tuple[RunPlan, bool, str]],
    path: Path,
) -> FanoutManifest:
    """What `collect <base>` needs to make the fan-out's table and report if this process does not live to."""
    ledger = args.ledger.resolve() if args.ledger is not None else None
    return FanoutManifest(
        base=base,
        members=tuple(member_of(c, plans[c.profile.name][0], path) for c in candidates),
        logs=str(args.logs.resolve()),
        report_out=str((args.report_out or Path("report-out") / base).resolve()),
        study=args.suite if args.suite in _study_names() else None,
        ledger=str(ledger) if ledger is not None else None,
        catalogs=tuple(str(path.resolve()) for path in args.catalog),
    )


def _fanout_results(
    manifest: FanoutManifest,
    candidates: Sequence[Candidate],
    members: Sequence[Member],
    records: Mapping[str, RunRecord],
    codes: Mapping[str, int],
) -> int:
    """The table across the members' runs, then one report over them; 0 when every run and the report did."""
    results = [collect_result(c, m, records, codes.get(m.run_id)) for c, m in zip(candidates, members, strict=True)]
    lines = results_table(results)
    print(f"\nFan-out {manifest.base}: {len(results)} profiles\n" + "\n".join(lines))
    report_status = _fanout_report(manifest, candidates, lines, results)
    return 0 if all(r.exit_code == 0 for r in results) and report_status == 0 else 1


def cmd_collect_fanout(base: str, ledger: Ledger) -> int:
    """`collect <base>`: the table and report of a fan-out whose own process did not see its runs end."""
    manifest = FanoutManifest.load(manifest_path(ledger.path, base))
    records = ledger.runs()
    live = [m.run_id for m in manifest.members if m.run_id in records and not records[m.run_id].final]
    if live:
        print(f"Fan-out {base}: not ended yet: {', '.join(live)}; collect again once they have (`collect RUN_ID` "
              "finalises a detached run, `sweep` a run whose orchestrator died)")  # fmt: skip
        return 1
    started = [m for m in manifest.members if m.run_id in records]
    candidates = candidates_of(load_catalogs([Path(c) for c in manifest.catalogs]), started)
    return _fanout_results(manifest, candidates, started, records, {})


def _check_boot_script(profile: Profile, provider: Provider) -> None:
    if not provider.has(Capability.BOOT_SCRIPT):
        raise UsageError(
            f"--detach needs a provider that runs boot scripts (aws, gce); {profile.name} is {profile.provider}"
        )


def _check_detachable(profile: Profile, provider: Provider, bucket: str | None) -> None:
    """A detached fan-out launches nothing unless every profile can run detached into the bucket given."""
    _check_boot_script(profile, provider)
    if bucket is not None:
        try:
            resolve_bucket(bucket, profile)
        except StorageError as exc:
            raise UsageError(
                f"{profile.name}: {exc}; leave --bucket out to give each cloud the project's own"
            ) from None


def _print_detached_fanout(
    args: argparse.Namespace,
    base: str,
    candidates: Sequence[Candidate],
    codes: Mapping[str, int],
    records: Mapping[str, RunRecord],
    interrupted: bool,
) -> int:
    """Each profile's run works on alone: where it is, and the commands that follow it and make the report."""
    print(f"\nFan-out {base}: {len(codes)} profiles, detached")
    launched = []
    by_run = {fanout_run_id(base, c.profile.name): c for c in candidates}
    for run_id in codes:
        record = records.get(run_id)
        status = record.status if record is not None else "not started"
        note = (
            f"{record.storage}runs/{run_id}/" if status == "detached" and record else (record.message if record else "")
        )
        print(f"  {by_run[run_id].profile.name:<24} {run_id:<40} {status:<10} {note}")
        if status == "detached":
            launched.append(run_id)
    if launched:
        out = args.report_out or Path("report-out") / base
        study = args.suite if args.suite in _study_names() else None
        print("\nFollow and collect each (collect again until it says complete), then the report across them:")
        ledger = ["--ledger", str(args.ledger)] if args.ledger is not None else []
        for run_id in launched:
            print("  " + shlex.join([sys.executable, "-m", "orchestrate", "collect", run_id, *ledger]))
        report = report_commands(args.logs, base, out, study, args.ledger, candidates)[0]
        print("  " + shlex.join(report))
    if interrupted:
        return 130
    return 0 if len(launched) == len(codes) else 1


def _check_settings_apply(args: argparse.Namespace, candidates: Sequence[Candidate]) -> None:
    """In a fan-out a setting goes to the profiles whose provider has it, so one that none has is a typo."""
    accepted = {key for c in candidates for key in load_provider_class(c.profile.provider).settings}
    given = [key for key, value in SSH_FLAGS.items() if getattr(args, value) is not None]
    given += [_key_value(text)[0] for text in args.provider_setting]
    for key in given:
        if key not in accepted:
            names = ", ".join(c.profile.name for c in candidates)
            raise UsageError(f"setting {key!r} applies to none of the profiles {names}")


SSH_FLAGS = {"host": "host", "port": "port", "identity_file": "identity"}  # provider setting -> run option


def _profile_args(args: argparse.Namespace, candidate: Candidate, base: str) -> argparse.Namespace:
    """One profile's `run` options: its own run id, and only the settings its provider has."""
    settings = load_provider_class(candidate.profile.provider).settings
    values = vars(args) | {
        "profile": candidate.profile.name,
        "profiles": None,
        "run_id": fanout_run_id(base, candidate.profile.name),
        "provider_setting": [t for t in args.provider_setting if _key_value(t)[0] in settings],
        "allow_retired": candidate.profile.retired,
        "plain": True,  # the child's output goes to a file, line by line
    }
    for key, option in SSH_FLAGS.items():
        if key not in settings:
            values[option] = None
    return argparse.Namespace(**values)


def _run_argv(args: argparse.Namespace) -> list[str]:
    """`args` back into `run`'s command line, from the parser's own option table so no option is forgotten."""
    parser = _Parser()
    _run_options(parser)
    argv: list[str] = []
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        if not action.option_strings or action.dest in FANOUT_ONLY or value is None:
            continue
        flag = action.option_strings[0]
        if action.nargs == 0:  # store_true / store_false: the flag whose constant the value is
            argv += [flag] if value == action.const else []
        elif isinstance(value, list):
            argv += [part for item in value for part in (flag, str(item))]
        else:
            argv += [flag, str(value)]
    return argv


def _print_fanout_plan(
    base: str,
    candidates: Sequence[Candidate],
    plans: dict[str, tuple[RunPlan, bool, str]],
    estimates: Sequence[CandidateEstimate],
    dry_run: bool,
) -> None:
    first = plans[candidates[0].profile.name][0]
    head = "Fan-out (dry run: nothing is launched)" if dry_run else "Fan-out"
    print(f"{head} of suite {first.suite} on {len(candidates)} profiles, run ids {base}-<profile>")
    width = max(len(c.profile.name) for c in candidates)
    for candidate in candidates:
        plan, _, credentials = plans[candidate.profile.name]
        mapping = f"; stands in for {candidate.mapping}" if candidate.mapping else ""
        print(f"  {candidate.profile.name:<{width}}  {len(plan.items)} runs, image {plan.image_ref}{mapping}")
        if credentials != "ok":
            print(f"  {'':<{width}}  credentials: {credentials}")
    print("\n".join(estimate_table(estimates)))


def _fanout_report(
    manifest: FanoutManifest, candidates: Sequence[Candidate], lines: Sequence[str], results: Sequence[CandidateResult]
) -> int:
    """One report across every profile's runs, plus the table and the retired-profile mapping beside it."""
    out = Path(manifest.report_out)
    write_summary(out / SUMMARY, lines, candidates)
    if not any(r.epochs for r in results):
        print(f"no epoch was logged by any profile: no report (summary in {out / SUMMARY})")
        return 1
    ledger = Path(manifest.ledger) if manifest.ledger is not None else None
    commands = report_commands(Path(manifest.logs), manifest.base, out, manifest.study, ledger, candidates)
    return max(subprocess.run(command, check=False).returncode for command in commands)


def _study_names() -> set[str]:
    return set(load_studies())


def _expand_study(text: str, suite: str) -> str:
    """`--profiles study`: one profile per configuration of the study the suite is (the first profile the
    study says reproduces it); retired ones are then mapped like any other."""
    names = [name.strip() for name in text.split(",")]
    if "study" not in names:
        return text
    study = load_studies().get(suite)
    if study is None:
        raise UsageError(
            f"--profiles study: --suite {suite} is not a published study (python -m report --list-studies)"
        )
    matched = [config.matches[0] for config in study.configs if config.matches]
    matched += [profiles[0] for profiles in study.raw.get("matches", {}).values() if profiles]
    expanded = [part for name in names for part in (matched if name == "study" else [name])]
    return ",".join(expanded)


def _make_provider(profile: Profile, args: argparse.Namespace) -> Provider:
    settings = dict(_key_value(text) for text in args.provider_setting)
    cls = load_provider_class(profile.provider)
    for key, value in (("host", args.host), ("port", args.port), ("identity_file", args.identity)):
        if value is not None:
            if key not in cls.settings:  # ssh's settings, and those of any provider that declares them
                raise UsageError(
                    f"--{key.split('_')[0]} applies to providers with a {key} setting, like ssh; "
                    f"{profile.name} is {profile.provider}"
                )
            settings[key] = value
    if args.ssh_config is not None and not args.ssh_config.is_file():
        raise UsageError(f"--ssh-config {args.ssh_config}: no such file")
    provider = cls.from_settings(settings)
    provider.validate_profile(profile)
    return provider


def _make_plan(args: argparse.Namespace, profile: Profile, provider: Provider) -> RunPlan:
    suite = get_suite(args.suite)
    backends = suite.subset("backend", args.backends)
    workloads = suite.subset("workload", args.workloads)
    spot = profile.use_spot if args.spot is None else args.spot
    if spot and not provider.has(Capability.BILLABLE):
        raise UsageError(f"--spot applies to rented machines; {profile.name} is a {profile.provider} host")
    platform = args.platform or profile.name
    for what, value in (("--platform", platform), ("--run-id", args.run_id)):
        if value is not None and not _is_safe_name(value):
            raise UsageError(f"{what} {value!r}: use letters, digits, '-', '_' and '.' only")
    _check_limits(args, profile)
    _check_devices(args.gpus, profile, backends, exact_shape=provider.has(Capability.BILLABLE))
    image = args.image or default_image_ref(profile.docker_image)
    return RunPlan(
        run_id=args.run_id or new_run_id(),
        profile=profile,
        platform=platform,
        suite=suite.name,
        # round robin: repeat 1 of every item, then repeat 2..., so a slow drift does not favour one item
        items=planned_rounds([WorkItem(w, b) for b in backends for w in workloads], args.repeats),
        spot=spot,
        image_ref=image,
        image_source=args.image_source,
        build=default_build_spec(profile.docker_image, image),
        logs_dir=args.logs,
        owner=owner_id(),
        remote_dir=args.remote_dir,
        epochs=args.epochs,
        train_limit=args.train_limit,
        val_limit=args.val_limit,
        gpus=args.gpus,
        batch_policy=args.batch_policy,
        repeats=args.repeats,
        allow_synthetic=not args.strict_data,
        ssh_config=args.ssh_config,
        ssh_timeout_s=args.ssh_timeout,
        boot_timeout_s=args.boot_timeout,
        max_lifetime_s=args.max_lifetime * 60,
        max_preemptions=args.max_preemptions,
        install_host_software=args.install_host_software,
    )


def _check_limits(args: argparse.Namespace, profile: Profile) -> None:
    """Flags whose bad values would otherwise surface only once a machine runs."""
    if args.max_lifetime > MAX_LIFETIME_MIN:
        raise UsageError(f"--max-lifetime {args.max_lifetime}: at most {MAX_LIFETIME_MIN} minutes (a week)")
    if args.repeats > MAX_REPEATS:
        raise UsageError(f"--repeats {args.repeats}: at most {MAX_REPEATS}")
    remote = args.remote_dir
    if not (remote == "~" or remote.startswith(("~/", "/"))) or not set(remote[1:]) <= REMOTE_DIR_CHARS:
        raise UsageError(f"--remote-dir {remote!r}: use ~, ~/path or /path of letters, digits and / . _ - + @ only")
    if ".." in remote.split("/"):
        raise UsageError(f"--remote-dir {remote!r}: '..' is not allowed")
    if (args.gpus is not None or args.batch_policy is not None) and not profile.has_gpu:
        flag = "--gpus" if args.gpus is not None else "--batch-policy"
        raise UsageError(f"{flag} applies to GPU profiles; {profile.name} has no accelerator")


def _check_devices(gpus: str | None, profile: Profile, backends: Sequence[str], exact_shape: bool) -> None:
    """A --gpus that the machine or a backend cannot honour fails here, not on a machine already paid for. A rented
    profile's GPU count is its shape; an SSH profile's is only what its catalog entry says of the user's box."""
    if gpus is None:
        return
    known = profile.accelerator_count if exact_shape else None
    if known is not None and gpus != "all" and int(gpus) > known:
        raise UsageError(f"--gpus {gpus}: {profile.name} has {known} GPU(s)")
    devices = known if gpus == "all" else int(gpus)
    if SINGLE_DEVICE_BACKENDS & set(backends) and devices is not None and devices > 1:
        raise UsageError(f"--gpus {gpus}: {TORCH_SINGLE_DEVICE}; choose --backends jax,tensorflow")


def _refuse_existing_run(plan: RunPlan, ledger: Ledger) -> None:
    """A run id names one run: reusing it would overwrite (and then delete) the results already under it."""
    if plan.run_id in ledger.runs():
        raise UsageError(f"--run-id {plan.run_id}: a run of that id is in the ledger {ledger.path}; choose another")
    if plan.run_logs.exists():
        raise UsageError(f"--run-id {plan.run_id}: {plan.run_logs} already exists; choose another")


def _with_validation_time(plan: RunPlan, started: float) -> RunPlan:
    return replace(plan, validated_at=(started, time.time()))


def _credentials(provider: Provider) -> str:
    """ "ok", or why not: missing credentials and an API that cannot be reached alike, so that `--dry-run`
    still shows the plan; a real run refuses to start on anything but "ok"."""
    try:
        provider.check_credentials()
    except ProviderError as exc:
        return str(exc)
    return "ok"


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise UsageError(f"--provider-setting {text!r}: expected KEY=VALUE")
    return key, value


def _is_safe_name(text: str) -> bool:
    return bool(text) and not text.startswith(".") and all(c.isalnum() or c in "-_." for c in text)


def _positive_int(text: str) -> int:
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def _non_negative_int(text: str) -> int:
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {text}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


def _gpus(text: str) -> str:
    if text == "all":
        return text
    return str(_positive_int(text))


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def owner_id() -> str:
    return f"{getpass.getuser()}@{socket.gethostname()}"


def _row(label: str, text: str) -> None:
    print(f"  {label:<12} {text}")


def _print_plan(plan: RunPlan, provider: Provider, credentials: str, ledger: Ledger, dry_run: bool) -> None:
    profile = plan.profile
    head = "Plan (dry run: nothing is launched)" if dry_run else "Plan"
    print(f"{head} for run {plan.run_id}")
    where = profile.description or profile.name
    if provider.has(Capability.FRESH_HOST):
        zones = ", ".join(profile.zones) or "provider default"
        _row("machine", f"{profile.name}: {where}")
        _row("", f"{profile.provider} {profile.machine_type}, zones {zones} ({provider.describe()})")
    else:
        _row("machine", f"{profile.name}: {provider.describe()}")
    gpus = "--gpus all, " if profile.has_gpu else ""
    _row("image", f"{plan.image_ref} ({gpus}source: {plan.image_source})")
    backends = sorted({i.backend for i in plan.items}, key=BACKENDS.index)
    workloads = list(dict.fromkeys(i.workload for i in plan.items))
    repeats = f" x {plan.repeats} repeats" if plan.repeats > 1 else ""
    _row(
        "suite",
        f"{plan.suite}: {len(workloads)} workloads x {len(backends)} backends{repeats} = {len(plan.items)} runs",
    )
    width = max(len(w) for w in workloads)
    print(f"    {'workload':<{width}}  {'  '.join(backends)}")
    for workload in workloads:
        cells = "  ".join(f"{'x':<{len(b)}}" for b in backends)
        print(f"    {workload:<{width}}  {cells}")
    _row("logs", str(plan.run_logs))
    runner = plan.runner_command(plan.items[0]).argv(entrypoint=True)
    shown = ("--epochs", "--train-limit", "--val-limit", "--gpus", "--batch-policy")
    flags = [f"{flag} {runner[i + 1]}" for i, flag in enumerate(runner) if flag in shown]
    extra = f"; runner {' '.join(flags)}" if flags else ""
    _row("limits", f"SSH wait {plan.ssh_timeout_s:g} s; max lifetime {plan.max_lifetime_s // 60} min{extra}")
    if provider.has(Capability.BILLABLE):
        _print_cost(plan, ledger)
    _row("credentials", credentials)


def _print_cost(plan: RunPlan, ledger: Ledger) -> None:
    profile = plan.profile
    price = profile.hourly_price(plan.spot)
    market = "spot/preemptible" if plan.spot else "on-demand"
    if price is None:
        _row("cost", f"unknown: the catalog has no {market} price for {profile.name}")
        return
    age_days = (dt.date.today() - dt.date.fromisoformat(price.date)).days
    stale = f" -- {age_days // 365} years old, check current prices" if age_days > STALE_PRICE_DAYS else ""
    _row("price", f"${price.usd_per_hour:.4f}/h {market} (as of {price.date}{stale})")
    _row("", f"source: {price.source}")
    billing = f"billed per {profile.billing_increment_s} s, minimum {profile.billing_minimum_s} s"
    cap = profile.cost_usd(plan.max_lifetime_s, spot=plan.spot) or 0.0
    history = [
        r.billed_seconds
        for r in ledger.runs().values()
        if r.profile == profile.name and r.suite == plan.suite and r.status == STATUS_COMPLETE and r.billed_seconds
    ]
    if history:
        typical = statistics.median(history)
        estimate = profile.cost_usd(typical, spot=plan.spot) or 0.0
        _row("cost", f"about ${estimate:.2f}: median of {len(history)} earlier complete {plan.suite} runs")
        _row("", f"({typical / 60:.0f} min); at most ${cap:.2f} at the max lifetime; {billing}")
    else:
        _row("cost", f"at most ${cap:.2f} (the max lifetime at this price); {billing}")
        _row("", f"no earlier complete {plan.suite} run on {profile.name} in the ledger to estimate from")


def _print_outcome(outcome: Outcome) -> None:
    record = outcome.record
    print(f"\nRun {record.run_id}: {record.status}: {record.message}")
    items = record.latest_items()
    finished = [i for i in items if i.status == STATUS_COMPLETE]
    print(f"  logs        {record.logs_dir} ({len(finished)} of {len(items)} runs complete)")
    if outcome.torn_down:
        print("  torn down   " + "\n              ".join(outcome.torn_down))
    for failure in outcome.teardown_failures:
        print(f"  TEARDOWN PROBLEM: {failure}  -> run `python -m orchestrate sweep`")
    if record.estimated_cost_usd is not None:
        print(f"  cost        ${record.estimated_cost_usd:.4f} estimated ({record.billed_seconds} s billed)")
    stages = stage_totals(record)
    overhead = sum(stages.get(name, 0.0) for name in ORCHESTRATION_STAGES)
    wall = (record.ended_at or time.time()) - record.started_at
    print(
        f"  time        {wall:.1f} s wall, {overhead:.1f} s orchestration ("
        + ", ".join(f"{n} {stages[n]:.1f}" for n in ORCHESTRATION_STAGES if n in stages)
        + ")"
    )


def stage_totals(record: RunRecord) -> dict[str, float]:
    """Seconds spent per stage name, summed over the run (e.g. every log pull)."""
    totals: dict[str, float] = {}
    for stage in record.stages:
        if stage.seconds is not None:
            totals[stage.name] = totals.get(stage.name, 0.0) + stage.seconds
    return totals


# ---- profiles, providers, sweep, cost ------------------------------------------------------------------


def cmd_profiles(args: argparse.Namespace) -> int:
    catalog = load_catalogs(args.catalog)
    if args.names:
        print("\n".join(catalog))
        return 0
    for profile in catalog.values():
        price = profile.hourly_price()
        cost = f"${price.usd_per_hour:.4f}/h{' spot' if profile.use_spot else ''} ({price.date})" if price else "-"
        retired = f"  RETIRED {profile.retired_on}, use {profile.replacement}" if profile.retired else ""
        print(f"{profile.name:<20} {profile.provider:<6} {cost:<30} {profile.description}{retired}")
    return 0


def cmd_providers(args: argparse.Namespace) -> int:
    for name in provider_names():
        source = provider_source(name)
        try:
            cls = load_provider_class(name)
        except ProviderError as exc:
            print(f"{name:<8} BROKEN: {exc}")
            continue
        capabilities = ", ".join(sorted(cls.capabilities)) or "-"
        settings = ", ".join(cls.settings) or "none"
        print(f"{name:<8} {source}\n         capabilities: {capabilities}; settings: {settings}")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    known = provider_names()
    if args.provider is not None and args.provider not in known:
        raise UsageError(f"--provider {args.provider}: no such provider; registered: {', '.join(known)}")
    names = [args.provider] if args.provider else known
    settings = _sweep_settings(args.provider_setting, names)
    catalog = _catalog_or_empty(args.catalog)
    ledger = Ledger(args.ledger)
    context = SweepContext(
        ledger=ledger,
        owner=owner_id(),
        this_host=socket.gethostname(),
        dry_run=args.dry_run,
        now=time.time(),
        profile_of=catalog.get,
    )
    report = SweepReport()
    settle_ledger(context, report)
    # before the providers' sweeps, so that they find these runs final and delete what the runs left
    assumed = _finalise_unlaunched(names, settings, catalog, context, report)
    context = replace(context, assumed=assumed)
    for name in names:
        _sweep_one(name, settings.get(name, {}), context, report)
    _print_sweep(report, args.dry_run)
    return 1 if report.errors else 0


def _sweep_one(name: str, settings: dict[str, str], context: SweepContext, report: SweepReport) -> None:
    """One provider, in isolation: a plug-in that fails to load, to build or to list is one error line."""
    try:
        cls = load_provider_class(name)
        if Capability.PERSISTENT_HOST in cls.capabilities:
            recover_dead_runs(name, Capability.RUNS_LOCALLY in cls.capabilities, context, report)
        if Capability.LEFTOVERS in cls.capabilities:
            fresh = Capability.FRESH_HOST in cls.capabilities
            salvage = partial(recover_run, runs_locally=False, fresh_host=fresh)
            run_sweep([cls.from_settings(settings)], replace(context, salvage=salvage), report)
    except Exception as exc:  # broad on purpose: a plug-in that fails to import or build is one error line
        report.errors.append(f"{name}: {type(exc).__name__}: {exc}")


def _finalise_unlaunched(
    names: Sequence[str],
    settings: dict[str, dict[str, str]],
    catalog: Mapping[str, Profile],
    context: SweepContext,
    report: SweepReport,
) -> dict[str, RunRecord]:
    """Detached runs whose orchestrator died before it recorded a machine (a kill -9 during the image upload or
    the launch): only the ledger finds them. `collect` finalises each (a machine it did launch is found by its
    tags) and aborts its upload. A dry run returns each such run as `collect` would leave it: failed."""
    assumed: dict[str, RunRecord] = {}
    for run in context.ledger.runs().values():
        unlaunched = run.status == STATUS_DETACHED and not run.instances and run.pid and run.provider in names
        if not unlaunched or run.final or run.owner != context.owner or context.alive(run):
            continue
        try:
            profile = get_profile(catalog, run.profile, allow_retired=True)
            provider = load_provider_class(profile.provider).from_settings(settings.get(profile.provider, {}))
            if context.dry_run:
                _would_collect(run, provider, report, assumed)
                continue
            done = collect(run, provider, profile, context.ledger, 0, lambda _: None, False)
        except Exception as exc:  # broad on purpose, as for a provider: one error line, and the sweep goes on
            report.errors.append(f"could not finalise run {run.run_id}: {type(exc).__name__}: {exc}")
            continue
        report.recovered.append((run.run_id, done.record.message or done.action))
    return assumed


def _would_collect(run: RunRecord, provider: Provider, report: SweepReport, assumed: dict[str, RunRecord]) -> None:
    """What `collect` would make of a detached run with no machine in the ledger: adopt the machine its
    orchestrator launched but died before recording (found by its tag), or finalise the run."""
    machines = [i.instance_id for i in provider.list_instances() if i.tags.get("run-id") == run.run_id]
    if machines:
        adopt = f"would adopt {', '.join(machines)}: its orchestrator died after launching it, before recording it"
        report.recovered.append((run.run_id, f"{adopt}; the run goes on detached"))
        return
    report.recovered.append((run.run_id, "would finalise it: its orchestrator died before it launched a machine"))
    assumed[run.run_id] = replace(run, status=STATUS_FAILED)


def _sweep_settings(texts: Sequence[str], names: Sequence[str]) -> dict[str, dict[str, str]]:
    settings: dict[str, dict[str, str]] = {}
    for text in texts:
        provider, sep, pair = text.partition(":")
        if not sep or provider not in names:
            raise UsageError(
                f"--provider-setting {text!r}: expected PROVIDER:KEY=VALUE, PROVIDER one of {', '.join(names)}"
            )
        key, value = _key_value(pair)
        settings.setdefault(provider, {})[key] = value
    return settings


def _catalog_or_empty(extra: Sequence[Path]) -> dict[str, Profile]:
    """The sweep bills what it deletes from the catalog's prices, but must work even with a broken catalog."""
    try:
        return load_catalogs(extra)
    except CatalogError as exc:
        print(f"warning: {exc}; costs of swept runs are left unknown", file=sys.stderr)
        return {}


def _print_sweep(report: SweepReport, dry_run: bool) -> None:
    verb = "would delete" if dry_run else "deleted"
    for label, reason in report.deleted:
        print(f"{verb:<12} {label}: {reason}")
    for run_id, what in report.recovered:
        print(f"{'recovered':<12} run {run_id}: {what}")
    for label, reason in report.kept:
        print(f"{'kept':<12} {label}: {reason}")
    for line in report.skipped_providers:
        print(f"{'skipped':<12} {line}")
    for line in report.set_aside:
        print(f"{'ledger':<12} {line}")
    for line in report.errors:
        print(f"error: {line}", file=sys.stderr)
    if not (report.deleted or report.kept or report.recovered or report.set_aside):
        print("nothing of this project is running")


def _billing_note(run: RunRecord) -> str:
    """How a machine that ended on its own was billed, where one did."""
    ways = {i.terminated_by for i in run.instances if i.terminated_by}
    if TERMINATED_BY_EXPIRY in ways:
        return "  (a machine ended itself: billed to its expiry, an upper bound)"
    return "  (a machine ended itself: billed to its provider's end time)" if ways else ""


def cmd_cost(args: argparse.Namespace) -> int:
    runs = list(Ledger(args.ledger).runs().values())
    if not runs:
        print(f"no runs in {args.ledger or default_ledger_path()}")
        return 0
    print(f"{'run':<26} {'profile':<20} {'suite':<12} {'status':<12} {'billed s':>9} {'cost $':>9}")
    per_profile: dict[str, list[float]] = {}
    for run in runs:
        cost = "-" if run.estimated_cost_usd is None else f"{run.estimated_cost_usd:.4f}"
        row = f"{run.run_id:<26} {run.profile:<20} {run.suite:<12} {run.status:<12}"
        print(f"{row} {run.billed_seconds:>9} {cost:>9}{_billing_note(run)}")
        if run.estimated_cost_usd is not None:
            per_profile.setdefault(run.profile, []).append(run.estimated_cost_usd)
    if per_profile:
        print(f"\n{'profile':<20} {'runs':>5} {'total $':>10}")
        for name, costs in sorted(per_profile.items()):
            print(f"{name:<20} {len(costs):>5} {sum(costs):>10.4f}")
    return 0
