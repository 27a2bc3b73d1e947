"""`run`: its options make one typed request (orchestrate.cli.request), and each mode has its module."""

from __future__ import annotations

import argparse

from orchestrate.cli import run_attached, run_detached, run_fanout
from orchestrate.cli.request import AttachedRun, DetachedRun, Fanout, add_run_options, request_of


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("run", help="run a suite on a profile: launch, run, pull logs, tear down")
    add_run_options(parser)
    parser.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
    match request_of(args):
        case Fanout() as fanout:
            return run_fanout.run(fanout)
        case DetachedRun() as detached:
            return run_detached.run(detached)
        case AttachedRun() as attached:
            return run_attached.run(attached)
