"""What each machine session (one run id on one platform) was billed: from the orchestrator's ledger where it
recorded the run, else estimated from the logged training time under the platform's billing rule.

Per-workload costs in the results come from each workload's own training time. A session's bill is larger: it
also pays for boot, setup, image pulls and data loading, which only the ledger knows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from records.ledger import LedgerError, RunRecord, default_ledger_path, read_runs
from records.loading import NO_RUN_ID, Run
from report.costs import Pricing, Unpriced
from report.tables import PricingLookup

MACHINE_COLUMNS = ["platform", "run_id", "runs", "training_s", "billed_s", "overhead_s", "cost_usd", "source"]
ESTIMATE = "estimate: billing rule applied to the logged training time (boot, setup and data loading not seen)"


def read_ledger(path: Path | None) -> tuple[dict[str, RunRecord], str | None]:
    """The ledger's runs by run id, or none and why (normal for runs made without the orchestrator)."""
    where = path or default_ledger_path()
    if not where.exists():
        return {}, f"no ledger at {where}"
    try:
        return read_runs(where), None
    except (LedgerError, OSError) as exc:
        return {}, f"ledger unreadable: {exc}"


def machine_table(runs: Sequence[Run], pricing: PricingLookup, ledger: Mapping[str, RunRecord]) -> pd.DataFrame:
    sessions: dict[tuple[str, str], list[Run]] = defaultdict(list)
    for run in runs:
        if run.run_id != NO_RUN_ID:
            sessions[(run.config.platform, run.run_id)].append(run)
    rows = [
        _session_row(platform, run_id, members, pricing(platform), ledger.get(run_id))
        for (platform, run_id), members in sorted(sessions.items())
    ]
    return pd.DataFrame(rows, columns=MACHINE_COLUMNS)


def _session_row(
    platform: str, run_id: str, runs: list[Run], pricing: Pricing | Unpriced, record: RunRecord | None
) -> dict[str, object]:
    # Partial runs count here: the machine was paid for while they ran.
    training = sum(r.total_s for r in runs)
    row: dict[str, object] = {
        "platform": platform,
        "run_id": run_id,
        "runs": len(runs),
        "training_s": training,
    }
    if record is not None and record.platform == platform and record.billed_seconds:
        row |= {
            "billed_s": float(record.billed_seconds),
            "overhead_s": record.billed_seconds - training,
            "cost_usd": record.estimated_cost_usd,
            "source": f"ledger (run {record.status}, {'spot' if record.spot else 'on-demand'})",
        }
    elif isinstance(pricing, Pricing):
        billed = pricing.billed_seconds(training)
        row |= {
            "billed_s": billed,
            "cost_usd": pricing.cost_usd(training),
            "source": f"{ESTIMATE}; {pricing.rule}",
        }
    else:
        row["source"] = f"{ESTIMATE}; {pricing.reason}"
    return row
