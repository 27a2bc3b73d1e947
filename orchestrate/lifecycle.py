"""One orchestrated run: launch -> wait for SSH -> prepare the host -> get the image there -> one container
run per workload x backend, each followed at once by a log pull -> teardown, always -> a ledger entry.

Teardown runs in `finally`: after success, failure, Ctrl-C or SIGTERM (the CLI turns both signals into
`Interrupted`). Signals that arrive during teardown are noted and otherwise ignored, so a second Ctrl-C
cannot leave a machine running; a SIGKILL can, and the sweep (`orchestrate sweep`) finds it through the
ledger and the instance's tags.

Spot/preemptible machines: when the provider reports the machine PREEMPTED (checked while a workload runs,
and whenever the SSH connection dies), the interrupted workload's partial log is moved to
`preempted/attempt-N/`, a new machine is launched (up to `max_preemptions` times) and only the workloads not
yet finished run again. When a zone has no capacity, the profile's next zone is tried.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.logs import LogFormatError, read_epoch_log
from orchestrate.catalog import Profile
from orchestrate.hostprep import HostInfo, HostSetupError, clean_run_dir, prepare_host
from orchestrate.images import BuildSpec, ImageError, ImageInfo, ensure_image
from orchestrate.ledger import (
    STATUS_COMPLETE,
    STATUS_FAILED,
    STATUS_INTERRUPTED,
    STATUS_RUNNING,
    InstanceRecord,
    ItemRecord,
    Ledger,
    RunRecord,
    StageRecord,
)
from orchestrate.progress import Reporter
from orchestrate.provider import (
    PROJECT_TAG,
    CapacityError,
    Instance,
    InstanceState,
    LaunchRequest,
    Provider,
    ProviderError,
)
from orchestrate.remote import ConnectionLost, Host, LocalHost, RemoteError, SSHHost, wait_for_ssh

# Runner exit codes (docs/architecture.md) and Docker's own.
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_DATA, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
DOCKER_CANNOT_RUN = frozenset({125, 126, 127})  # the engine could not start the container at all
STOP_GRACE_S = 10  # `docker stop` waits this long for the runner to record a partial run
DEFAULT_KERAS_HOME = "/data/keras"
SPOT_PULL_INTERVAL_S = 60.0  # on spot machines, partial logs are pulled this often while a workload runs
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


@dataclass(frozen=True)
class WorkItem:
    workload: str
    backend: str

    @property
    def label(self) -> str:
        return f"{self.workload} [{self.backend}]"

    @property
    def stem(self) -> str:
        return f"{self.workload}_{self.backend}"

    def container_name(self, run_id: str) -> str:
        return f"{run_id}-{self.workload}-{self.backend}"


@dataclass(frozen=True)
class RunPlan:
    """Everything a run needs, validated before anything starts (see orchestrate.cli)."""

    run_id: str
    profile: Profile
    platform: str  # the log folder name: the profile's name unless the user named the host
    suite: str
    items: tuple[WorkItem, ...]
    spot: bool
    image_ref: str
    image_source: str
    build: BuildSpec | None
    logs_dir: Path
    owner: str
    remote_dir: str = "~/keras-cloud-bench"
    runner_args: tuple[str, ...] = ()
    allow_synthetic: bool = True
    ssh_config: Path | None = None
    ssh_timeout_s: float = 300.0
    boot_timeout_s: float = 600.0
    max_lifetime_s: int = 4 * 3600
    max_preemptions: int = 3
    install_host_software: bool = False
    validated_at: tuple[float, float] | None = None  # (started, ended) of the CLI's validation

    @property
    def run_logs(self) -> Path:
        return self.logs_dir / self.platform / self.run_id

    @property
    def orchestrator_dir(self) -> Path:
        return self.run_logs / "orchestrate"


@dataclass
class _Session:
    """The machine of one attempt and what is known about it."""

    instance: Instance
    record: InstanceRecord
    host: Host | None = None
    info: HostInfo | None = None
    image: ImageInfo | None = None
    running_container: str | None = None


@dataclass
class Outcome:
    record: RunRecord
    torn_down: list[str] = field(default_factory=list)
    teardown_failures: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if self.record.status == STATUS_INTERRUPTED:
            return EXIT_INTERRUPTED
        # a teardown problem fails the run even when every workload finished: something may still be billing
        return 0 if self.record.status == STATUS_COMPLETE and not self.teardown_failures else 1


class Lifecycle:
    def __init__(self, plan: RunPlan, provider: Provider, ledger: Ledger, reporter: Reporter) -> None:
        self.plan = plan
        self.provider = provider
        self.ledger = ledger
        self.reporter = reporter
        self.record = RunRecord(
            run_id=plan.run_id,
            profile=plan.profile.name,
            provider=provider.name,
            platform=plan.platform,
            suite=plan.suite,
            owner=plan.owner,
            pid=os.getpid(),
            started_at=plan.validated_at[0] if plan.validated_at else time.time(),
            spot=plan.spot,
            image=plan.image_ref,
            logs_dir=str(plan.run_logs),
        )
        self.session: _Session | None = None
        self.sessions: list[_Session] = []
        self.done: set[WorkItem] = set()
        self.abort_reason: str | None = None

    # ---- the run -----------------------------------------------------------------------------------------

    def run(self) -> Outcome:
        if self.plan.validated_at:
            self.record.stages.append(StageRecord("validate", *self.plan.validated_at))
        self.plan.orchestrator_dir.mkdir(parents=True, exist_ok=True)
        self._save()
        self.reporter.items_planned([item.label for item in self.plan.items])
        outcome = Outcome(self.record)
        error: BaseException | None = None
        try:
            self._execute()
        except Interrupted as exc:
            self._finish(STATUS_INTERRUPTED, f"interrupted by {exc.signal_name}")
        except (LifecycleError, ProviderError, RemoteError, HostSetupError, ImageError) as exc:
            self._finish(STATUS_FAILED, str(exc))
        except Exception as exc:  # a bug: still tear down, record it, then let the traceback out
            self._finish(STATUS_FAILED, f"internal error: {type(exc).__name__}: {exc}")
            error = exc
        finally:
            with _signals_deferred(self.reporter):
                self._teardown(outcome)
                self._close_accounts()
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
            except RemoteError as exc:  # the machine vanished while being set up: a preemption, or a failure
                if self.session is None or self._state(self.session) != InstanceState.PREEMPTED:
                    raise
                self._after_preemption(f"{self.provider.name} preempted {self.session.instance.instance_id} ({exc})")
        failed = [i for i in self.record.latest_items() if i.status != STATUS_COMPLETE]
        if self.abort_reason:
            self._finish(STATUS_FAILED, self.abort_reason)
        elif failed:
            labels = ", ".join(f"{i.workload} [{i.backend}] ({i.status})" for i in failed)
            self._finish(STATUS_FAILED, f"{len(failed)} of {len(self.plan.items)} container runs failed: {labels}")
        else:
            self._finish(STATUS_COMPLETE, f"all {len(self.plan.items)} container runs complete")

    def _pending(self) -> list[WorkItem]:
        if self.abort_reason:
            return []
        return [item for item in self.plan.items if item not in self.done]

    def _start_session(self) -> _Session:
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
                install=self.plan.install_host_software or self.provider.creates_machines,
                driver_wait_s=self.plan.boot_timeout_s if self.provider.creates_machines else 0.0,
            )
            detail.append(", ".join(f"installed {w}" for w in session.info.installed) or "ready")
        with self._stage("image") as detail:
            session.image = self._ensure_image(session)
            detail.append(f"{session.image.how}: {session.image.digest[:19]}")
            self.record.image_digest = session.image.digest
            self._seed_dataset_cache(session)
        self.record.status = STATUS_RUNNING
        self._save()
        return session

    def _launch(self) -> tuple[Instance, InstanceRecord]:
        plan = self.plan
        tags = {
            "project": PROJECT_TAG,
            "run-id": plan.run_id,
            "owner": plan.owner,
            "profile": plan.profile.name,
            "expiry": str(int(time.time() + plan.max_lifetime_s)),
        }
        failures: list[str] = []
        with self._stage("launch") as detail:
            for zone in plan.profile.zones or (None,):
                request = LaunchRequest(plan.run_id, plan.profile, zone, plan.spot, plan.max_lifetime_s, tags)
                asked_at = time.time()
                try:
                    instance = self.provider.launch(request)
                except CapacityError as exc:
                    failures.append(f"{zone}: {exc}")
                    self.reporter.note(f"no capacity in {zone}: {exc}; trying the next zone")
                    continue
                record = InstanceRecord(
                    provider=self.provider.name,
                    instance_id=instance.instance_id,
                    zone=instance.zone,
                    spot=instance.spot,
                    launched_at=instance.launched_at or asked_at,
                )
                self.record.instances.append(record)
                self._save()  # the machine exists: record it before anything else can fail
                detail.append(f"{instance.instance_id}{f' in {zone}' if zone else ''}")
                return instance, record
        raise LifecycleError(
            f"no capacity for {plan.profile.name} in any of its zones ({'; '.join(failures)}); "
            "try later, another profile, or --on-demand"
        )

    def _connect(self, instance: Instance) -> Host:
        if self.provider.runs_locally:
            return LocalHost()
        if instance.ssh is None:
            raise LifecycleError(f"provider {self.provider.name} returned no SSH address for {instance.instance_id}")
        host = SSHHost(
            instance.ssh,
            ssh_config=self.plan.ssh_config,
            verify_known_hosts=not self.provider.creates_machines,  # fresh machines reuse addresses
        )
        wait_for_ssh(
            host,
            self.plan.ssh_timeout_s,
            on_retry=lambda e: self.reporter.note(f"SSH not ready: {e}"),
            retry_auth=self.provider.creates_machines,
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

    def _seed_dataset_cache(self, session: _Session) -> None:
        """An image that bakes the datasets in would hide them under the mounted cache: copy them out once."""
        host, info, image = session.host, session.info, session.image
        assert host is not None and info is not None and image is not None
        if not image.bakes_datasets or not image.keras_home:
            return
        marker = f"{info.cache_dir}/.seeded-{image.image_id.removeprefix('sha256:')[:12]}"
        if host.run(f"test -e {shlex.quote(marker)}", check=False).exit_code == 0:
            return
        host.run(
            f"{info.docker} run --rm --user {info.uid}:{info.gid} -v {shlex.quote(info.cache_dir)}:/seed "
            f"--entrypoint sh {shlex.quote(image.ref)} -c "
            + shlex.quote(f'cp -Rn "{image.keras_home}"/. /seed/ && touch /seed/{marker.rsplit("/", 1)[1]}'),
            timeout=600,
        )

    # ---- workloads ---------------------------------------------------------------------------------------

    def _run_items(self) -> None:
        for item in self._pending():
            self._run_item(item)

    def _run_item(self, item: WorkItem) -> None:
        session = self.session
        assert session is not None and session.host is not None and session.info is not None
        attempt = len(self.sessions)
        item_record = ItemRecord(item.workload, item.backend, status="running", started_at=time.time())
        item_record.attempt = attempt
        self.record.items.append(item_record)
        self._save()
        self.reporter.item_started(item.label)
        stage = StageRecord("workload", time.time(), detail=item.label)
        self.record.stages.append(stage)
        console = self.plan.orchestrator_dir / f"{item.stem}.console.log"
        name = item.container_name(self.plan.run_id)
        session.running_container = name
        try:
            with console.open("ab") as output:
                code = session.host.stream(
                    self._docker_run_command(item, session),
                    output,
                    poll=self._poller(session, item),
                    poll_interval_s=SPOT_PULL_INTERVAL_S if self.plan.spot else STATE_POLL_INTERVAL_S,
                )
        except ConnectionLost as exc:
            stage.ended_at = time.time()
            self._check_preempted(session, item, item_record, str(exc))
            raise LifecycleError(f"lost the SSH connection during {item.label}: {exc}") from exc
        except InstancePreempted:
            stage.ended_at = time.time()
            item_record.status, item_record.ended_at = "preempted", time.time()
            raise
        finally:
            session.running_container = None
        stage.ended_at = item_record.ended_at = time.time()
        item_record.exit_code = code
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

    def _docker_run_command(self, item: WorkItem, session: _Session) -> str:
        info, image, plan = session.info, session.image, self.plan
        assert info is not None and image is not None
        keras_home = image.keras_home or DEFAULT_KERAS_HOME
        parts = [
            *shlex.split(info.docker),
            "run",
            "--rm",
            "--name",
            item.container_name(plan.run_id),
            "--user",
            f"{info.uid}:{info.gid}",  # files it writes belong to the SSH user, who pulls and deletes them
            "-e",
            "HOME=/tmp",  # that user has no home in the image
            "-e",
            f"KERAS_HOME={keras_home}",
            "-e",
            f"BENCH_IMAGE_DIGEST={image.digest}",
            "-v",
            f"{info.logs_dir(plan.run_id)}:/logs",
            "-v",
            f"{info.cache_dir}:{keras_home}",
            "--label",
            f"project={PROJECT_TAG}",
            "--label",
            f"run-id={plan.run_id}",
        ]
        if plan.profile.has_gpu:
            parts += ["--gpus", "all"]
        parts += [image.ref, item.workload, "--backend", item.backend, "--platform", plan.platform]
        parts += ["--suite", plan.suite, "--run-id", plan.run_id, "--out", "/logs"]
        if plan.allow_synthetic:
            parts.append("--allow-synthetic")
        parts += list(plan.runner_args)
        return shlex.join(parts)

    def _poller(self, session: _Session, item: WorkItem) -> Callable[[], None]:
        def poll() -> None:
            if self._state(session) == InstanceState.PREEMPTED:
                raise InstancePreempted(f"{self.provider.name} preempted {session.instance.instance_id}")
            if self.plan.spot:
                self._pull_logs(session, item)  # keep what a preemption would otherwise take with it

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
        self._end_session(session, [], [], reachable=False)
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
            stem = f"{record.workload}_{record.backend}"
            for path in sorted(self.plan.run_logs.glob(f"{stem}*")):
                if path.is_file() and path.suffix in (".csv", ".json"):
                    target.mkdir(parents=True, exist_ok=True)
                    moved = path.replace(target / path.name)
                    record.logs.append(str(moved))

    # ---- teardown ----------------------------------------------------------------------------------------

    def _teardown(self, outcome: Outcome) -> None:
        stage = StageRecord("teardown", time.time())
        self.record.stages.append(stage)
        self.reporter.stage_started("teardown")
        for session in self.sessions:
            if session.record.terminated_at is None:
                self._end_session(session, outcome.torn_down, outcome.teardown_failures)
        self._sweep_own_instances(outcome)
        self._release(outcome)
        stage.ended_at = time.time()
        status = "failed" if outcome.teardown_failures else "done"
        self.reporter.stage_finished("teardown", stage.seconds or 0.0, status)

    def _end_session(
        self, session: _Session, torn_down: list[str], failures: list[str], reachable: bool = True
    ) -> None:
        """Stop the container, pull what it wrote, clean the host, terminate the machine. Never raises."""
        host = session.host
        if reachable and host is not None and session.info is not None:
            self._stop_containers(session, torn_down, failures)
            try:
                self._pull_logs(session)
            except (RemoteError, OSError) as exc:
                failures.append(f"could not pull the last logs from {host.description}: {exc}")
            if not self.provider.creates_machines:  # a rented machine takes its disk with it
                try:
                    clean_run_dir(host, session.info, self.plan.run_id)
                    torn_down.append(f"removed {session.info.run_dir(self.plan.run_id)} on {host.description}")
                except RemoteError as exc:
                    failures.append(f"could not remove the run folder on {host.description}: {exc}")
        if host is not None:
            host.close()
        try:
            self.provider.terminate(session.instance)
            if self.provider.creates_machines:
                zone = f" in {session.instance.zone}" if session.instance.zone else ""
                torn_down.append(f"terminated {self.provider.name} instance {session.instance.instance_id}{zone}")
        except ProviderError as exc:
            failures.append(f"could not terminate {session.instance.instance_id}: {exc}")
        finally:
            session.record.terminated_at = time.time()

    def _stop_containers(self, session: _Session, torn_down: list[str], failures: list[str]) -> None:
        """Stop every container of this run on the host (the one running now, and any a cut-short start left)."""
        host, info = session.host, session.info
        assert host is not None and info is not None
        pattern = shlex.quote(f"name=^{self.plan.run_id}-")
        try:
            listed = host.run(f"{info.docker} ps -a --filter {pattern} --format '{{{{.Names}}}}'", timeout=60)
        except RemoteError as exc:
            if session.running_container:
                failures.append(f"could not reach {host.description} to stop {session.running_container}: {exc}")
            return
        for name in listed.stdout.split():
            # SIGTERM first: the runner records the run as partial and keeps its finished epochs
            result = host.run(f"{info.docker} stop -t {STOP_GRACE_S} {name}", check=False, timeout=STOP_GRACE_S + 60)
            host.run(f"{info.docker} rm -f {name}", check=False, timeout=60)
            if result.exit_code == 0:
                torn_down.append(f"stopped container {name} on {host.description}")
            elif "No such container" not in result.stderr:  # --rm removed it as it ended: nothing to stop
                failures.append(f"could not stop container {name} on {host.description}: {result.stderr.strip()}")

    def _sweep_own_instances(self, outcome: Outcome) -> None:
        """An interrupt during `launch` can leave a machine the run never heard of: find it by its tag."""
        if not self.provider.creates_machines:
            return
        known = {s.instance.instance_id for s in self.sessions}
        try:
            strays = [i for i in self.provider.list_instances() if i.tags.get("run-id") == self.plan.run_id]
        except ProviderError as exc:
            outcome.teardown_failures.append(f"could not list {self.provider.name} instances: {exc}")
            return
        for instance in strays:
            if instance.instance_id in known:
                continue
            try:
                self.provider.terminate(instance)
                outcome.torn_down.append(f"terminated stray instance {instance.instance_id}")
                self.record.instances.append(
                    InstanceRecord(
                        provider=self.provider.name,
                        instance_id=instance.instance_id,
                        zone=instance.zone,
                        spot=instance.spot,
                        launched_at=instance.launched_at or self.record.started_at,
                        terminated_at=time.time(),
                    )
                )
            except ProviderError as exc:
                outcome.teardown_failures.append(f"could not terminate {instance.instance_id}: {exc}")

    def _release(self, outcome: Outcome) -> None:
        try:
            self.provider.release_run(self.plan.run_id)
            if self.provider.creates_machines:
                outcome.torn_down.append(f"released {self.provider.name} resources of run {self.plan.run_id}")
        except ProviderError as exc:
            outcome.teardown_failures.append(f"could not release run resources: {exc}")

    # ---- bookkeeping -------------------------------------------------------------------------------------

    def _finish(self, status: str, message: str) -> None:
        self.record.status = status
        self.record.message = message
        for item in self.record.items:
            if item.status == "running":
                item.status = "interrupted" if status == STATUS_INTERRUPTED else STATUS_FAILED
                item.ended_at = time.time()

    def _close_accounts(self) -> None:
        total_billed, total_cost = 0, 0.0
        has_price = True
        for instance in self.record.instances:
            if not self.provider.creates_machines:
                continue
            end = instance.terminated_at or time.time()
            instance.billed_seconds = self.plan.profile.billed_seconds(end - instance.launched_at)
            instance.cost_usd = self.plan.profile.cost_usd(end - instance.launched_at, spot=instance.spot)
            total_billed += instance.billed_seconds
            if instance.cost_usd is None:
                has_price = False
            else:
                total_cost += instance.cost_usd
        self.record.billed_seconds = total_billed
        self.record.estimated_cost_usd = total_cost if self.provider.creates_machines and has_price else None
        self.record.ended_at = time.time()

    def _save(self) -> None:
        self.ledger.append(self.record)

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
        try:
            yield detail
        except BaseException:
            stage.ended_at = time.time()
            stage.detail = "; ".join(detail)
            self.reporter.stage_finished(name, stage.seconds or 0.0, "failed", stage.detail)
            raise
        stage.ended_at = time.time()
        stage.detail = "; ".join(detail)
        self.reporter.stage_finished(name, stage.seconds or 0.0, "done", stage.detail)


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


def timed_epoch_seconds(paths: list[str]) -> float:
    """Sum of the `elapsed` column of the epoch CSVs among `paths` (the time the benchmark measures)."""
    total = 0.0
    for path in paths:
        if path.endswith(".csv") and "/preempted/" not in path:
            with contextlib.suppress(LogFormatError):
                total += read_epoch_log(path, with_metadata=False).total_elapsed
    return total
