"""`status RUN_ID`: a detached run's progress, read from its bucket; a batch run's (Slurm), read from the scheduler
(changes nothing)."""

from __future__ import annotations

import argparse

from orchestrate.capabilities import BatchQueue
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
    batch = batch_run(args)
    if batch is not None:
        record, _, provider = batch
        return _batch_status(record, provider)
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


def batch_run(args: argparse.Namespace) -> tuple[RunRecord, Profile, Provider] | None:
    """The run, its profile and its provider when the run is on a batch scheduler (Capability.BATCH), else None."""
    record = Ledger(args.ledger).runs().get(args.run_id)
    if record is None or record.storage:
        return None
    try:
        cls = load_provider_class(record.provider)
    except ProviderError:
        return None
    if not issubclass(cls, BatchQueue):
        return None
    profile = get_profile(load_catalogs(args.catalog), record.profile, allow_retired=True)
    provider = cls.from_settings(dict(key_value(text) for text in args.provider_setting))
    provider.validate_profile(profile)
    return record, profile, provider


def _batch_status(record: RunRecord, provider: Provider) -> int:
    """The ledger's items, and each task of the run's job still in the scheduler's queue."""
    assert isinstance(provider, BatchQueue)
    print(f"Run {record.run_id} ({record.profile}, {provider.describe()}): {record.status}")
    done = sum(1 for item in record.latest_items() if item.status == "complete")
    print(f"  items       {done} of {len(record.latest_items())} recorded complete")
    jobs = [i for i in provider.list_instances() if i.tags.get("run-id") == record.run_id]
    if not jobs:
        print("  queue       no job of this run is queued or running")
    for job in jobs:
        for task in provider.tasks(job):
            restarts = f", requeued {task.restarts}x" if task.restarts else ""
            reason = f" ({task.reason})" if task.reason and task.reason != "None" else ""
            print(f"  task {task.index:<6} {job.instance_id}: {task.state}{reason}{restarts}")
    return 0
