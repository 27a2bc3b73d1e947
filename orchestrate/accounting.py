"""A run's machines: launched zone by zone with the run's tags, recorded in the ledger, and billed by the catalog's
billing rules (what the ledger and `cost` show).

Only machines known to be terminated are billed: a machine whose termination failed may still be running, so
its bill is unknown (None) until the sweep deletes it and records when.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from orchestrate.provider import PROJECT_TAG, CapacityError, Instance, LaunchRequest, Provider
from records.catalog import Profile
from records.ledger import InstanceRecord, RunRecord


def run_tags(run_id: str, owner: str, profile: str, max_lifetime_s: int, **more: str) -> dict[str, str]:
    """The tags every launched resource of a run carries: the sweep finds what a killed run left by them."""
    expiry = str(int(time.time() + max_lifetime_s))
    return {"project": PROJECT_TAG, "run-id": run_id, "owner": owner, "profile": profile, "expiry": expiry, **more}


def launch_in_zones(
    provider: Provider, request: LaunchRequest, note: Callable[[str], None]
) -> tuple[Instance, float] | list[str]:
    """The machine in the first of the profile's zones with capacity, and when it was asked for; else why each
    zone had none (a zone's CapacityError moves on to the next)."""
    failures = []
    for zone in request.profile.zones or (None,):
        asked_at = time.time()
        try:
            return provider.launch(replace(request, zone=zone)), asked_at
        except CapacityError as exc:
            failures.append(f"{zone}: {exc}")
            note(f"no capacity in {zone}: {exc}; trying the next zone")
    return failures


def machine_record(instance: Instance, launched_at: float, **known: Any) -> InstanceRecord:
    """The ledger's record of a machine a provider returned: launched when the provider says, else `launched_at`
    (when it was asked for, or found); `known`: what else is known of it (expiry, termination)."""
    return InstanceRecord(
        provider=instance.provider,
        instance_id=instance.instance_id,
        zone=instance.zone,
        spot=instance.spot,
        launched_at=instance.launched_at or launched_at,
        **known,
    )


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
