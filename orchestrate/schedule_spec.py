"""What a schedule is, as both sides of scheduled runs see it: `orchestrate.schedule` checks and creates one,
`orchestrate.schedulers` holds it in a cloud's scheduler and reads it back (`ScheduleInfo`)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from orchestrate.cron import Cron
from orchestrate.provider import PROJECT_TAG
from records.catalog import Profile

RESOURCE_PREFIX = "kcb-schedule-"
DESCRIPTION_HEAD = "keras-cloud-bench schedule "  # then JSON: what `list` shows


class ScheduleFailure(RuntimeError):
    """The cloud refused part of a create or delete; the message says what, and what was undone."""


def resource_name(name: str) -> str:
    return f"{RESOURCE_PREFIX}{name}"


@dataclass(frozen=True)
class ScheduleSpec:
    """A schedule, checked: what to run, where, and when."""

    name: str
    profile: Profile
    cron: Cron
    time_zone: str
    suite: str
    backends: tuple[str, ...]
    workloads: tuple[str, ...]
    spot: bool
    max_lifetime_s: int
    owner: str  # who created it: user@host

    @property
    def provider(self) -> str:
        return self.profile.provider

    @property
    def zone(self) -> str:
        return self.profile.zones[0]

    @property
    def region(self) -> str:
        """AWS: the zone less its letter (us-east-1a); GCE: the zone less its suffix (us-central1-a)."""
        return self.zone[:-1] if self.provider == "aws" else self.zone.rsplit("-", 1)[0]

    @property
    def items(self) -> list[tuple[str, str]]:
        return [(w, b) for b in self.backends for w in self.workloads]

    def tags(self) -> dict[str, str]:
        """On the scheduled machines and every resource of the schedule. `owner` names the schedule, not the
        user: a run the scheduler started is in nobody's ledger, so the sweep must leave it to end itself."""
        return {
            "project": PROJECT_TAG,
            "schedule": self.name,
            "profile": self.profile.name,
            "suite": self.suite,
            "owner": f"schedule:{self.name}",
            "created-by": self.owner,
        }

    def description(self) -> str:
        facts = {"profile": self.profile.name, "suite": self.suite, "cron": self.cron.text, "owner": self.owner}
        return DESCRIPTION_HEAD + json.dumps(facts, sort_keys=True)


@dataclass(frozen=True)
class ScheduleInfo:
    """A schedule as the cloud holds it (what `list` prints)."""

    name: str
    provider: str
    where: str  # region (AWS) or location (Cloud Scheduler)
    cron: str  # the unix-cron form it was created with
    expression: str  # what the cloud holds: cron(...) on AWS, the unix-cron on Cloud Scheduler
    time_zone: str
    state: str
    profile: str
    suite: str
    last_attempt: str = ""  # Cloud Scheduler's last attempt and its status, where known


def description_facts(description: str) -> dict[str, str]:
    """The JSON `ScheduleSpec.description` wrote; {} for a schedule that is not this project's."""
    if not description.startswith(DESCRIPTION_HEAD):
        return {}
    try:
        facts = json.loads(description.removeprefix(DESCRIPTION_HEAD))
    except json.JSONDecodeError:
        return {}
    return {str(k): str(v) for k, v in facts.items()} if isinstance(facts, dict) else {}
