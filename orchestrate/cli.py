"""`python -m orchestrate`: run a suite on a machine profile, list profiles, sweep leftovers, show costs.

Every input is checked before anything starts: profile (and retirement), provider and its settings, suite,
backends, workloads, flags, credentials. A bad one is a one-line error and exit status 2.
"""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import signal
import socket
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import NoReturn

from benchmarks.cli import new_run_id
from benchmarks.harness.backends import BACKENDS
from benchmarks.suites import SUITES, UnknownSuite, get_suite
from orchestrate import makefile
from orchestrate.catalog import CatalogError, Profile, get_profile, load_catalog
from orchestrate.images import IMAGE_SOURCES, default_build_spec, default_image_ref
from orchestrate.ledger import STATUS_COMPLETE, Ledger, RunRecord, default_ledger_path
from orchestrate.lifecycle import Interrupted, Lifecycle, Outcome, RunPlan, WorkItem, raise_interrupted
from orchestrate.progress import make_reporter
from orchestrate.provider import CredentialsError, Provider, ProviderError
from orchestrate.registry import load_provider_class, provider_names
from orchestrate.sweep import run_sweep

EXIT_USAGE = 2
STALE_PRICE_DAYS = 365
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
    run.add_argument("--profile", required=True, help="catalog profile (python -m orchestrate profiles)")
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
    run.add_argument("--image-source", choices=IMAGE_SOURCES, default="auto", help="how the image gets there")
    run.add_argument("--epochs", type=_positive_int, help="runner --epochs: override the suite's epochs")
    run.add_argument("--train-limit", type=_positive_int, help="runner --train-limit: first N training samples")
    run.add_argument("--val-limit", type=_positive_int, help="runner --val-limit: first N validation samples")
    run.add_argument("--strict-data", action="store_true", help="fail instead of using labelled synthetic data")
    run.add_argument("--logs", type=Path, default=Path("logs"), help="local log root (default: logs)")
    run.add_argument("--ledger", type=Path, help=f"ledger file (default: {default_ledger_path()})")
    run.add_argument("--run-id", help="name of this run's log folder (default: UTC time + random)")
    run.add_argument("--remote-dir", default="~/keras-cloud-bench", help="work folder on the host")
    run.add_argument("--ssh-timeout", type=_positive_float, default=300.0, help="seconds to wait for SSH")
    run.add_argument("--boot-timeout", type=_positive_float, default=600.0, help="seconds to wait for boot")
    run.add_argument(
        "--max-lifetime", type=_positive_int, default=240, help="minutes after which the machine ends itself"
    )
    run.add_argument("--max-preemptions", type=_non_negative_int, default=3, help="relaunches after preemption")
    run.add_argument(
        "--install-host-software",
        action="store_true",
        help="ssh/local hosts: install Docker / the NVIDIA toolkit when missing (rented machines always may)",
    )
    run.add_argument("--plain", action="store_true", help="plain progress lines even on a terminal")

    profiles = sub.add_parser("profiles", help="list the catalog's profiles")
    profiles.add_argument("--names", action="store_true", help="names only, one a line")

    targets = sub.add_parser("make-targets", help="write mk/profiles.mk (make bench-<profile>) from the catalog")
    targets.add_argument("--output", type=Path, default=makefile.DEFAULT_OUTPUT)
    targets.add_argument("--check", action="store_true", help="exit 1 if the file is out of date")

    sweep = sub.add_parser("sweep", help="delete machines this project left running")
    sweep.add_argument("--dry-run", action="store_true", help="say what would be deleted")
    sweep.add_argument("--provider", help="only this provider")
    sweep.add_argument("--ledger", type=Path, help=f"ledger file (default: {default_ledger_path()})")

    cost = sub.add_parser("cost", help="estimated cost per run and per profile, from the ledger")
    cost.add_argument("--ledger", type=Path, help=f"ledger file (default: {default_ledger_path()})")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _dispatch(argv)
    except KeyboardInterrupt:  # before a run started (a run turns Ctrl-C into its own teardown)
        print("interrupted: nothing was started", file=sys.stderr)
        return 130


def _dispatch(argv: Sequence[str] | None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command == "run":
            return cmd_run(args)
        if args.command == "profiles":
            return cmd_profiles(args)
        if args.command == "make-targets":
            return cmd_make_targets(args)
        if args.command == "sweep":
            return cmd_sweep(args)
        return cmd_cost(args)
    except (UsageError, CatalogError, ProviderError, UnknownSuite) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE


# ---- run ---------------------------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    started = time.time()
    profile = get_profile(load_catalog(), args.profile, allow_retired=args.allow_retired)
    provider = _make_provider(profile, args)
    plan = _make_plan(args, profile, provider)
    credentials = _credentials(provider)
    plan = _with_validation_time(plan, started)
    _print_plan(plan, provider, credentials, Ledger(args.ledger), dry_run=args.dry_run)
    if args.dry_run:
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
    _print_outcome(outcome)
    return outcome.exit_code


def _make_provider(profile: Profile, args: argparse.Namespace) -> Provider:
    settings = dict(_key_value(text) for text in args.provider_setting)
    for key, value in (("host", args.host), ("port", args.port), ("identity_file", args.identity)):
        if value is not None:
            if profile.provider != "ssh":
                raise UsageError(f"--{key.split('_')[0]} applies to ssh profiles; {profile.name} is {profile.provider}")
            settings[key] = value
    if args.ssh_config is not None and not args.ssh_config.is_file():
        raise UsageError(f"--ssh-config {args.ssh_config}: no such file")
    provider = load_provider_class(profile.provider).from_settings(settings)
    provider.validate_profile(profile)
    return provider


def _make_plan(args: argparse.Namespace, profile: Profile, provider: Provider) -> RunPlan:
    suite = get_suite(args.suite)
    backends = _subset(args.backends, suite.backends, "backend", f"suite {suite.name}")
    workloads = _subset(args.workloads, suite.workloads, "workload", f"suite {suite.name}")
    spot = profile.use_spot if args.spot is None else args.spot
    if spot and not provider.creates_machines:
        raise UsageError(f"--spot applies to rented machines; {profile.name} is a {profile.provider} host")
    platform = args.platform or profile.name
    for what, value in (("--platform", platform), ("--run-id", args.run_id)):
        if value is not None and not _is_safe_name(value):
            raise UsageError(f"{what} {value!r}: use letters, digits, '-', '_' and '.' only")
    image = args.image or default_image_ref(profile.docker_image)
    runner_args: list[str] = []
    for flag in ("epochs", "train_limit", "val_limit"):
        value = getattr(args, flag)
        if value is not None:
            runner_args += [f"--{flag.replace('_', '-')}", str(value)]
    return RunPlan(
        run_id=args.run_id or new_run_id(),
        profile=profile,
        platform=platform,
        suite=suite.name,
        items=tuple(WorkItem(w, b) for b in backends for w in workloads),
        spot=spot,
        image_ref=image,
        image_source=args.image_source,
        build=default_build_spec(profile.docker_image, image),
        logs_dir=args.logs,
        owner=owner_id(),
        remote_dir=args.remote_dir,
        runner_args=tuple(runner_args),
        allow_synthetic=not args.strict_data,
        ssh_config=args.ssh_config,
        ssh_timeout_s=args.ssh_timeout,
        boot_timeout_s=args.boot_timeout,
        max_lifetime_s=args.max_lifetime * 60,
        max_preemptions=args.max_preemptions,
        install_host_software=args.install_host_software,
    )


def _with_validation_time(plan: RunPlan, started: float) -> RunPlan:
    return replace(plan, validated_at=(started, time.time()))


def _credentials(provider: Provider) -> str:
    try:
        provider.check_credentials()
    except CredentialsError as exc:
        return str(exc)
    return "ok"


def _subset(text: str | None, allowed: Sequence[str], what: str, where: str) -> list[str]:
    if text is None:
        return list(allowed)
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in allowed]
    if unknown or not names:
        raise UsageError(
            f"unknown {what} {', '.join(unknown) or repr(text)} for {where}; choose from {', '.join(allowed)}"
        )
    return names


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
    if provider.creates_machines:
        zones = ", ".join(profile.zones) or "provider default"
        _row("machine", f"{profile.name}: {where}")
        _row("", f"{profile.provider} {profile.machine_type}, zones {zones}")
    else:
        target = getattr(provider, "target", None)
        _row("machine", f"{profile.name}: {target.display() if target is not None else 'this machine'}")
    gpus = "--gpus all, " if profile.has_gpu else ""
    _row("image", f"{plan.image_ref} ({gpus}source: {plan.image_source})")
    backends = sorted({i.backend for i in plan.items}, key=BACKENDS.index)
    workloads = list(dict.fromkeys(i.workload for i in plan.items))
    _row(
        "suite",
        f"{plan.suite}: {len(workloads)} workloads x {len(backends)} backends = {len(plan.items)} runs",
    )
    width = max(len(w) for w in workloads)
    print(f"    {'workload':<{width}}  {'  '.join(backends)}")
    for workload in workloads:
        cells = "  ".join(f"{'x':<{len(b)}}" for b in backends)
        print(f"    {workload:<{width}}  {cells}")
    _row("logs", str(plan.run_logs))
    extra = f"; runner {' '.join(plan.runner_args)}" if plan.runner_args else ""
    _row("limits", f"SSH wait {plan.ssh_timeout_s:g} s; max lifetime {plan.max_lifetime_s // 60} min{extra}")
    if provider.creates_machines:
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


# ---- profiles, make-targets, sweep, cost ------------------------------------------------------------------


def cmd_profiles(args: argparse.Namespace) -> int:
    catalog = load_catalog()
    if args.names:
        print("\n".join(catalog))
        return 0
    for profile in catalog.values():
        price = profile.hourly_price()
        cost = f"${price.usd_per_hour:.4f}/h{' spot' if profile.use_spot else ''} ({price.date})" if price else "-"
        retired = f"  RETIRED {profile.retired_on}, use {profile.replacement}" if profile.retired else ""
        print(f"{profile.name:<20} {profile.provider:<6} {cost:<30} {profile.description}{retired}")
    return 0


def cmd_make_targets(args: argparse.Namespace) -> int:
    text = makefile.render(load_catalog())
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date: run `python -m orchestrate make-targets`", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(f"wrote {args.output}")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    names = [args.provider] if args.provider else provider_names()
    providers = []
    for name in names:
        cls = load_provider_class(name)
        if cls.creates_machines:
            providers.append(cls.from_settings({}))
    report = run_sweep(
        providers,
        Ledger(args.ledger).runs(),
        owner=owner_id(),
        this_host=socket.gethostname(),
        dry_run=args.dry_run,
    )
    verb = "would delete" if args.dry_run else "deleted"
    for label, reason in report.deleted:
        print(f"{verb:<12} {label}: {reason}")
    for label, reason in report.kept:
        print(f"{'kept':<12} {label}: {reason}")
    for line in report.skipped_providers:
        print(f"{'skipped':<12} {line}")
    for line in report.errors:
        print(f"error: {line}", file=sys.stderr)
    if not (report.deleted or report.kept):
        print("nothing of this project is running")
    return 1 if report.errors else 0


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
        print(f"{row} {run.billed_seconds:>9} {cost:>9}")
        if run.estimated_cost_usd is not None:
            per_profile.setdefault(run.profile, []).append(run.estimated_cost_usd)
    if per_profile:
        print(f"\n{'profile':<20} {'runs':>5} {'total $':>10}")
        for name, costs in sorted(per_profile.items()):
            print(f"{name:<20} {len(costs):>5} {sum(costs):>10.4f}")
    return 0
