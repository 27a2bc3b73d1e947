"""`status RUN_ID`: a detached run's progress, read from its bucket (changes nothing)."""

from __future__ import annotations

import argparse

from orchestrate.cli.common import UsageError, catalog_option, key_value, ledger_option, run_id
from orchestrate.detached_runs import item_counts, machine_state, read_progress
from orchestrate.provider import InstanceState, Provider, ProviderError
from orchestrate.registry import load_provider_class
from records.catalog import Profile, get_profile, load_catalogs
from records.ledger import Ledger, RunRecord, default_ledger_path


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("status", help="a detached run's progress, read from its bucket (changes nothing)")
    parser.add_argument("run_id", metavar="RUN_ID", type=run_id)
    ledger_option(parser)
    parser.add_argument("--provider-setting", action="append", default=[], metavar="KEY=VALUE")
    catalog_option(parser)
    parser.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
    record, _, provider = detached_record(args)
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


def detached_record(args: argparse.Namespace) -> tuple[RunRecord, Profile, Provider]:
    """The ledger's record of the detached run `args.run_id`, its profile and its provider."""
    record = Ledger(args.ledger).runs().get(args.run_id)
    if record is None:
        raise UsageError(f"run {args.run_id} is not in the ledger {args.ledger or default_ledger_path()}")
    if not record.storage:
        raise UsageError(f"run {args.run_id} is not a detached run: its logs are in {record.logs_dir}")
    profile = get_profile(load_catalogs(args.catalog), record.profile, allow_retired=True)
    settings = dict(key_value(text) for text in args.provider_setting)
    return record, profile, load_provider_class(profile.provider).from_settings(settings)
