"""`collect RUN_ID`: fetch a detached run's logs from its bucket into logs/, finalise it, resume it if preempted;
a batch run's (Slurm) from the cluster's shared folder, finalised and billed from the job records once its job has
ended; `collect BASE` of a fan-out: its table and report once its runs have ended."""

from __future__ import annotations

import argparse
import socket

from orchestrate.batch import BatchCollected, collect_batch
from orchestrate.cli.common import catalog_option, ledger_option, non_negative_int, run_id
from orchestrate.cli.run_fanout import collect_fanout
from orchestrate.cli.status import batch_run, detached_record
from orchestrate.detached_runs import collect
from orchestrate.fanout import manifest_path
from orchestrate.progress import make_reporter
from orchestrate.provider import Provider
from orchestrate.sweep import local_process_alive
from records.catalog import Profile
from records.ledger import STATUS_COMPLETE, Ledger, RunRecord


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "collect",
        help="fetch a detached run's logs from its bucket (a Slurm run's from the cluster) into logs/, finalise it, "
        "resume it if preempted",
    )
    parser.add_argument("run_id", metavar="RUN_ID", type=run_id)
    ledger_option(parser)
    parser.add_argument("--provider-setting", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--max-preemptions", type=non_negative_int, default=3, help="relaunches after preemption")
    parser.add_argument("--no-relaunch", action="store_true", help="do not relaunch a preempted run's machine")
    catalog_option(parser)
    parser.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
    ledger = Ledger(args.ledger)
    if args.run_id not in ledger.runs() and manifest_path(ledger.path, args.run_id).exists():
        return collect_fanout(args.run_id, ledger)
    batch = batch_run(args)
    if batch is not None:
        return _collect_batch(*batch, ledger)
    record, profile, provider = detached_record(args)
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
    return _print_outcome(record)


def _collect_batch(record: RunRecord, profile: Profile, provider: Provider, ledger: Ledger) -> int:
    alive = not record.final and local_process_alive(socket.gethostname())(record)
    reporter = make_reporter(force_plain=True)
    try:
        done = collect_batch(record, provider, profile, ledger, reporter, alive)
    finally:
        reporter.close()
    _print_batch(done)
    return _print_outcome(done.record)


def _print_batch(done: BatchCollected) -> None:
    record = done.record
    print(f"Run {record.run_id}: {done.action}")
    print(f"  logs        {record.logs_dir} ({len(done.downloaded)} file(s) fetched)")
    for label, task in done.tasks:
        restarts = f", requeued {task.restarts}x" if task.restarts else ""
        code = f", exit {task.item_exit_code}" if task.item_exit_code is not None else ""
        print(f"  task {task.index:<6} {label}: {task.state}{code}{restarts}")


def _print_outcome(record: RunRecord) -> int:
    """The record's message, cost and teardown problems; the command's exit code (1: a final run that did not
    complete, or whose teardown left something)."""
    if record.message:
        print(f"  message     {record.message}")
    if record.estimated_cost_usd is not None:
        print(f"  cost        ${record.estimated_cost_usd:.4f} estimated ({record.billed_seconds} s billed)")
    for failure in record.teardown_failures:
        print(f"  TEARDOWN PROBLEM: {failure}  -> run `python -m orchestrate sweep`")
    return 1 if record.final and (record.status != STATUS_COMPLETE or record.teardown_failures) else 0
