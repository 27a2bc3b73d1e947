"""Cost accounting of a run's machines, from the catalog's billing rules: what the ledger and `cost` show.

Only machines known to be terminated are billed: a machine whose termination failed may still be running, so
its bill is unknown (None) until the sweep deletes it and records when.
"""

from __future__ import annotations

import time

from records.catalog import Profile
from records.ledger import InstanceRecord, RunRecord


def bill_instance(instance: InstanceRecord, profile: Profile) -> None:
    """Billed seconds and cost of one terminated machine (billing increment and minimum applied)."""
    if instance.terminated_at is None:
        instance.billed_seconds = instance.cost_usd = None
        return
    seconds = instance.terminated_at - instance.launched_at
    instance.billed_seconds = profile.billed_seconds(seconds)
    instance.cost_usd = profile.cost_usd(seconds, spot=instance.spot)


def close_accounts(record: RunRecord, profile: Profile | None, billable: bool) -> None:
    """Bill every machine of the run and total them; the run's cost stays None when any bill is unknown."""
    record.ended_at = record.ended_at or time.time()
    if not billable or profile is None:
        record.billed_seconds, record.estimated_cost_usd = 0, None
        return
    for instance in record.instances:
        bill_instance(instance, profile)
    record.billed_seconds = sum(i.billed_seconds or 0 for i in record.instances)
    costs = [i.cost_usd for i in record.instances]
    record.estimated_cost_usd = None if any(c is None for c in costs) else sum(c for c in costs if c is not None)
