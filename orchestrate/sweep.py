"""The sweep: find machines this project launched that nobody is tearing down, and delete them.

`plan_sweep` decides from facts only (the instances' tags, the ledger, the time, which orchestrator processes
are alive here), so every rule is tested without a cloud. `run_sweep` gathers those facts from each provider
that creates machines and has usable credentials, and acts on the decision.

Rules, in order, for each instance carrying the project tag:
1. past its `expiry` tag: delete (it should have ended itself; whoever launched it).
2. launched by another owner (`owner` tag): keep; their sweep decides.
3. its run id is not in the ledger: delete (every run is in the ledger before it launches anything).
4. the ledger says the run finished: delete (teardown failed or was cut short).
5. the run's orchestrator process, on this host, is gone: delete.
6. otherwise: keep (a run in progress).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from orchestrate.ledger import RunRecord
from orchestrate.provider import CredentialsError, Instance, Provider, ProviderError


@dataclass(frozen=True)
class SweepDecision:
    instance: Instance
    delete: bool
    reason: str


def plan_sweep(
    instances: Iterable[Instance],
    runs: Mapping[str, RunRecord],
    now: float,
    owner: str,
    process_alive: Callable[[RunRecord], bool],
) -> list[SweepDecision]:
    return [_decide(instance, runs, now, owner, process_alive) for instance in instances]


def _decide(
    instance: Instance,
    runs: Mapping[str, RunRecord],
    now: float,
    owner: str,
    process_alive: Callable[[RunRecord], bool],
) -> SweepDecision:
    tags = instance.tags
    expiry = _as_float(tags.get("expiry"))
    if expiry is not None and now > expiry:
        return SweepDecision(instance, True, f"expired {int(now - expiry)} s ago")
    if tags.get("owner") != owner:
        return SweepDecision(instance, False, f"launched by {tags.get('owner') or 'an unknown owner'}")
    run_id = tags.get("run-id")
    run = runs.get(run_id or "")
    if run is None:
        return SweepDecision(instance, True, f"run {run_id or '(untagged)'} is not in the ledger")
    if run.final:
        return SweepDecision(instance, True, f"run {run_id} is {run.status}")
    if not process_alive(run):
        return SweepDecision(instance, True, f"run {run_id}'s orchestrator (pid {run.pid}) is gone")
    return SweepDecision(instance, False, f"run {run_id} is in progress (pid {run.pid})")


def _as_float(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def local_process_alive(this_host: str) -> Callable[[RunRecord], bool]:
    """A run's orchestrator counts as alive if it ran on another host (we cannot tell) or its pid exists."""

    def alive(run: RunRecord) -> bool:
        if run.owner.rpartition("@")[2] != this_host:
            return True
        try:
            os.kill(run.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # exists, owned by someone else
        return True

    return alive


@dataclass
class SweepReport:
    deleted: list[tuple[str, str]]  # (description, reason)
    kept: list[tuple[str, str]]
    skipped_providers: list[str]
    errors: list[str]


def run_sweep(
    providers: Iterable[Provider],
    runs: Mapping[str, RunRecord],
    owner: str,
    this_host: str,
    dry_run: bool,
    now: float | None = None,
) -> SweepReport:
    report = SweepReport([], [], [], [])
    alive = local_process_alive(this_host)
    for provider in providers:
        if not provider.creates_machines:
            continue
        try:
            provider.check_credentials()
            instances = provider.list_instances()
        except CredentialsError as exc:
            report.skipped_providers.append(f"{provider.name}: {exc}")
            continue
        except ProviderError as exc:
            report.errors.append(f"{provider.name}: could not list instances: {exc}")
            continue
        decisions = plan_sweep(instances, runs, now if now is not None else time.time(), owner, alive)
        released = _act(provider, decisions, dry_run, report)
        for run_id in sorted(released):
            _release(provider, run_id, dry_run, report)
    return report


def _act(provider: Provider, decisions: list[SweepDecision], dry_run: bool, report: SweepReport) -> set[str]:
    kept_runs = {d.instance.tags.get("run-id") for d in decisions if not d.delete}
    released: set[str] = set()
    for decision in decisions:
        instance = decision.instance
        where = f" in {instance.zone}" if instance.zone else ""
        label = f"{provider.name} {instance.instance_id}{where} (run {instance.tags.get('run-id', '?')})"
        if not decision.delete:
            report.kept.append((label, decision.reason))
            continue
        if not dry_run:
            try:
                provider.terminate(instance)
            except ProviderError as exc:
                report.errors.append(f"could not terminate {label}: {exc}")
                continue
        report.deleted.append((label, decision.reason))
        run_id = instance.tags.get("run-id")
        if run_id and run_id not in kept_runs:
            released.add(run_id)
    return released


def _release(provider: Provider, run_id: str, dry_run: bool, report: SweepReport) -> None:
    if dry_run:
        return
    try:
        provider.release_run(run_id)
    except ProviderError as exc:
        report.errors.append(f"could not release {provider.name} resources of run {run_id}: {exc}")
