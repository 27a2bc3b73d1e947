"""`schedule`: scheduled runs, the cloud's own scheduler starting a detached run (orchestrate.schedule)."""

from __future__ import annotations

import argparse

from orchestrate.cli.common import Parser, owner_id
from orchestrate.schedule import add_commands, run_command


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("schedule", help="scheduled runs: the cloud's own scheduler starts a detached run")
    add_commands(parser, Parser)
    parser.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
    return run_command(args, owner_id())
