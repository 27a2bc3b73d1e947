"""`cost`: the estimated cost per run and per profile, from the ledger."""

from __future__ import annotations

import argparse

from orchestrate.cli.common import ledger_option
from records.ledger import TERMINATED_BY_EXPIRY, Ledger, RunRecord, default_ledger_path


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("cost", help="estimated cost per run and per profile, from the ledger")
    ledger_option(parser)
    parser.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
    runs = list(Ledger(args.ledger).runs().values())
    if not runs:
        print(f"no runs in {args.ledger or default_ledger_path()}")
        return 0
    print(f"{'run':<26} {'profile':<20} {'suite':<12} {'status':<12} {'billed s':>9} {'cost $':>9}")
    per_profile: dict[str, list[float]] = {}
    for run in runs:
        cost = "-" if run.estimated_cost_usd is None else f"{run.estimated_cost_usd:.4f}"
        row = f"{run.run_id:<26} {run.profile:<20} {run.suite:<12} {run.status:<12}"
        print(f"{row} {run.billed_seconds:>9} {cost:>9}{_billing_note(run)}")
        if run.estimated_cost_usd is not None:
            per_profile.setdefault(run.profile, []).append(run.estimated_cost_usd)
    if per_profile:
        print(f"\n{'profile':<20} {'runs':>5} {'total $':>10}")
        for name, costs in sorted(per_profile.items()):
            print(f"{name:<20} {len(costs):>5} {sum(costs):>10.4f}")
    return 0


def _billing_note(run: RunRecord) -> str:
    """How a machine that ended on its own was billed, where one did."""
    ways = {i.terminated_by for i in run.instances if i.terminated_by}
    if TERMINATED_BY_EXPIRY in ways:
        return "  (a machine ended itself: billed to its expiry, an upper bound)"
    return "  (a machine ended itself: billed to its provider's end time)" if ways else ""
