"""`run --profile P`: an attached run, watched from the launch to the teardown."""

from __future__ import annotations

import signal
import sys
import time

from orchestrate.batch import lifecycle_for
from orchestrate.cli.common import UsageError, silence_stdout
from orchestrate.cli.planning import (
    checked_plan,
    make_provider,
    print_estimate,
    profile_to_run,
)
from orchestrate.cli.request import AttachedRun
from orchestrate.lifecycle import Interrupted, Outcome, raise_interrupted
from orchestrate.progress import make_reporter
from records.ledger import STATUS_COMPLETE, Ledger, RunRecord

ORCHESTRATION_STAGES = ("launch", "connect", "prepare", "image", "pull_logs", "teardown")


def run(request: AttachedRun) -> int:
    options = request.options
    started = time.time()
    profile = profile_to_run(request.profile, options)
    provider = make_provider(profile, options)
    plan, status = checked_plan(options, profile, provider, started)
    if options.dry_run:
        print_estimate(plan, options.owned)
        return 0
    if status != "ok":
        raise UsageError(status)
    reporter = make_reporter(force_plain=options.plain)
    previous = {sig: signal.signal(sig, raise_interrupted) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        outcome = lifecycle_for(plan, provider, Ledger(options.ledger), reporter).run()
    except Interrupted:  # a signal between the run's last step and its teardown guard: teardown still ran
        print(f"\nRun {plan.run_id}: interrupted; see the ledger for what was torn down", file=sys.stderr)
        return 130
    finally:
        reporter.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    try:
        _print_outcome(outcome)
    except BrokenPipeError:  # nobody reads the summary; the run's exit status still tells its outcome
        silence_stdout()
    return outcome.exit_code


def _print_outcome(outcome: Outcome) -> None:
    record = outcome.record
    print(f"\nRun {record.run_id}: {record.status}: {record.message}")
    items = record.latest_items()
    finished = [i for i in items if i.status == STATUS_COMPLETE]
    print(f"  logs        {record.logs_dir} ({len(finished)} of {len(items)} runs complete)")
    if outcome.torn_down:
        print("  torn down   " + "\n              ".join(outcome.torn_down))
    for failure in outcome.teardown_failures:
        print(f"  TEARDOWN PROBLEM: {failure}  -> run `python -m orchestrate sweep`")
    if record.estimated_cost_usd is not None:
        print(f"  cost        ${record.estimated_cost_usd:.4f} estimated ({record.billed_seconds} s billed)")
    stages = stage_totals(record)
    overhead = sum(stages.get(name, 0.0) for name in ORCHESTRATION_STAGES)
    wall = (record.ended_at or time.time()) - record.started_at
    print(
        f"  time        {wall:.1f} s wall, {overhead:.1f} s orchestration ("
        + ", ".join(f"{n} {stages[n]:.1f}" for n in ORCHESTRATION_STAGES if n in stages)
        + ")"
    )


def stage_totals(record: RunRecord) -> dict[str, float]:
    """Seconds spent per stage name, summed over the run (e.g. every log pull)."""
    totals: dict[str, float] = {}
    for stage in record.stages:
        if stage.seconds is not None:
            totals[stage.name] = totals.get(stage.name, 0.0) + stage.seconds
    return totals
