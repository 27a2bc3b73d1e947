"""`python -m orchestrate`: run a suite on a machine profile, list profiles, sweep leftovers, show costs.

Every input is checked before anything starts: profile (and retirement), provider and its settings, suite,
backends, workloads, flags, credentials. A bad one is a one-line error and exit status 2.

One module per command, each with its `add_parser` and its `command`; `run`'s modes are typed requests
(orchestrate.cli.request).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from benchmarks.plugins import BadWorkload
from benchmarks.suites import UnknownSuite
from orchestrate.cli import collect, cost, profiles, providers, run, schedule, status, sweep
from orchestrate.cli.common import EXIT_USAGE, Parser, UsageError, check_ledger_path, owner_id, silence_stdout
from orchestrate.data_dir import BadDataDir
from orchestrate.detached import DetachedError
from orchestrate.provider import ProviderError
from orchestrate.runspec import SpecError
from orchestrate.schedule import ScheduleError, ScheduleFailure
from orchestrate.schedule_cost import PriceDataError
from orchestrate.storage import StorageError
from records.catalog import CatalogError

__all__ = ["build_parser", "main", "owner_id"]  # owner_id: whose runs the ledger and the sweep count as one's own

COMMANDS = (run, providers, profiles, sweep, cost, schedule, status, collect)  # in the order --help lists them


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="python -m orchestrate", description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for module in COMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _dispatch(argv)
    except KeyboardInterrupt:  # before a run started (a run turns Ctrl-C into its own teardown)
        print("interrupted: nothing was started", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of stdout left (`| head`): stop printing, quietly
        silence_stdout()
        return 1


def _dispatch(argv: Sequence[str] | None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if hasattr(args, "ledger"):  # a command that reads or writes the ledger
            check_ledger_path(args.ledger)
        handler: Callable[[argparse.Namespace], int] = args.handler
        return handler(args)
    except (
        UsageError,
        CatalogError,
        ProviderError,
        UnknownSuite,
        StorageError,
        DetachedError,
        ScheduleError,
        BadWorkload,
        BadDataDir,
        SpecError,
        PriceDataError,
    ) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ScheduleFailure as exc:  # the cloud refused part of a create or delete; what was undone is said
        print(f"error: {exc}", file=sys.stderr)
        return 1
