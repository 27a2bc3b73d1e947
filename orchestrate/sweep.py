"""The sweep: find what this project left behind that nobody is tearing down, and delete it.

`plan_sweep` decides from facts only (the instances' tags, the ledger, the time, which orchestrator processes
are alive here), so every rule is tested without a cloud. `run_sweep` gathers those facts from each provider
that can leave leftovers (machines, and per-run resources such as key pairs, security groups and local key
files, even with no machine left) and has usable credentials, acts on the decision, and records what it deleted
in the ledger. Each provider is swept in isolation: one that fails is one line of the report.
Dead runs on persistent hosts (ssh, local) are recovered by `orchestrate.recover`.

The ledger is settled first: unreadable lines go to `<ledger>.torn` (`settle_ledger`), and a dead run whose last
line was lost gets back the final state its orchestrator wrote beside its logs (`orchestrate/run.json`). A machine
that ended without this project (its max lifetime, a power-off) is billed up to the time the provider recorded
(`Provider.ended_at`), marked `terminated_by: provider` in the ledger.

Rules, in order, for each instance carrying the project tag:
1. past its `expiry` tag: delete (it should have ended itself; whoever launched it).
2. launched by another owner (`owner` tag): keep; their sweep decides.
3. a detached run's machine (tag `mode=detached`, or the ledger says `detached`) whose run the ledger does not
   say finished: keep; it works with no orchestrator (and may have been launched by none: a scheduled run) and
   deletes itself, and rule 1 ends it if it does not.
4. its run id is not in the ledger: delete (every attached run is in the ledger before it launches anything).
5. the ledger says the run finished: delete (teardown failed or was cut short).
6. the run's orchestrator process, on this host, is gone: delete.
7. otherwise: keep (a run in progress).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from orchestrate.accounting import close_accounts, machine_record
from orchestrate.provider import Capability, CredentialsError, Instance, Provider, ProviderError
from records.catalog import Profile
from records.ledger import (
    STATUS_COMPLETE,
    STATUS_DETACHED,
    STATUS_FAILED,
    TERMINATED_BY_EXPIRY,
    TERMINATED_BY_PROVIDER,
    InstanceRecord,
    Ledger,
    LedgerError,
    RunRecord,
)


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
    detached = tags.get("mode") == "detached" or (run is not None and run.status == STATUS_DETACHED)
    if detached and (run is None or not run.final):
        until = f"until its expiry in {int(expiry - now)} s" if expiry is not None else "(no expiry tag)"
        return SweepDecision(instance, False, f"detached run {run_id} works on its own {until}")
    if run is None:
        return SweepDecision(instance, True, f"run {run_id or '(untagged)'} is not in the ledger")
    if run.final:
        return SweepDecision(instance, True, f"run {run_id} is {run.status}")
    if not process_alive(run):
        return SweepDecision(instance, True, f"run {run_id}'s orchestrator (pid {run.pid}) is gone")
    return SweepDecision(instance, False, f"run {run_id} is in progress (pid {run.pid})")


def why(exc: BaseException) -> str:
    """An exception in one line: a provider's own message as it is, anything else (a bug) with its type, since
    `KeyError: 'x'` says what `'x'` alone does not."""
    return str(exc) if isinstance(exc, ProviderError) else f"{type(exc).__name__}: {exc}"


def _as_float(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def local_process_alive(this_host: str) -> Callable[[RunRecord], bool]:
    """A run's orchestrator counts as alive if it ran on another host (we cannot tell) or its pid exists."""

    def alive(run: RunRecord) -> bool:
        if run.pid <= 0:
            return False  # no orchestrator process watches it (a detached run once launched); kill(0) is our group
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
    deleted: list[tuple[str, str]] = field(default_factory=list)  # (description, reason)
    kept: list[tuple[str, str]] = field(default_factory=list)
    skipped_providers: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    recovered: list[tuple[str, str]] = field(default_factory=list)  # (run id, what was done)
    set_aside: list[str] = field(default_factory=list)  # ledger lines moved to the quarantine file


@dataclass(frozen=True)
class SweepContext:
    """What every provider's sweep shares: the ledger (read and written), who and where we are, the time."""

    ledger: Ledger
    owner: str
    this_host: str
    dry_run: bool
    now: float
    # catalog lookup for billing: (profile name, a batch job's nodes per task) -> the profile; None when unknown
    profile_of: Callable[[str, int], Profile | None]
    # Before a dead run's machine is deleted: pull what its containers wrote (orchestrate.recover); what was done.
    salvage: Callable[[RunRecord], str] | None = None
    # A dead run whose machine is gone: the logs the machine saved before it ended itself (orchestrate.keepsafe),
    # unpacked into the run's logs; what was done, or None when it saved none.
    recover_saved: Callable[[RunRecord], str | None] | None = None
    # A dry run: runs the sweep would have finalised before looking at the providers, as it would leave them.
    assumed: Mapping[str, RunRecord] = field(default_factory=dict)

    def runs(self) -> dict[str, RunRecord]:
        return {**self.ledger.runs(), **self.assumed}

    @property
    def alive(self) -> Callable[[RunRecord], bool]:
        return local_process_alive(self.this_host)


def run_sweep(
    providers: Iterable[Provider],
    context: SweepContext,
    report: SweepReport | None = None,
) -> SweepReport:
    """Sweep each provider in isolation: whatever one raises is reported in one line and the next goes on."""
    report = report or SweepReport()
    for provider in providers:
        try:
            _sweep_provider(provider, context, report)
        except Exception as exc:  # broad on purpose: a broken plug-in must not stop the sweep of the others
            report.errors.append(f"{provider.name}: sweep failed: {why(exc)}")
    return report


def _sweep_provider(provider: Provider, context: SweepContext, report: SweepReport) -> None:
    try:
        provider.check_credentials()
    except CredentialsError as exc:
        report.skipped_providers.append(f"{provider.name}: {exc}")
        return
    except ProviderError as exc:
        report.errors.append(f"{provider.name}: {exc}")
        return
    runs = context.runs()
    try:
        instances = provider.list_instances()
    except ProviderError as exc:
        report.errors.append(f"{provider.name}: could not list instances: {exc}")
        return
    decisions = plan_sweep(instances, runs, context.now, context.owner, context.alive)
    kept_runs = {d.instance.tags.get("run-id") for d in decisions if not d.delete}
    dead = _act(provider, decisions, context, report)
    _bill_machines_that_ended(provider, context, report, {i.instance_id for i in instances})
    runs = context.runs()
    for run_id, tags in provider.leftover_runs().items():
        if run_id in kept_runs or run_id in dead:
            continue
        run = runs.get(run_id)
        if run is not None and run.provider != provider.name:
            continue  # e.g. a local key file of another provider's run: that provider's sweep decides
        resources = Instance(
            provider.name, f"resources of run {run_id}", None, None, tags=_tags_of(run_id, tags, context)
        )
        decision = _decide(resources, runs, context.now, context.owner, context.alive)
        if decision.delete:
            dead[run_id] = decision.reason
        else:
            report.kept.append((f"{provider.name} {resources.instance_id}", decision.reason))
    for run_id, reason in sorted(dead.items()):
        if context.dry_run:
            report.deleted.append((f"{provider.name} resources of run {run_id}", reason))
            continue
        try:
            provider.release_run(run_id)
        except Exception as exc:  # broad on purpose: one run's failure must not stop the others' release
            report.errors.append(f"could not release {provider.name} resources of run {run_id}: {why(exc)}")
            continue
        report.deleted.append((f"{provider.name} resources of run {run_id}", reason))
        billable = provider.has(Capability.BILLABLE)
        latest = context.ledger.runs().get(run_id)  # the termination of its machine may have been recorded since
        if latest is not None and not latest.final:
            _recover_saved(latest, context, report)  # its machine ended itself: what it saved first
        finalise(latest, context, f"its leftovers were deleted by the sweep ({reason})", billable)
    _finalise_dead_runs(provider, context, report, kept_runs | set(dead))


def _finalise_dead_runs(provider: Provider, context: SweepContext, report: SweepReport, kept: set[str | None]) -> None:
    """Runs of this provider whose orchestrator died with nothing of them left at the provider (killed before the
    launch, or after a teardown whose last ledger line was lost): final, so that nothing shows them running."""
    for run in context.runs().values():
        if run.provider != provider.name or run.final or run.status == STATUS_DETACHED or run.run_id in kept:
            continue
        if run.owner != context.owner or context.alive(run):
            continue
        if context.dry_run:
            report.recovered.append((run.run_id, f"would finalise it: nothing of it is left at {provider.name}"))
            continue
        _recover_saved(run, context, report)  # a machine that ended itself may have saved its logs first
        finalise(run, context, f"nothing of it was left at {provider.name}", provider.has(Capability.BILLABLE))
        report.recovered.append((run.run_id, f"finalised: nothing of it was left at {provider.name}"))


def _tags_of(run_id: str, tags: dict[str, str], context: SweepContext) -> dict[str, str]:
    """Untagged leftovers (local key files) are this user's, in this user's state directory."""
    return {"owner": context.owner, **tags, "run-id": run_id}


def _act(
    provider: Provider, decisions: list[SweepDecision], context: SweepContext, report: SweepReport
) -> dict[str, str]:
    """Terminate what the decisions delete; the run ids whose per-run resources can go, with the reason."""
    kept_runs = {d.instance.tags.get("run-id") for d in decisions if not d.delete}
    released: dict[str, str] = {}
    for decision in decisions:
        instance = decision.instance
        where = f" in {instance.zone}" if instance.zone else ""
        label = f"{provider.name} {instance.instance_id}{where} (run {instance.tags.get('run-id', '?')})"
        if not decision.delete:
            report.kept.append((label, decision.reason))
            continue
        if not context.dry_run:
            _salvage(instance, context, report)
            ended = _ended_at(provider, instance, report)  # before terminate: a deleted machine's time is gone
            try:
                provider.terminate(instance)
            except Exception as exc:  # broad on purpose: one machine's failure must not stop the others' deletion
                report.errors.append(f"could not terminate {label}: {why(exc)}")
                continue
            _record_termination(instance, context, provider.has(Capability.BILLABLE), ended)
        report.deleted.append((label, decision.reason))
        run_id = instance.tags.get("run-id")
        if run_id and run_id not in kept_runs:
            released[run_id] = decision.reason
    return released


def _salvage(instance: Instance, context: SweepContext, report: SweepReport) -> None:
    """A dead run's machine still holds the epochs written since the last periodic pull: fetch them first."""
    run = context.ledger.runs().get(instance.tags.get("run-id") or "")
    if context.salvage is None or run is None or run.final or not run.host:
        return
    try:
        report.recovered.append((run.run_id, context.salvage(run)))
    except Exception as exc:  # broad on purpose: the machine is deleted whether or not its logs could be read
        report.recovered.append((run.run_id, f"its logs could not be pulled from {instance.instance_id}: {why(exc)}"))
        if not _recover_saved(run, context, report):
            return
    context.ledger.append(run)  # the items it settled


def _recover_saved(run: RunRecord, context: SweepContext, report: SweepReport) -> bool:
    """Whether the logs the run's machine saved before it ended itself were unpacked into the run's logs."""
    if context.recover_saved is None or context.dry_run:
        return False
    try:
        done = context.recover_saved(run)
    except Exception as exc:  # broad on purpose: one run's bucket must not stop the sweep
        report.errors.append(f"could not fetch the logs run {run.run_id}'s machine saved: {why(exc)}")
        return False
    if done is not None:
        report.recovered.append((run.run_id, done))
    return done is not None


def _ended_at(provider: Provider, instance: Instance, report: SweepReport) -> float | None:
    try:
        return provider.ended_at(instance)
    except Exception as exc:  # broad on purpose: a provider's failure is one line, and the sweep goes on
        report.errors.append(f"{provider.name}: could not read when {instance.instance_id} ended: "
                             f"{why(exc)}")  # fmt: skip
        return None


def _bill_machines_that_ended(provider: Provider, context: SweepContext, report: SweepReport, live: set[str]) -> None:
    """Machines of finished or dead runs that the ledger never saw end (they ended themselves, or their
    orchestrator died first): billed up to the time the provider recorded, else, for one no longer listed and
    past its expiry, up to its expiry (the most it can have run)."""
    for run in context.ledger.runs().values():
        unended = [i for i in run.instances if i.terminated_at is None and i.provider == provider.name]
        watched = run.status == STATUS_DETACHED or (not run.final and context.alive(run))
        if not unended or run.owner != context.owner or watched:
            continue
        ended = []
        teardown = _teardown_started_at(run)
        by_teardown = False
        for record in unended:
            if context.dry_run and record.instance_id in live:
                continue  # still there, as a dry run deletes nothing: the deletion it would bill is _act's
            at = _ended_at(provider, Instance(provider.name, record.instance_id, record.zone, None), report)
            if at is not None and teardown is not None and at >= int(teardown):  # providers keep whole seconds
                # it ended after its orchestrator began the teardown that terminates it: this project ended it
                record.terminated_at, record.terminated_by, by_teardown = at, None, True
                ended.append(f"{record.instance_id} to {_utc(at)}, when {provider.name} recorded its end")
            elif at is not None:
                record.terminated_at, record.terminated_by = at, TERMINATED_BY_PROVIDER
                ended.append(f"{record.instance_id} to {_utc(at)}, when {provider.name} recorded its end")
            elif _expired_and_gone(record, live, context.now):
                record.terminated_at, record.terminated_by = record.expires_at, TERMINATED_BY_EXPIRY
                ended.append(f"{record.instance_id} to its expiry, {_utc(record.expires_at or 0.0)} (an upper bound: "
                             f"{provider.name} kept no end time)")  # fmt: skip
        if not ended:
            continue
        what = f"billed {'; '.join(ended)}"
        report.recovered.append((run.run_id, ("would have " if context.dry_run else "") + what))
        _recover_saved(run, context, report)  # its machine ended itself: what it saved first
        if not context.dry_run:
            how = "its teardown had ended its machine" if by_teardown else "its machine ended on its own"
            finalise(run, context, f"{how} ({what})", provider.has(Capability.BILLABLE), True)


def _teardown_started_at(run: RunRecord) -> float | None:
    """When the run's teardown began, if its orchestrator died in it (the stage is open in the ledger)."""
    open_stages = [s.started_at for s in run.stages if s.name == "teardown" and s.ended_at is None]
    return open_stages[-1] if open_stages else None


def _expired_and_gone(record: InstanceRecord, live: set[str], now: float) -> bool:
    return record.instance_id not in live and record.expires_at is not None and now > record.expires_at


def _utc(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _record_termination(instance: Instance, context: SweepContext, billable: bool, ended: float | None) -> None:
    """The ledger learns that the sweep ended this machine, so `cost` bills it and stops showing it running;
    up to when the machine ended itself, where the provider says it did."""
    run = context.ledger.runs().get(instance.tags.get("run-id") or "")
    if run is None:
        return
    records = [r for r in run.instances if r.instance_id == instance.instance_id]
    if not records:
        records = [machine_record(instance, run.started_at)]
        run.instances.extend(records)
    for record in records:
        if record.terminated_at is None and ended is not None:
            record.terminated_by = TERMINATED_BY_PROVIDER
        record.terminated_at = record.terminated_at or ended or context.now
    finalise(run, context, f"the sweep terminated {instance.instance_id}", billable, force=True)


def finalise(run: RunRecord | None, context: SweepContext, why: str, billable: bool, force: bool = False) -> None:
    """Close a run the sweep cleaned up after: final status, bills, one new ledger line."""
    if run is None or (run.final and not force):
        return
    if not run.final:
        for item in run.items:
            if item.status == "running":
                item.status, item.ended_at = "interrupted", context.now
        run.status = _dead_run_status(run)
        run.message = f"orchestrator (pid {run.pid}) gone; {why}" + (f"; was: {run.message}" if run.message else "")
    run.recovered_by = "sweep"
    run.ended_at = run.ended_at or context.now
    close_accounts(run, context.profile_of(run.profile, run.nodes), billable)
    context.ledger.append(run)


def _dead_run_status(run: RunRecord) -> str:
    """Complete when every planned container run completed before the orchestrator died (in its teardown, or
    between its last item and its last ledger line); failed otherwise, and where the plan's size is unknown."""
    items = run.latest_items()
    done = run.planned_items is not None and len(items) == run.planned_items
    return STATUS_COMPLETE if done and all(i.status == STATUS_COMPLETE for i in items) else STATUS_FAILED


def settle_ledger(context: SweepContext, report: SweepReport) -> None:
    """Set the ledger's unreadable lines aside, then give each dead run whose final state was lost (its last line
    torn) the final record its orchestrator wrote beside its logs."""
    if context.dry_run:
        torn = [f"would set aside line {t.describe()}" for t in context.ledger.torn_lines()]
    else:
        moved = context.ledger.quarantine()
        torn = [f"line {t.describe()} moved to {context.ledger.quarantine_path}" for t in moved]
    report.set_aside.extend(torn)
    for run in context.ledger.runs().values():
        if run.final or run.owner != context.owner or context.alive(run):
            continue
        summary = _final_summary(run)
        if summary is None:
            continue
        if not context.dry_run:
            context.ledger.append(summary)
        verb = "would restore" if context.dry_run else "restored"
        report.recovered.append((run.run_id, f"{verb} its final state ({summary.status}) from {run.logs_dir}/"
                                             "orchestrate/run.json: its last ledger line was lost"))  # fmt: skip


def _final_summary(run: RunRecord) -> RunRecord | None:
    """The run's own final record (`run.json`, written after its last ledger line), when there is one."""
    if not run.logs_dir:
        return None
    try:
        summary = RunRecord.from_json(json.loads((Path(run.logs_dir) / "orchestrate" / "run.json").read_text()))
    except (OSError, ValueError, LedgerError):
        return None
    return summary if summary.run_id == run.run_id and summary.final else None
