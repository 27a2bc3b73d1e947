"""What a schedule is, as both sides of scheduled runs see it: `orchestrate.schedule` checks and creates one, a
provider's scheduler (`orchestrate.capabilities.Scheduler`) holds it in the cloud and reads it back (`ScheduleInfo`);
`Undo` removes what a create made when a later step fails."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from orchestrate.cron import Cron
from orchestrate.provider import PROJECT_TAG
from orchestrate.registry import load_provider_class
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
    payload: str | None = None  # the URL of its runs' payload archive, which `delete` removes with it

    @property
    def provider(self) -> str:
        return self.profile.provider

    @property
    def zone(self) -> str:
        return self.profile.zones[0]

    @property
    def region(self) -> str:
        """The zone's region, as its provider names regions (`Provider.region_of`)."""
        return load_provider_class(self.provider).region_of(self.zone)

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
        facts |= {"payload": self.payload} if self.payload else {}
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
    payload: str = ""  # the URL of its runs' payload archive (ScheduleSpec.payload)


def description_facts(description: str) -> dict[str, str]:
    """The JSON `ScheduleSpec.description` wrote; {} for a schedule that is not this project's."""
    if not description.startswith(DESCRIPTION_HEAD):
        return {}
    try:
        facts = json.loads(description.removeprefix(DESCRIPTION_HEAD))
    except json.JSONDecodeError:
        return {}
    return {str(k): str(v) for k, v in facts.items()} if isinstance(facts, dict) else {}


@dataclass
class Undo:
    """What a create made so far, each with the step that removes it: run backwards when a later step fails."""

    steps: list[tuple[str, Callable[[], object]]] = field(default_factory=list)

    def add(self, what: str, step: Callable[[], object]) -> None:
        self.steps.append((what, step))

    @property
    def created(self) -> list[str]:
        return [what for what, _ in self.steps]

    def rollback(self) -> list[str]:
        """Remove everything, last first; returns what could not be removed (each step is tried)."""
        left = []
        for what, step in reversed(self.steps):
            try:
                step()
            except Exception as exc:  # broad on purpose: every step is tried, the rest still undone
                left.append(f"{what} ({exc})")
        return left


@contextlib.contextmanager
def undoing(undo: Undo) -> Iterator[Undo]:
    try:
        yield undo
    except Exception as exc:
        left = undo.rollback()
        undone = f"; undone: {', '.join(undo.created)}" if undo.created and not left else ""
        kept = f"; NOT undone (delete by hand or run `schedule delete`): {', '.join(left)}" if left else ""
        raise ScheduleFailure(f"{exc}{undone}{kept}") from exc
