"""`profiles`: the catalog's profiles, with their prices and retirements."""

from __future__ import annotations

import argparse

from orchestrate.cli.common import catalog_option
from records.catalog import load_catalogs


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("profiles", help="list the catalog's profiles")
    parser.add_argument("--names", action="store_true", help="names only, one a line")
    catalog_option(parser)
    parser.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
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
