"""`sweep`: delete machines this project left running, finalise runs whose orchestrator died, settle the ledger."""

from __future__ import annotations

import argparse
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path

from orchestrate.capabilities import BatchQueue
from orchestrate.cli.common import UsageError, catalog_option, key_value, ledger_option, owner_id
from orchestrate.detached_runs import collect, read_progress
from orchestrate.provider import Capability, Provider, ProviderError
from orchestrate.recover import recover_dead_runs, recover_run, recover_saved
from orchestrate.registry import load_provider_class, provider_names
from orchestrate.sweep import SweepContext, SweepReport, run_sweep, settle_ledger
from records.catalog import CatalogError, Profile, get_profile, load_catalogs
from records.ledger import STATUS_DETACHED, STATUS_FAILED, Ledger, RunRecord


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("sweep", help="delete machines this project left running")
    parser.add_argument("--dry-run", action="store_true", help="say what would be deleted")
    parser.add_argument("--provider", help="only this provider")
    parser.add_argument(
        "--provider-setting",
        action="append",
        default=[],
        metavar="PROVIDER:KEY=VALUE",
        help="a setting for one provider, e.g. aws:ssh_address={private_ip}",
    )
    ledger_option(parser)
    catalog_option(parser)
    parser.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
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
        profile_of=partial(_billing_profile, catalog),
        recover_saved=recover_saved,
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
    tags) and aborts its upload. A dry run returns each such run as `collect` would leave it: failed.
    And detached runs whose machine has ended with its summary in the bucket, but whose ledger does not say so (not
    collected yet, or its final line torn and its run.json gone): `collect` finalises and bills them."""
    assumed: dict[str, RunRecord] = {}
    for run in context.ledger.runs().values():
        detached = run.status == STATUS_DETACHED and run.provider in names and bool(run.storage)  # a batch job: collect
        unlaunched = detached and not run.instances and run.pid
        if not detached or run.final or run.owner != context.owner or context.alive(run):
            continue
        try:
            if not unlaunched and read_progress(run)[1].summary is None:
                continue  # its machine works on, or ended without a summary: `collect` decides (relaunch or not)
            profile = get_profile(catalog, run.profile, allow_retired=True)
            provider = load_provider_class(profile.provider).from_settings(settings.get(profile.provider, {}))
            if context.dry_run:
                if unlaunched:
                    _would_collect(run, provider, report, assumed)
                else:
                    report.recovered.append((run.run_id, "would collect it: its machine's summary is in its bucket"))
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
        key, value = key_value(pair)
        settings.setdefault(provider, {})[key] = value
    return settings


def _billing_profile(catalog: Mapping[str, Profile], name: str, nodes: int = 1) -> Profile | None:
    """The profile a swept machine is billed under: a batch provider's priced per task allocation (of `nodes`
    nodes), as its run was."""
    profile = catalog.get(name)
    if profile is None:
        return None
    try:
        cls = load_provider_class(profile.provider)
        if issubclass(cls, BatchQueue):
            return cls.from_settings({}).allocation_price(profile, nodes)
    except ProviderError:
        pass  # a provider that cannot load, or a profile it refuses: the catalog's price as written
    return profile


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
