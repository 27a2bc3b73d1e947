"""One orchestrated run: launch -> wait for SSH -> prepare the host -> get the image there -> one container
run per workload x backend, each followed at once by a log pull -> teardown, always -> a ledger entry.

Teardown runs in `finally`: after success, failure, Ctrl-C or SIGTERM (the CLI turns both signals into
`Interrupted`). Signals that arrive during teardown are noted and otherwise ignored, so a second Ctrl-C
cannot leave a machine running; a SIGKILL can, and the sweep (`orchestrate sweep`) finds it through the
ledger and the instance's tags.

Spot/preemptible machines: when the provider reports the machine PREEMPTED (checked while a workload runs,
and whenever booting, preparing or the SSH connection fails), the interrupted workload's partial log is moved to
`preempted/attempt-N/`, a new machine is launched (up to `max_preemptions` times) and only the workloads not
yet finished run again. When a zone has no capacity, the profile's next zone is tried.

The containers (their command line, the dataset cache, stopping them) are `orchestrate.containers`; the cost
accounts are `orchestrate.accounting`; what the provider's machines allow is its `Capability` set.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from orchestrate import keepsafe
from orchestrate.accounting import close_accounts, launch_in_zones, machine_record, run_tags
from orchestrate.capabilities import offered
from orchestrate.containers import (
    container_command,
    deliver_payload,
    run_containers,
    seed_dataset_cache,
    stop_containers,
)
from orchestrate.data_dir import BadDataDir
from orchestrate.hostprep import HostInfo, HostSetupError, clean_run_dir, prepare_host
from orchestrate.images import ImageError, ImageInfo, ensure_image
from orchestrate.plan import RunPlan, WorkItem
from orchestrate.private_files import owner_only
from orchestrate.progress import Reporter
from orchestrate.provider import (
    Capability,
    Instance,
    InstanceState,
    LaunchRequest,
    Provider,
    ProviderError,
)
from orchestrate.remote import ConnectionLost, Host, LocalHost, RemoteError, SSHHost, wait_for_ssh
from orchestrate.runspec import SpecItem
from orchestrate.storage import StorageError
from records.ledger import (
    STATUS_COMPLETE,
    STATUS_DETACHED,
    STATUS_FAILED,
    STATUS_INTERRUPTED,
    STATUS_RUNNING,
    InstanceRecord,
    ItemRecord,
    Ledger,
    RunRecord,
    StageRecord,
)

# Runner exit codes (docs/architecture.md) and Docker's own.
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_DATA, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
DOCKER_CANNOT_RUN = frozenset({125, 126, 127})  # the engine could not start the container at all
# On machines that can vanish (rented, spot or not), partial logs are pulled this often while a workload runs.
PULL_INTERVAL_S = 60.0
STATE_POLL_INTERVAL_S = 30.0


class Interrupted(BaseException):
    """SIGINT or SIGTERM reached the orchestrator."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


class LifecycleError(RuntimeError):
    """The run cannot go on; the message says why (finished workloads' logs are kept)."""


class InstancePreempted(LifecycleError):
    """The provider took the machine back."""


@dataclass
class _Session:
    """The machine of one attempt and what is known about it."""

    instance: Instance
    record: InstanceRecord
    host: Host | None = None
    info: HostInfo | None = None
    image: ImageInfo | None = None
    saved_to: str | None = None  # the bucket the machine saves the run's logs to before it ends itself (keepsafe)


@dataclass
class Outcome:
    record: RunRecord
    torn_down: list[str] = field(default_factory=list)
    teardown_failures: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if self.record.status == STATUS_INTERRUPTED:
            return EXIT_INTERRUPTED
        if self.record.status == STATUS_DETACHED:  # submitted, and left to run (orchestrate.batch)
            return 0
        # a teardown problem fails the run even when every workload finished: something may still be billing
        return 0 if self.record.status == STATUS_COMPLETE and not self.teardown_failures else 1


class Lifecycle:
    def __init__(self, plan: RunPlan, provider: Provider, ledger: Ledger, reporter: Reporter) -> None:
        self.plan = plan
        self.provider = provider
        self.ledger = ledger
        self.reporter = reporter
        self.record = plan.record(provider.name, planned_items=len(plan.items))
        self.session: _Session | None = None
        self.sessions: list[_Session] = []
        self.done: set[WorkItem] = set()
        self.abort_reason: str | None = None
        self.torn_down: list[str] = []
        self.teardown_failures: list[str] = []

    def has(self, capability: Capability) -> bool:
        return self.provider.has(capability)

    # ---- the run -----------------------------------------------------------------------------------------

    def run(self) -> Outcome:
        if self.plan.validated_at:
            self.record.stages.append(StageRecord("validate", *self.plan.validated_at))
        self.plan.write_spec()
        self._save()
        self.reporter.items_planned([item.label for item in self.plan.items])
        outcome = Outcome(self.record, self.torn_down, self.teardown_failures)
        error: BaseException | None = None
        try:
            self._execute()
        except Interrupted as exc:
            self._finish(STATUS_INTERRUPTED, f"interrupted by {exc.signal_name}")
        except (LifecycleError, ProviderError, RemoteError, HostSetupError, ImageError, BadDataDir) as exc:
            self._finish(STATUS_FAILED, str(exc))
        except Exception as exc:  # a bug: still tear down, record it, then let the traceback out
            self._finish(STATUS_FAILED, f"internal error: {type(exc).__name__}: {exc}")
            error = exc
        finally:
            if self.record.status != STATUS_DETACHED:  # a batch job left to run alone: `collect` ends it
                with _signals_deferred(self.reporter):
                    self._teardown()
                    self.record.teardown_failures = list(self.teardown_failures)
                    close_accounts(self.record, self.plan.profile, self.has(Capability.BILLABLE))
                    self._save()
                    self._write_run_summary()
        if error is not None:
            raise error
        return outcome

    def _execute(self) -> None:
        while self._pending():
            try:
                self._start_session()
                self._run_items()
            except InstancePreempted as exc:
                self._after_preemption(str(exc))
            except (RemoteError, ProviderError, HostSetupError, ImageError) as exc:
                # the machine vanished while booting or being set up: a preemption (relaunch), or a failure
                if self.session is None or self._state(self.session) != InstanceState.PREEMPTED:
                    raise
                self._after_preemption(f"{self.provider.name} preempted {self.session.instance.instance_id} ({exc})")
        self._conclude("container runs")

    def _conclude(self, what: str) -> None:
        """Finish the run from its items' outcomes: failed with its abort reason or the items that did not
        complete (`what` names them: container runs, batch tasks), else complete."""
        failed = [i for i in self.record.latest_items() if i.status != STATUS_COMPLETE]
        if self.abort_reason:
            self._finish(STATUS_FAILED, self.abort_reason)
        elif failed:
            labels = ", ".join(f"{i.workload} [{i.backend}] ({i.status})" for i in failed)
            self._finish(STATUS_FAILED, f"{len(failed)} of {len(self.plan.items)} {what} failed: {labels}")
        else:
            self._finish(STATUS_COMPLETE, f"all {len(self.plan.items)} {what} complete")

    def _pending(self) -> list[SpecItem]:
        """The spec's items not yet done (a relaunch after a preemption runs only these)."""
        return [] if self.abort_reason else [item for item in self.plan.spec.items if item not in self.done]

    def _start_session(self) -> _Session:
        self.session = None  # a failed launch must not be blamed on the previous (preempted) machine
        instance, record = self._launch()
        session = _Session(instance=instance, record=record)
        self.sessions.append(session)
        self.session = session
        with self._stage("connect") as detail:
            instance = self.provider.wait_until_running(instance, self.plan.boot_timeout_s)
            session.instance = instance
            session.host = self._connect(instance)
            detail.append(session.host.description)
        with self._stage("prepare") as detail:
            session.info = prepare_host(
                session.host,
                remote_dir=self.plan.remote_dir,
                run_id=self.plan.run_id,
                gpu=self.plan.profile.has_gpu,
                install=self.plan.install_host_software or self.has(Capability.FRESH_HOST),
                driver_wait_s=self.plan.boot_timeout_s if self.has(Capability.FRESH_HOST) else 0.0,
                new_run=len(self.sessions) == 1,  # a relaunch after preemption finds its own folder on a kept host
            )
            detail.append(", ".join(f"installed {w}" for w in session.info.installed) or "ready")
            payload = self.plan.spec.payload
            if payload is not None:
                deliver_payload(session.host, session.info.run_dir(self.plan.run_id), payload)
                detail.append(f"payload {payload.describe()}")
            self._keep_safe(session, detail)
            self._record_host(session)
        with self._stage("image") as detail:
            session.image = self._ensure_image(session)
            detail.append(f"{session.image.how}: {session.image.digest[:19]}")
            self.record.image_digest = session.image.digest
            seed_dataset_cache(session.host, session.info, session.image)
        self.record.status = STATUS_RUNNING
        self._save()
        return session

    def _run_tags(self) -> dict[str, str]:
        plan = self.plan
        return run_tags(plan.run_id, plan.owner, plan.profile.name, plan.max_lifetime_s)

    def _launch(self) -> tuple[Instance, InstanceRecord]:
        plan, tags = self.plan, self._run_tags()
        with self._stage("launch") as detail:
            request = LaunchRequest(plan.run_id, plan.profile, None, plan.spot, plan.max_lifetime_s, tags)
            launched = launch_in_zones(self.provider, request, self.reporter.note)
            if isinstance(launched, list):
                raise LifecycleError(
                    f"no capacity for {plan.profile.name} in any of its zones ({'; '.join(launched)}); "
                    "try later, another profile, or --on-demand"
                )
            instance, asked_at = launched
            record = machine_record(instance, asked_at, expires_at=float(tags["expiry"]))
            self.record.instances.append(record)
            self._save()  # the machine exists: record it before anything else can fail
            detail.append(f"{instance.instance_id}{f' in {instance.zone}' if instance.zone else ''}")
            return instance, record

    def _record_host(self, session: _Session) -> None:
        """Where this run's files and containers are, for the sweep to recover them if this process dies."""
        info, target = session.info, session.instance.ssh
        assert info is not None
        self.record.host = {"root": info.root, "docker": info.docker}
        if session.saved_to:
            self.record.host[keepsafe.HOST_KEY] = session.saved_to
        if target is not None and not self.has(Capability.RUNS_LOCALLY):
            fields = {"host": target.host, "user": target.user, "port": target.port, "key": target.key_filename}
            self.record.host.update({k: str(v) for k, v in fields.items() if v is not None})
            if self.plan.ssh_config is not None:
                self.record.host["ssh_config"] = str(self.plan.ssh_config)
        self._save()

    def _keep_safe(self, session: _Session, detail: list[str]) -> None:
        """A rented machine, which ends itself at its max lifetime, saves the run's logs first (orchestrate.keepsafe);
        one that cannot is said so, and the run goes on."""
        if not (self.has(Capability.FRESH_HOST) and offered(self.provider, Capability.OBJECT_STORE)):
            return
        assert session.host is not None and session.info is not None
        lifetime, expiry = self.plan.max_lifetime_s, session.record.expires_at or time.time() + self.plan.max_lifetime_s
        try:
            made = keepsafe.upload_url(self.plan.profile, self.plan.run_id, lifetime + keepsafe.MAX_LEAD_S)
            if made is None:
                return
            bucket, url = made
            keepsafe.start(session.host, session.info, self.plan.run_id, url, expiry - keepsafe.save_lead_s(lifetime))
        except (StorageError, ProviderError, RemoteError) as exc:
            self.reporter.note(f"the machine cannot save the run's logs before it ends itself: {exc}")
            return
        session.saved_to = str(bucket)
        detail.append(f"saves its logs to {bucket} before it ends itself")

    def _connect(self, instance: Instance) -> Host:
        if self.has(Capability.RUNS_LOCALLY):
            return LocalHost()
        if instance.ssh is None:
            raise LifecycleError(f"provider {self.provider.name} returned no SSH address for {instance.instance_id}")
        host = SSHHost(
            instance.ssh,
            ssh_config=self.plan.ssh_config,
            verify_known_hosts=not self.has(Capability.FRESH_HOST),  # fresh machines reuse addresses
        )
        wait_for_ssh(
            host,
            self.plan.ssh_timeout_s,
            on_retry=lambda e: self.reporter.note(f"SSH not ready: {e}"),
            retry_auth=self.has(Capability.FRESH_HOST),
        )
        return host

    def _ensure_image(self, session: _Session) -> ImageInfo:
        assert session.host is not None and session.info is not None
        with (self.plan.orchestrator_dir / "image.log").open("ab") as log:
            return ensure_image(
                session.host,
                session.info.docker,
                self.plan.image_ref,
                self.plan.image_source,
                build=self.plan.build,
                log=log,
                note=self.reporter.note,
            )

    # ---- workloads ---------------------------------------------------------------------------------------

    def _run_items(self) -> None:
        for item in self._pending():
            self._run_item(item)

    def _run_item(self, item: SpecItem) -> None:
        session = self.session
        assert session is not None and session.host is not None and session.info is not None and session.image
        attempt = len(self.sessions)
        item_record = ItemRecord(item.workload, item.backend, status="running", started_at=time.time())
        item_record.attempt, item_record.repeat = attempt, item.repeat
        self.record.items.append(item_record)
        self._save()
        self.reporter.item_started(item.label)
        stage = StageRecord("workload", time.time(), detail=item.label)
        self.record.stages.append(stage)
        console = self.plan.orchestrator_dir / f"{item.stem}.console.log"
        try:
            with console.open("ab") as output:
                code = session.host.stream(
                    container_command(self.plan.spec, item, session.info, session.image, session.instance.instance_id),
                    output,
                    poll=self._poller(session, item),
                    poll_interval_s=PULL_INTERVAL_S if self._can_vanish else STATE_POLL_INTERVAL_S,
                )
        except ConnectionLost as exc:
            stage.ended_at = time.time()
            self._check_preempted(session, item, item_record, str(exc))
            raise LifecycleError(f"lost the SSH connection during {item.label}: {exc}") from exc
        except InstancePreempted:
            stage.ended_at = time.time()
            item_record.status, item_record.ended_at = "preempted", time.time()
            raise
        stage.ended_at = item_record.ended_at = time.time()
        item_record.exit_code = code
        with contextlib.suppress(RemoteError):  # what the container wrote with Docker's umask: the user's alone
            session.host.run(owner_only(session.host.quote(session.info.logs_dir(self.plan.run_id))))
        if code == 137 and self._state(session) == InstanceState.PREEMPTED:
            item_record.status = "preempted"
            raise InstancePreempted(f"{self.provider.name} preempted {session.instance.instance_id}")
        item_record.logs = self._pull_logs(session, item)
        item_record.status = self._item_status(item, code, console)
        self.done.add(item)
        self.reporter.item_finished(
            item.label, item_record.status, stage.seconds or 0.0, _tail(console) if code else ""
        )
        self._save()

    @property
    def _can_vanish(self) -> bool:
        """A rented machine (spot or not) takes unpulled logs with it when it ends: pull them while they run."""
        return self.plan.spot or self.has(Capability.FRESH_HOST)

    def _poller(self, session: _Session, item: WorkItem) -> Callable[[], None]:
        def poll() -> None:
            if self._state(session) == InstanceState.PREEMPTED:
                raise InstancePreempted(f"{self.provider.name} preempted {session.instance.instance_id}")
            if self._can_vanish:
                self._pull_logs(session, item)  # keep what a preemption or a crash would otherwise take with it

        return poll

    def _state(self, session: _Session) -> InstanceState:
        try:
            return self.provider.state(session.instance)
        except ProviderError as exc:
            self.reporter.note(f"could not read the machine's state: {exc}")
            return InstanceState.UNKNOWN

    def _check_preempted(self, session: _Session, item: WorkItem, record: ItemRecord, error: str) -> None:
        if self._state(session) == InstanceState.PREEMPTED:
            record.status, record.ended_at = "preempted", time.time()
            raise InstancePreempted(f"{self.provider.name} preempted {session.instance.instance_id} ({error})")

    def _pull_logs(self, session: _Session, item: WorkItem | None = None) -> list[str]:
        assert session.host is not None and session.info is not None
        started = time.time()
        copied = session.host.fetch_tree(session.info.logs_dir(self.plan.run_id), self.plan.logs_dir)
        self.record.stages.append(StageRecord("pull_logs", started, time.time(), detail=item.label if item else ""))
        return [str(path) for path in copied]

    def _item_status(self, item: WorkItem, code: int, console: Path) -> str:
        if code == EXIT_OK:
            return STATUS_COMPLETE
        if code == EXIT_INTERRUPTED:
            return "interrupted"
        if code == EXIT_USAGE or code in DOCKER_CANNOT_RUN:
            # every later run would fail the same way: stop here, keep what finished
            self.abort_reason = f"{item.label} could not run (exit {code}): {_tail(console)}"
        return STATUS_FAILED

    # ---- preemption --------------------------------------------------------------------------------------

    def _after_preemption(self, reason: str) -> None:
        session = self.session
        assert session is not None
        self.record.preemptions += 1
        session.record.preempted = True
        self.reporter.note(f"preempted: {reason}")
        attempt = len(self.sessions)
        self._keep_partial_logs(attempt)
        self._end_session(session, reachable=False)
        if self.record.preemptions > self.plan.max_preemptions:
            raise LifecycleError(
                f"preempted {self.record.preemptions} times "
                f"(limit --max-preemptions {self.plan.max_preemptions}); "
                f"{len(self.done)} of {len(self.plan.items)} container runs finished and their logs are kept"
            )
        self.reporter.note(f"relaunching for the {len(self._pending())} container runs not yet finished")

    def _keep_partial_logs(self, attempt: int) -> None:
        """Move the interrupted runs' partial files aside: the rerun writes the same names."""
        target = self.plan.run_logs / "preempted" / f"attempt-{attempt}"
        for record in self.record.items:
            if record.status != "preempted" or record.attempt != attempt:
                continue
            item = WorkItem(record.workload, record.backend, record.repeat)
            for path in sorted(self.plan.run_logs.glob(f"{record.workload}_{record.backend}*")):
                if path.is_file() and item.owns_log(path.name):
                    target.mkdir(parents=True, exist_ok=True)
                    moved = path.replace(target / path.name)
                    record.logs.append(str(moved))

    # ---- teardown ----------------------------------------------------------------------------------------

    def _teardown(self) -> None:
        stage = StageRecord("teardown", time.time())
        self.record.stages.append(stage)
        self._save_teardown_started()
        self.reporter.stage_started("teardown")
        for session in self.sessions:
            if session.record.terminated_at is None:
                self._end_session(session)
        self._sweep_own_instances()
        self._release()
        stage.ended_at = time.time()
        status = "failed" if self.teardown_failures else "done"
        self.reporter.stage_finished("teardown", stage.seconds or 0.0, status)

    @contextlib.contextmanager
    def _attempt(self, what: str) -> Iterator[None]:
        """Teardown goes on whatever one step raises (a provider's bug included): the failure is recorded, and
        the user is pointed to the sweep."""
        try:
            yield
        except Exception as exc:  # broad on purpose: teardown must reach every step whatever a provider raises
            self.teardown_failures.append(f"could not {what}: {type(exc).__name__}: {exc}")

    def _end_session(self, session: _Session, reachable: bool = True) -> None:
        """Stop the containers, pull what they wrote, clean the host, terminate the machine. Never raises; the
        machine is stamped terminated only when `terminate` succeeded (else it may still be billing)."""
        host, info = session.host, session.info
        if reachable and host is not None and info is not None:
            if session.saved_to:
                with self._attempt(f"stop the routine that would save the logs on {host.description}"):
                    keepsafe.stop(host, info.run_dir(self.plan.run_id))
            with self._attempt(f"stop the run's containers on {host.description}"):
                self._stop_containers(host, info)
            with self._attempt(f"pull the last logs from {host.description}"):
                self._pull_logs(session)
            if not self.has(Capability.FRESH_HOST):  # a rented machine takes its disk with it
                with self._attempt(f"remove the run folder on {host.description}"):
                    clean_run_dir(host, info, self.plan.run_id)
                    self.torn_down.append(f"removed {info.run_dir(self.plan.run_id)} on {host.description}")
        if host is not None:
            with self._attempt(f"close the connection to {host.description}"):
                host.close()
        instance = session.instance
        with self._attempt(f"terminate {instance.instance_id}"):
            self.provider.terminate(instance)
            session.record.terminated_at = time.time()
            if self.has(Capability.BILLABLE):
                zone = f" in {instance.zone}" if instance.zone else ""
                self.torn_down.append(f"terminated {self.provider.name} instance {instance.instance_id}{zone}")

    def _stop_containers(self, host: Host, info: HostInfo) -> None:
        """Stop every container labelled with this run's id (the one running now, and any a cut-short start left)."""
        names = [name for name, _ in run_containers(host, info.docker, self.plan.run_id)]
        stopped, failures = stop_containers(host, info.docker, names)
        self.torn_down.extend(stopped)
        self.teardown_failures.extend(failures)

    def _sweep_own_instances(self) -> None:
        """An interrupt during `launch` can leave a machine the run never heard of: find it by its tag."""
        if not self.has(Capability.LEFTOVERS):
            return
        known = {s.instance.instance_id for s in self.sessions}
        strays: list[Instance] = []
        with self._attempt(f"list {self.provider.name} instances"):
            strays = [i for i in self.provider.list_instances() if i.tags.get("run-id") == self.plan.run_id]
        for instance in strays:
            if instance.instance_id in known:
                continue
            with self._attempt(f"terminate stray instance {instance.instance_id}"):
                self.provider.terminate(instance)
                self.torn_down.append(f"terminated stray instance {instance.instance_id}")
                self.record.instances.append(
                    machine_record(instance, self.record.started_at, terminated_at=time.time())
                )

    def _release(self) -> None:
        with self._attempt(f"release the {self.provider.name} resources of run {self.plan.run_id}"):
            self.provider.release_run(self.plan.run_id)
            if self.has(Capability.LEFTOVERS):
                self.torn_down.append(f"released {self.provider.name} resources of run {self.plan.run_id}")

    # ---- bookkeeping -------------------------------------------------------------------------------------

    def _finish(self, status: str, message: str) -> None:
        self.record.status = status
        self.record.message = message
        for item in self.record.items:
            if item.status == "running":
                item.status = "interrupted" if status == STATUS_INTERRUPTED else STATUS_FAILED
                item.ended_at = time.time()

    def _save(self) -> None:
        self.ledger.append(self.record)

    def _save_teardown_started(self) -> None:
        """The items' outcome and the open teardown stage reach the ledger before teardown ends the machine: a kill
        in teardown then leaves the sweep what happened. The run stays live there until teardown is done, so no
        sweep takes its machine before teardown has pulled the last logs."""
        self.ledger.append(dataclasses.replace(self.record, status=STATUS_RUNNING))

    def _write_run_summary(self) -> None:
        """The run's final ledger entry beside its logs, for the report."""
        path = self.plan.orchestrator_dir / "run.json"
        path.write_text(json.dumps(self.record.to_json(), indent=2, sort_keys=True, default=str))

    @contextlib.contextmanager
    def _stage(self, name: str) -> Iterator[list[str]]:
        """Time a stage into the ledger and the display; the yielded list collects a one-line detail."""
        detail: list[str] = []
        stage = StageRecord(name, time.time())
        self.record.stages.append(stage)
        self.reporter.stage_started(name)
        status = "failed"
        try:
            yield detail
            status = "done"
        finally:
            stage.ended_at, stage.detail = time.time(), "; ".join(detail)
            self.reporter.stage_finished(name, stage.seconds or 0.0, status, stage.detail)


# ---- helpers ---------------------------------------------------------------------------------------------


def _tail(console: Path, lines: int = 3) -> str:
    try:
        text = console.read_bytes()[-4000:].decode(errors="replace")
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:] if line.strip())


@contextlib.contextmanager
def _signals_deferred(reporter: Reporter) -> Iterator[None]:
    """During teardown, Ctrl-C and SIGTERM are noted, not obeyed: stopping half-way would leak the machine."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def note(signum: int, frame: object) -> None:
        reporter.note(
            f"{signal.Signals(signum).name} received during teardown: finishing it first "
            "(if this process is killed, `python -m orchestrate sweep` removes what is left)"
        )

    previous = {sig: signal.signal(sig, note) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def raise_interrupted(signum: int, frame: object) -> None:
    """Signal handler the CLI installs for SIGINT and SIGTERM."""
    raise Interrupted(signal.Signals(signum).name)
