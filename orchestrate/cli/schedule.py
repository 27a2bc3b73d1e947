"""`schedule`: scheduled runs, the cloud's own scheduler starting a detached run (orchestrate.schedule)."""

from __future__ import annotations

import argparse
from pathlib import Path

from orchestrate.cli.common import Parser, owner_id
from orchestrate.cli.request import add_runner_options
from orchestrate.schedule import run_command


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("schedule", help="scheduled runs: the cloud's own scheduler starts a detached run")
    add_commands(parser, Parser)
    parser.set_defaults(handler=command)


def add_commands(parser: argparse.ArgumentParser, parser_class: type[argparse.ArgumentParser]) -> None:
    sub = parser.add_subparsers(dest="schedule_command", required=True, parser_class=parser_class)
    create = sub.add_parser("create", help="schedule a cloud profile's suite: the cloud's scheduler starts it")
    create.add_argument("--profile", required=True, help="a catalog profile of a cloud with a scheduler (aws, gce)")
    create.add_argument("--cron", required=True, help='unix cron, minute hour day month weekday: "0 4 * * 1"')
    create.add_argument("--time-zone", default="UTC", help="IANA time zone of the cron times (default: UTC)")
    create.add_argument("--name", help="the schedule's name (default: <profile>-<suite>)")
    create.add_argument("--suite", default="quick", help="the suite each run runs (default: quick)")
    create.add_argument("--backends", help="comma-separated subset of the suite's backends")
    create.add_argument("--workloads", help="comma-separated subset of the suite's workloads")
    add_runner_options(create)  # the runner's options and the user's files, as `run` takes them
    market = create.add_mutually_exclusive_group()
    market.add_argument("--spot", dest="spot", action="store_true", default=None, help="spot/preemptible machines")
    market.add_argument("--on-demand", dest="spot", action="store_false", help="on-demand machines")
    create.add_argument("--image", required=True, help="the image every run pulls: REGISTRY/NAME:TAG")
    create.add_argument(
        "--image-source", choices=("pull", "present"), default="pull", help="pull it, or it is in the machine image"
    )
    create.add_argument("--bucket", help="s3://B[/P] or gs://B[/P] for the logs (default: the project's own)")
    create.add_argument("--max-lifetime", type=int, default=240, help="minutes after which a machine ends itself")
    create.add_argument("--service-account", help="the account the scheduler launches as (gce: calls instances.insert)")
    create.add_argument(
        "--provider-setting",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="the provider's settings, as for detached runs (gce: the VM's service_account and self_delete_role)",
    )
    create.add_argument("--dry-run", action="store_true", help="print the plan and the monthly cost; create nothing")
    create.add_argument("--logs", type=Path, default=Path("logs"), help="logs to estimate the run time from")
    create.add_argument("--ledger", type=Path, help="ledger with earlier runs to estimate from")
    create.add_argument("--catalog", action="append", default=[], type=Path, metavar="FILE", help="an extra catalog")
    collect = sub.add_parser("collect", help="fetch the logs of a schedule's runs from its bucket into logs/")
    collect.add_argument("name", help="the schedule's name")
    collect.add_argument("--profile", required=True, help="its profile: the runs' platform in logs/")
    collect.add_argument("--bucket", help="the bucket it was created with (default: the project's own)")
    collect.add_argument("--logs", type=Path, default=Path("logs"), help="log root (default: logs)")
    collect.add_argument("--catalog", action="append", default=[], type=Path, metavar="FILE", help="an extra catalog")
    for name, what in (("list", "list the project's schedules"), ("delete", "delete a schedule and its resources")):
        command = sub.add_parser(name, help=what)
        if name == "delete":
            command.add_argument("name", help="the schedule's name (see schedule list)")
        command.add_argument("--provider", help="only this cloud (default: every cloud with a scheduler)")
    sub.add_parser("published", help="the 2018 study's scheduled run: its monthly cost recomputed from its inputs")


def command(args: argparse.Namespace) -> int:
    return run_command(args, owner_id())
