"""One run on a batch scheduler (Capability.BATCH, e.g. Slurm): launch queues every work item as one job (a job
array, one task per workload x backend x repeat), then the run follows the job instead of running containers over
SSH: it reads the tasks' states, pulls their logs as each ends (and every PULL_INTERVAL_S while they run), records
each item in the ledger, and tears down as any run does: `terminate` cancels the whole job, on every path.

A task the scheduler requeues (a preemption, `scontrol requeue`) is counted as a preemption when its item had not
ended; the task itself resumes it (the provider's script keeps the partial files aside and runs the item again,
and never runs an ended item again). The bill comes from the job records: one machine per task attempt, from its
start to its end, at the provider's price per task allocation (`BatchQueue.allocation_price`).

`run --detach` (`detached_lifecycle`) submits the job and returns: the ledger says `detached`, the sweep keeps the
job until its expiry, and `collect` ends the run as it ends one whose orchestrator died.

`collect RUN_ID` of a run whose orchestrator died (`collect_batch`) pulls the tasks' logs and reads their states; a
job still queued or running is left alone, an ended one is recorded, finalised and billed by this lifecycle resumed
from the ledger (`BatchLifecycle.resumed`), and its run folder is released, as teardown does.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchmarks.allreduce import EXIT_UNREACHABLE
from orchestrate.accounting import close_accounts, machine_record
from orchestrate.capabilities import BatchQueue, offered
from orchestrate.lifecycle import EXIT_USAGE, Lifecycle, LifecycleError, _Session, _tail
from orchestrate.plan import RunPlan, WorkItem
from orchestrate.progress import Reporter
from orchestrate.provider import (
    TASK_CANCELLED,
    TASK_COMPLETE,
    TASK_ENDED,
    TASK_FAILED,
    TASK_PENDING,
    TASK_RUNNING,
    Capability,
    Instance,
    LaunchRequest,
    Provider,
    ProviderError,
    TaskState,
)
from records.catalog import Profile
from records.ledger import (
    STATUS_COMPLETE,
    STATUS_DETACHED,
    STATUS_FAILED,
    STATUS_RUNNING,
    InstanceRecord,
    ItemRecord,
    Ledger,
    RunRecord,
    StageRecord,
)

POLL_INTERVAL_S = float(os.environ.get("KCB_BATCH_POLL_S", "10"))  # how often the queue is read
PULL_INTERVAL_S = 60.0  # partial logs of running tasks, so a cancelled or lost task keeps its epochs
MAX_POLL_FAILURES = 6  # consecutive unreadable polls (login node or controller down) before the run gives up
# Every other task would fail the same way: a bad command, an image that cannot start, or the nodes of a job of
# several that cannot reach each other (the all-reduce check's exit: the network is the cluster's)
CANNOT_RUN = frozenset({EXIT_USAGE, 125, 126, 127, EXIT_UNREACHABLE})


def lifecycle_for(plan: RunPlan, provider: Provider, ledger: Ledger, reporter: Reporter) -> Lifecycle:
    """The run's lifecycle: a batch provider's job is followed (BatchLifecycle), any other's machine is driven."""
    if offered(provider, Capability.BATCH):
        return BatchLifecycle(plan, provider, ledger, reporter)
    return Lifecycle(plan, provider, ledger, reporter)


def detached_lifecycle(plan: RunPlan, provider: Provider, ledger: Ledger, reporter: Reporter) -> BatchLifecycle:
    """`run --detach` on a batch scheduler: the job is submitted and left to run, with no orchestrator; `status`
    reads its tasks and `collect` pulls, records, bills and finalises it once it has ended, as after a `kill -9`.
    The sweep keeps it until its expiry, as any detached run's machine."""
    lifecycle = BatchLifecycle(plan, provider, ledger, reporter)
    lifecycle.detach = True
    return lifecycle


LABEL = re.compile(r"^(\S+) \[(\S+)\](?: #(\d+))?$")  # WorkItem.label: `mnist_mlp [jax]`, `mnist_mlp [jax] #2`


def item_of_label(label: str) -> WorkItem:
    """The work item a task's label names (the inverse of WorkItem.label)."""
    match = LABEL.match(label)
    if match is None:
        raise LifecycleError(f"a batch task's label {label!r} names no work item")
    workload, backend, repeat = match.groups()
    return WorkItem(workload, backend, int(repeat) if repeat else None)


@dataclass
class _Task:
    """What the run knows of one task: its item, its latest ledger record, the last state read."""

    item: WorkItem
    record: ItemRecord | None = None
    state: TaskState | None = None
    ended: bool = False


class BatchLifecycle(Lifecycle):
    def __init__(self, plan: RunPlan, provider: Provider, ledger: Ledger, reporter: Reporter) -> None:
        if not isinstance(provider, BatchQueue) or not offered(provider, Capability.BATCH):
            raise LifecycleError(f"provider {provider.name} is not a batch scheduler")
        # the plan's profile is priced per task allocation (orchestrate.cli.planning.priced_per_task): every task
        # attempt bills as one machine
        super().__init__(plan, provider, ledger, reporter)
        self.queue: BatchQueue = provider
        self.tasks = {index: _Task(item) for index, item in enumerate(plan.items)}
        self.attempts: list[InstanceRecord] = []  # ended attempts of requeued tasks, billed with the rest
        self.last_pull = 0.0
        self.detach = False  # submit, then leave the job to run alone (`detached_lifecycle`)

    @classmethod
    def resumed(
        cls, plan: RunPlan, provider: Provider, ledger: Ledger, reporter: Reporter, record: RunRecord, job: Instance
    ) -> BatchLifecycle:
        """The lifecycle of a run its ledger `record` tells, following its job `job` again (collect, after the
        orchestrator died): the items it recorded are where it left them."""
        self = cls(plan, provider, ledger, reporter)
        self.record = record
        job_record = next(i for i in record.instances if i.instance_id == job.instance_id)
        self.session = _Session(instance=job, record=job_record)
        self.sessions.append(self.session)
        latest = {(i.workload, i.backend, i.repeat): i for i in record.latest_items()}
        for index, task in self.tasks.items():
            item_record = latest.get((task.item.workload, task.item.backend, task.item.repeat))
            if item_record is None or item_record.status == "preempted":
                continue  # not started since its last requeue: the job records tell the rest
            task.record = item_record
            # as last seen, so a requeue since counts as one (the attempt it recorded is the task's restarts + 1)
            task.state = TaskState(
                index, TASK_RUNNING, started_at=item_record.started_at, restarts=item_record.attempt - 1
            )
            task.ended = item_record.status != STATUS_RUNNING
            if task.ended:
                self.done.add(task.item)
        return self

    # ---- the run -----------------------------------------------------------------------------------------

    def _execute(self) -> None:
        session = self._submit()
        with self._stage("connect") as detail:
            session.instance = self.provider.wait_until_running(session.instance, self.plan.boot_timeout_s)
            detail.append(session.instance.ssh.display() if session.instance.ssh else self.provider.describe())
        self.record.host = self.queue.host_record(session.instance)
        self.record.status = STATUS_RUNNING
        if self.detach:  # no orchestrator follows the job from here: `collect` does, and the sweep keeps it
            self.record.status, self.record.pid = STATUS_DETACHED, 0
            self.record.message = "submitted and left to run: `status` follows it, `collect` finalises it"
            self._save()
            return
        self._save()
        self._follow(session.instance)
        self._settle_unended()
        self._conclude("batch tasks")

    def _submit(self) -> _Session:
        plan = self.plan
        tags = self._run_tags()
        request = LaunchRequest(plan.run_id, plan.profile, None, False, plan.max_lifetime_s, tags, batch=plan.spec)
        with self._stage("launch") as detail:
            asked_at = time.time()
            instance = self.provider.launch(request)
            record = machine_record(instance, asked_at, expires_at=float(tags["expiry"]))
            self.record.instances.append(record)
            session = _Session(instance=instance, record=record)
            self.sessions.append(session)
            self.session = session
            self._save()  # the job exists: record it before anything else can fail
            detail.append(f"job {instance.instance_id}, {len(plan.items)} tasks")
            if plan.spec.payload is not None:  # carried to the cluster by the launch, as a host's prepare stage does
                detail.append(f"payload {plan.spec.payload.describe()}")
        return session

    def _follow(self, instance: Instance) -> None:
        """Read the tasks until every one has ended (or the run's max lifetime has passed)."""
        deadline = time.time() + self.plan.max_lifetime_s
        failures = 0
        while True:
            try:
                states = self.queue.tasks(instance)
            except ProviderError as exc:
                failures += 1
                if failures >= MAX_POLL_FAILURES:
                    raise LifecycleError(f"the scheduler could not be read {failures} times in a row: {exc}") from exc
                self.reporter.note(f"could not read the job's tasks: {exc}")
                time.sleep(POLL_INTERVAL_S)
                continue
            failures = 0
            for state in states:
                self._update(instance, state)
            if all(task.ended for task in self.tasks.values()) or self.abort_reason:
                return
            if time.time() > deadline:
                raise LifecycleError(f"the job ran past the run's max lifetime ({self.plan.max_lifetime_s} s)")
            if time.time() - self.last_pull > PULL_INTERVAL_S and any(
                t.state and t.state.state not in TASK_ENDED and t.state.state != TASK_PENDING
                for t in self.tasks.values()
            ):
                self._pull(instance)
            time.sleep(POLL_INTERVAL_S)

    def _update(self, instance: Instance, state: TaskState) -> None:
        task = self.tasks.get(state.index)
        if task is None:
            return
        previous = task.state
        task.state = state
        if state.item_exit_code is not None and not task.ended:  # it ended between two reads (maybe requeued since)
            self._item_ended(instance, task, state)
        if previous is not None and state.restarts > previous.restarts:
            self._requeued(instance, task, previous)
        if task.ended or state.state == TASK_PENDING:
            return
        if task.record is None:
            self._started(task, state)
        if state.state in TASK_ENDED:
            self._ended(instance, task, state)

    def _item_ended(self, instance: Instance, task: _Task, state: TaskState) -> None:
        code = state.item_exit_code
        if task.record is None:
            self._started(task, state)
        ended = state if state.state in TASK_ENDED else replace(state, ended_at=time.time())
        status = TASK_COMPLETE if code == 0 else TASK_FAILED
        self._ended(instance, task, replace(ended, state=status, exit_code=code))

    def _started(self, task: _Task, state: TaskState) -> None:
        record = ItemRecord(task.item.workload, task.item.backend, status="running", started_at=state.started_at)
        record.attempt, record.repeat = state.restarts + 1, task.item.repeat
        task.record = record
        self.record.items.append(record)
        self._save()
        self.reporter.item_started(task.item.label)

    def _ended(self, instance: Instance, task: _Task, state: TaskState) -> None:
        assert task.record is not None
        record = task.record
        record.ended_at = state.ended_at or time.time()
        record.exit_code = state.exit_code
        if state.state == TASK_COMPLETE:
            record.status = STATUS_COMPLETE
        elif state.state == TASK_CANCELLED:
            record.status = "interrupted"
        else:
            record.status = STATUS_FAILED
        task.ended = True
        self._pull(instance)
        self._setup_stages(task)
        record.logs = [str(p) for p in sorted(self.plan.run_logs.glob("*")) if task.item.owns_log(p.name)]
        console = self.plan.orchestrator_dir / f"{task.item.stem}.console.log"
        seconds = (record.ended_at - record.started_at) if record.started_at else 0.0
        self.record.stages.append(
            StageRecord("workload", record.started_at or record.ended_at, record.ended_at, detail=task.item.label)
        )
        if state.exit_code in CANNOT_RUN:
            self.abort_reason = f"{task.item.label} could not run (exit {state.exit_code}): {_tail(console)}"
        self.done.add(task.item)
        self.reporter.item_finished(
            task.item.label, record.status, seconds, _tail(console) if record.status != STATUS_COMPLETE else ""
        )
        self._save()

    def _setup_stages(self, task: _Task) -> None:
        """A task of several nodes records its set-up before anything is timed (`<stem>.setup.json`: when the image
        was present on every node, when the all-reduce check was done): the ledger's image and check stages."""
        path = self.plan.orchestrator_dir / f"{task.item.stem}.setup.json"
        try:
            setup = json.loads(path.read_text())
            spans = {name: (float(setup[name][0]), float(setup[name][1])) for name in ("image", "check")}
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return  # one node, or the task ended before its set-up did
        detail = f"{task.item.label}: {setup.get('nodes', '?')} nodes, attempt {setup.get('attempt', '?')}"
        for name, (started, ended) in spans.items():
            self.record.stages.append(StageRecord(name, started, ended, detail=detail))

    def _requeued(self, instance: Instance, task: _Task, previous: TaskState) -> None:
        """The scheduler requeued the task: bill its ended attempt; an unfinished item is a preemption."""
        if previous.started_at is not None:
            name = f"{instance.instance_id}_{previous.index} (attempt {previous.restarts + 1})"
            self.attempts.append(self._task_machine(name, previous, time.time(), preempted=True))
        if task.ended:
            self.reporter.note(f"{task.item.label}: requeued after it ended; its task exits without running it again")
            return
        self.record.preemptions += 1
        if task.record is not None:
            task.record.status, task.record.ended_at = "preempted", time.time()
            task.record = None
        self.reporter.note(f"{task.item.label}: requeued by the scheduler (a preemption); it resumes when it restarts")
        if self.record.preemptions > self.plan.max_preemptions:
            self.abort_reason = (
                f"preempted {self.record.preemptions} times (limit --max-preemptions {self.plan.max_preemptions})"
            )
        self._save()

    def _settle_unended(self) -> None:
        """Items whose task never ran (the run stopped first) are recorded as such, so no summary counts them done."""
        for task in self.tasks.values():
            if task.record is None and not task.ended:
                record = ItemRecord(task.item.workload, task.item.backend, status="interrupted")
                record.repeat = task.item.repeat
                task.record = record
                self.record.items.append(record)

    def _pull(self, instance: Instance) -> None:
        started = time.time()
        self.queue.fetch_logs(instance, self.plan.logs_dir)
        self.last_pull = time.time()
        self.record.stages.append(StageRecord("pull_logs", started, self.last_pull))

    # ---- collect: the job ended after its orchestrator died ---------------------------------------------------

    def collect_ended(self, states: list[TaskState]) -> None:
        """Record each task's end as the job records tell it, finalise and bill the run as teardown does, then
        remove the run's folder on the cluster (its logs are pulled first)."""
        assert self.session is not None
        session = self.session
        with self._stage("collect") as detail:
            for state in states:
                self._update(session.instance, state)
            self._settle_unended()
            self._conclude("batch tasks")
            self._pull(session.instance)  # the last files, whatever the tasks' records said
            ends = [state.ended_at for state in states if state.ended_at is not None]
            session.record.terminated_at = session.record.terminated_at or max(ends, default=time.time())
            self._bill_from_job_records(session, states)
            detail.append(f"job {session.instance.instance_id} ended; {len(states)} tasks recorded and billed")
        self._release()
        self.record.ended_at = self.record.ended_at or session.record.terminated_at
        self.record.teardown_failures = list(self.teardown_failures)
        self.record.recovered_by = "collect"
        close_accounts(self.record, self.plan.profile, self.has(Capability.BILLABLE))
        self._save()
        self._write_run_summary()

    # ---- teardown ----------------------------------------------------------------------------------------

    def _end_session(self, session: _Session, reachable: bool = True) -> None:
        """Cancel the whole job, pull the last logs, then bill each task attempt from the job records."""
        instance = session.instance
        with self._attempt(f"cancel job {instance.instance_id}"):
            self.provider.terminate(instance)
            session.record.terminated_at = time.time()
            self.torn_down.append(f"cancelled {self.provider.name} job {instance.instance_id} (every task)")
        with self._attempt(f"pull the last logs of job {instance.instance_id}"):
            self._pull(instance)
        if session.record.terminated_at is None:
            return  # it may still run: its bill stays unknown until the sweep cancels it
        with self._attempt(f"read the job records of {instance.instance_id}"):
            states = self.queue.tasks(instance)
            for state in states:
                self._update(instance, state)
            self._settle_unended()
            self._bill_from_job_records(session, states)

    def _bill_from_job_records(self, session: _Session, states: list[TaskState]) -> None:
        """The job's one ledger machine becomes one per task attempt, from its start to its end in the scheduler's
        job records; where it keeps none, as this run saw them (each task's last attempt, the requeued ones)."""
        job = session.instance.instance_id
        recorded = self.queue.attempts(session.instance)
        if recorded:
            counts: dict[int, int] = {}
            machines = []
            for state in recorded:
                counts[state.index] = counts.get(state.index, 0) + 1
                last = counts[state.index] == sum(1 for s in recorded if s.index == state.index)
                name = f"{job}_{state.index}" + ("" if last else f" (attempt {counts[state.index]})")
                machines.append(self._task_machine(name, state, session.record.terminated_at, preempted=not last))
        else:
            machines = self.attempts + [
                self._task_machine(f"{job}_{state.index}", state, session.record.terminated_at)
                for state in states
                if state.started_at is not None
            ]
        self.record.instances = [r for r in self.record.instances if r is not session.record] + machines
        self._save()

    def _task_machine(
        self, name: str, state: TaskState, ended: float | None, preempted: bool = False
    ) -> InstanceRecord:
        """One task attempt as the machine it billed as, from its start to its end (else `ended`)."""
        assert state.started_at is not None  # only attempts that started are billed
        return InstanceRecord(
            self.provider.name, name, None, False, state.started_at, state.ended_at or ended, preempted=preempted
        )


# ---- `collect RUN_ID` of a batch run -------------------------------------------------------------------------------


@dataclass
class BatchCollected:
    record: RunRecord
    action: str
    downloaded: list[Path] = field(default_factory=list)
    tasks: list[tuple[str, TaskState]] = field(default_factory=list)  # (item label, state) in task order


def collect_batch(
    record: RunRecord, provider: Provider, profile: Profile, ledger: Ledger, reporter: Reporter, alive: bool
) -> BatchCollected:
    """Pull a batch run's logs from the cluster's shared folder and read its tasks; once its job has ended (and its
    orchestrator, `alive` here, is gone), finalise and bill it from the job records and remove its folder. A job
    still queued or running is left alone: its ledger entry too. Idempotent: a final run is left as it is."""
    if not isinstance(provider, BatchQueue):
        raise LifecycleError(f"provider {provider.name} is not a batch scheduler")
    if record.final:
        return BatchCollected(record, f"its ledger entry is final ({record.status}): nothing to collect")
    jobs = [i for i in record.instances if i.provider == provider.name]
    found = provider.submitted_job(profile, record.run_id, jobs[-1].instance_id, record.platform) if jobs else None
    if found is None:
        return BatchCollected(
            record,
            "the ledger records no job of it, or its folder on the cluster is gone: nothing to collect; "
            "`python -m orchestrate sweep` finalises it",
        )
    job, labels = found
    items = tuple(item_of_label(label) for label in labels)
    plan = _collect_plan(record, provider.allocation_price(profile, record.nodes), items)
    states = provider.tasks(job)
    downloaded = provider.fetch_logs(job, plan.logs_dir)
    named = [(labels[state.index], state) for state in states]
    if alive:
        return BatchCollected(
            record,
            f"its orchestrator ({record.owner}, pid {record.pid}) may still follow the job: logs pulled, the ledger "
            "left to it",
            downloaded, named,
        )  # fmt: skip
    unended = [state for state in states if state.state not in TASK_ENDED]
    if unended:
        return BatchCollected(
            record,
            f"job {job.instance_id} still has {len(unended)} of {len(states)} tasks queued or running: their logs so "
            "far are pulled, the job and the ledger left alone; `collect` again once it has ended records, bills "
            "and finalises the run (`python -m orchestrate sweep` cancels it instead)",
            downloaded,
            named,
        )
    lifecycle = BatchLifecycle.resumed(plan, provider, ledger, reporter, record, job)
    lifecycle.collect_ended(states)
    action = f"job {job.instance_id} has ended: {lifecycle.record.status}, billed from the job records"
    if lifecycle.teardown_failures:
        return BatchCollected(lifecycle.record, action, downloaded, named)
    return BatchCollected(lifecycle.record, f"{action}; its folder on the cluster removed", downloaded, named)


def _collect_plan(record: RunRecord, profile: Profile, items: tuple[WorkItem, ...]) -> RunPlan:
    """What `collect` needs of the run's plan, from its ledger entry: its items (in task order), where its logs go,
    its profile priced per task allocation."""
    if not record.logs_dir:
        raise LifecycleError(f"run {record.run_id} has no logs folder in the ledger")
    return RunPlan(
        run_id=record.run_id,
        profile=profile,
        platform=record.platform,
        suite=record.suite,
        items=items,
        spot=False,
        image_ref=record.image or "",
        image_source="the ledger",
        build=None,
        logs_dir=Path(record.logs_dir).parents[1],
        owner=record.owner,
        nodes=record.nodes,
    )
