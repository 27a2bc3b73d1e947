"""Slurm clusters: the run is one job array submitted from the cluster's login node over SSH (Fabric).

A launch carries the run's payload (the user's workload files and data folder, if any) to the run's folder on the
cluster's shared file system, writes the batch script (`orchestrate.providers.slurm.script`) there and submits it
with `sbatch`: one array task per item of the run's spec (workload x backend x repeat), with the profile's
partition, GPUs, CPUs, memory, time limit and account. The Instance is that array: `state` and `tasks` read the
scheduler (`orchestrate.providers.slurm.cluster`), `terminate` is `scancel` of the whole array, `release_run`
deletes the run's folder once its logs are pulled. The job's name (`kcb-<run id>`) and comment (the run's tags)
carry the run id, so `orchestrate sweep` finds and cancels what a killed orchestrator left; the folders under
`<shared_dir>/runs/` are the per-run resources it releases.

Which clusters: those of the profiles a run validated, else (the sweep) every slurm profile of the catalogs, or the
one named by `--provider-setting login=...` (with `shared_dir=`, `slurm_conf=`). Settings: `ssh_config` (a file
replacing ~/.ssh/config for the login), `login`, `shared_dir`, `slurm_conf`.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import ClassVar, Self

from orchestrate.capabilities import BatchQueue
from orchestrate.containers import deliver_payload
from orchestrate.provider import (
    PROJECT_TAG,
    TASK_ENDED,
    TASK_PENDING,
    Capability,
    CredentialsError,
    Instance,
    InstanceState,
    LaunchRequest,
    Provider,
    ProviderError,
    TaskState,
    UnreachableError,
)
from orchestrate.providers.slurm.cluster import Cluster, task_state
from orchestrate.providers.slurm.script import batch_script, job_name, parse_comment, run_folder, sbatch_flags
from orchestrate.providers.slurm.settings import SlurmSettings, settings_of, slurm_time
from orchestrate.providers.ssh import parse_target
from orchestrate.remote import RemoteError
from records.catalog import Price, Profile

SETTINGS = ("ssh_config", "login", "shared_dir", "slurm_conf")
TASK_LINE = re.compile(r"^  (\d+)\)  # (.+)$", re.MULTILINE)  # batch_script's case of one task
STOP_WAIT_S = 60.0  # after scancel: the tasks' containers stop (their grace) before teardown goes on


class SlurmProvider(Provider, BatchQueue):
    name: ClassVar[str] = "slurm"
    host_capabilities: ClassVar[frozenset[Capability]] = frozenset({Capability.BILLABLE, Capability.LEFTOVERS})
    settings: ClassVar[tuple[str, ...]] = SETTINGS

    def __init__(
        self, ssh_config: Path | None = None, clusters: Mapping[str, tuple[str, str | None]] | None = None
    ) -> None:
        self.ssh_config = ssh_config
        # login (as written) -> (shared_dir, slurm_conf): the clusters this provider looks at
        self.known: dict[str, tuple[str, str | None]] = dict(clusters or {})
        self._clusters: dict[str, Cluster] = {}
        self.profiles: dict[str, Profile] = {}  # validated for a run: their partitions are checked with the login
        self._explicit = bool(clusters)

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> Self:
        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise ProviderError(f"provider 'slurm' has no setting {', '.join(unknown)}; it takes {', '.join(SETTINGS)}")
        ssh_config = Path(settings["ssh_config"]).expanduser() if settings.get("ssh_config") else None
        clusters: dict[str, tuple[str, str | None]] = {}
        if settings.get("login"):
            if not settings.get("shared_dir"):
                raise ProviderError("provider 'slurm': login= needs shared_dir= (the cluster's shared folder)")
            parse_target(settings["login"])  # a malformed login fails here
            clusters[settings["login"]] = (settings["shared_dir"].rstrip("/"), settings.get("slurm_conf"))
        return cls(ssh_config, clusters)

    def describe(self) -> str:
        return "Slurm " + (", ".join(sorted(self.known)) or "clusters of the catalog's slurm profiles")

    def validate_profile(self, profile: Profile) -> None:
        settings = settings_of(profile)
        self.known.setdefault(settings.cluster, (settings.shared_dir, settings.slurm_conf))
        self.profiles[profile.name] = profile
        self._explicit = True

    # ---- the clusters ----------------------------------------------------------------------------------------

    def _all_known(self) -> dict[str, tuple[str, str | None]]:
        """The clusters to look at: those named, else every slurm profile's (the sweep builds this with none)."""
        if not self._explicit:
            from records.catalog import load_catalogs  # the sweep's case only: every profile of the catalogs

            for profile in load_catalogs().values():
                if profile.provider == self.name and not profile.retired:
                    try:
                        settings = settings_of(profile)
                    except ProviderError:
                        continue  # a broken profile is reported when it is run
                    self.known.setdefault(settings.cluster, (settings.shared_dir, settings.slurm_conf))
            self._explicit = True
        return self.known

    def _cluster(self, login: str, slurm_conf: str | None) -> Cluster:
        key = f"{login}|{slurm_conf or ''}"
        if key not in self._clusters:
            self._clusters[key] = Cluster(parse_target(login), slurm_conf, self.ssh_config)
        return self._clusters[key]

    def _cluster_of(self, instance: Instance) -> Cluster:
        private = self._located(instance).private
        return self._cluster(private["login"], private.get("slurm_conf") or None)

    def _located(self, instance: Instance) -> Instance:
        """The job as `launch` returned it, from the ledger's `<login>:<job>` alone where that is all the caller has
        (the sweep billing a job that left the queue after its orchestrator died): the login's shared folder and
        SLURM_CONF from the clusters known, the array's size from the records of its tasks."""
        if "login" in instance.private:
            return instance
        login, _, job_id = instance.instance_id.rpartition(":")
        if login not in self._all_known() or not job_id.isdigit():
            raise ProviderError(f"{instance.instance_id}: not a job of a known Slurm cluster (<login>:<job id>)")
        shared_dir, slurm_conf = self.known[login]
        settings = SlurmSettings(parse_target(login), "", shared_dir, slurm_conf=slurm_conf)
        size = self._size(self._cluster(login, slurm_conf), job_id)
        return replace(instance, private=_private(settings, job_id, "", size))

    # ---- Provider --------------------------------------------------------------------------------------------

    def check_credentials(self) -> None:
        """Log in to each cluster's login node and ask its controller: a refused login is a credentials error,
        an unreachable host or controller another; a profile's partition must exist."""
        clusters = self._all_known()
        if not clusters:
            raise CredentialsError("no Slurm cluster is named (no slurm profile in the catalogs)")
        for login, (_, slurm_conf) in clusters.items():
            cluster = self._cluster(login, slurm_conf)
            try:
                partitions = cluster.partitions()
            except RemoteError as exc:  # wait_for_ssh gave up
                raise UnreachableError(f"cannot log in to the Slurm login node {login}: {exc}") from exc
            except ProviderError as exc:
                raise UnreachableError(f"the Slurm controller of {login} does not answer: {exc}") from exc
            if not partitions:
                raise CredentialsError(f"{login}: sinfo lists no partition this user may submit to")
        for profile in self.profiles.values():
            self.check_partition(profile)

    def check_partition(self, profile: Profile) -> None:
        settings = settings_of(profile)
        partitions = self._cluster(settings.cluster, settings.slurm_conf).partitions()
        if settings.partition not in partitions:
            raise ProviderError(
                f"profile '{profile.name}': extra.partition: {settings.login.display()} has no partition "
                f"{settings.partition!r}; it has {', '.join(partitions) or 'none'}"
            )

    def launch(self, request: LaunchRequest) -> Instance:
        if request.batch is None or not request.batch.items:
            raise ProviderError("a Slurm launch needs the run's work items (LaunchRequest.batch)")
        settings = settings_of(request.profile)
        self.validate_profile(request.profile)
        self.check_partition(request.profile)
        self.check_nodes(request.profile, request.batch.nodes)
        cluster = self._cluster(settings.cluster, settings.slurm_conf)
        folder = run_folder(settings, request.run_id)
        # Slurm opens each task's output file before the script runs: its folder must exist
        consoles = f"{folder}/logs/{request.batch.platform}/{request.run_id}/orchestrate"
        cluster.run(f"mkdir -p {shlex.quote(folder)}/tasks {shlex.quote(consoles)} && chmod 700 {shlex.quote(folder)}")
        # the tags first: from here until release_run the sweep can find the folder (leftover_runs)
        cluster.write_file(f"{folder}/run.json", json.dumps(request.tags, sort_keys=True))
        if request.batch.payload is not None:  # every task mounts it: carried before the job is queued
            try:
                deliver_payload(cluster.host, folder, request.batch.payload)
            except RemoteError as exc:
                raise ProviderError(f"{cluster.login.display()}: {exc}") from exc
        cluster.write_file(f"{folder}/job.sh", batch_script(settings, request.run_id, request.batch))
        flags = sbatch_flags(settings, request.run_id, request.tags, request.batch, slurm_time(request.max_lifetime_s))
        submitted_at = time.time()
        job_id = cluster.submit(flags, f"{folder}/job.sh")
        return Instance(
            provider=self.name,
            instance_id=f"{settings.cluster}:{job_id}",
            zone=None,
            ssh=settings.login,
            launched_at=submitted_at,
            tags=dict(request.tags),
            private=_private(settings, job_id, request.batch.platform, len(request.batch.items)),
        )

    def wait_until_running(self, instance: Instance, timeout_s: float) -> Instance:
        """The job is in the queue once sbatch returned: nothing to wait for but the login."""
        self._cluster_of(instance).host  # noqa: B018 - connects (bounded by the login's own wait)
        return instance

    def state(self, instance: Instance) -> InstanceState:
        """RUNNING while any task is queued or running (the job holds or will hold an allocation)."""
        tasks = self.tasks(instance)
        if any(task.state not in TASK_ENDED for task in tasks):
            return InstanceState.RUNNING
        return InstanceState.TERMINATED

    def terminate(self, instance: Instance) -> None:
        """`scancel` of the whole array, then a bounded wait for its running tasks to stop. Idempotent."""
        instance = self._located(instance)
        cluster = self._cluster_of(instance)
        job_id = instance.private["job"]
        cluster.cancel(job_id)
        deadline = time.monotonic() + STOP_WAIT_S
        while time.monotonic() < deadline:
            records = cluster.job_records(job_id, int(instance.private.get("size", "1")))
            if all(record.state.split()[0] not in ("RUNNING", "COMPLETING") for record in records.values()):
                return
            time.sleep(2)
        raise ProviderError(f"job {job_id} on {cluster.login.display()} still runs {STOP_WAIT_S:g} s after scancel")

    def list_instances(self) -> list[Instance]:
        """Every job array in the queue whose comment carries the project tag, on every known cluster."""
        found: list[Instance] = []
        for login, (shared_dir, slurm_conf) in self._all_known().items():
            cluster = self._cluster(login, slurm_conf)
            for job_id, name, comment in cluster.queued_jobs():
                tags = parse_comment(comment)
                if tags.get("project") != PROJECT_TAG or name != job_name(tags.get("run-id", "")):
                    continue
                settings = SlurmSettings(parse_target(login), "", shared_dir, slurm_conf=slurm_conf)
                found.append(
                    Instance(
                        provider=self.name,
                        instance_id=f"{login}:{job_id}",
                        zone=None,
                        ssh=parse_target(login),
                        tags=tags,
                        private=_private(settings, job_id, "", self._size(cluster, job_id)),
                    )
                )
        return found

    def ended_at(self, instance: Instance) -> float | None:
        tasks = self.tasks(instance)
        if not tasks or any(task.state not in TASK_ENDED for task in tasks):
            return None
        ends = [task.ended_at for task in tasks if task.ended_at is not None]
        return max(ends) if ends else None

    def release_run(self, run_id: str) -> None:
        """Delete the run's folder on each cluster that has one (its logs were pulled first). Idempotent."""
        for login, (shared_dir, slurm_conf) in self._all_known().items():
            folder = f"{shared_dir}/runs/{run_id}"
            self._cluster(login, slurm_conf).run(f"rm -rf {shlex.quote(folder)}")

    def leftover_runs(self) -> dict[str, dict[str, str]]:
        """The run folders under each cluster's `<shared_dir>/runs/`, with the tags their run.json holds."""
        runs: dict[str, dict[str, str]] = {}
        for login, (shared_dir, slurm_conf) in self._all_known().items():
            out = self._cluster(login, slurm_conf).run(
                f'for f in {shlex.quote(shared_dir)}/runs/*/run.json; do [ -f "$f" ] && '
                'printf \'%s\\t%s\\n\' "$(basename "$(dirname "$f")")" "$(tr -d \'\\n\' < "$f")"; done; true'
            )
            for line in out.splitlines():
                run_id, _, text = line.partition("\t")
                try:
                    tags = json.loads(text)
                except ValueError:
                    tags = {}
                runs[run_id] = {k: str(v) for k, v in tags.items()} if isinstance(tags, dict) else {}
        return runs

    # ---- BatchQueue ------------------------------------------------------------------------------------------

    def tasks(self, instance: Instance) -> list[TaskState]:
        instance = self._located(instance)
        cluster = self._cluster_of(instance)
        size = int(instance.private.get("size", "1"))
        records = cluster.job_records(instance.private["job"], size)
        exits = self._exit_records(cluster, instance)
        states = []
        for task in range(size):
            record = records.get(task)
            if record is None:  # the controller forgot it and no record says how it ended: its exit record does
                code = exits.get(task)
                state = TASK_PENDING if code is None else ("complete" if code == 0 else "failed")
                states.append(TaskState(task, state, exit_code=code, reason="no job record", item_exit_code=code))
            else:
                states.append(record.as_task(exits.get(task)))
        return states

    def attempts(self, instance: Instance) -> list[TaskState]:
        records = self._cluster_of(instance).attempt_records(instance.private["job"])
        return [TaskState(r.task, task_state(r.state), r.exit_code, r.start, r.end, reason=r.state) for r in records]

    def _exit_records(self, cluster: Cluster, instance: Instance) -> dict[int, int]:
        folder = f"{instance.private['root']}/runs/{instance.tags.get('run-id', '')}/tasks"
        out = cluster.run(
            f'cd {shlex.quote(folder)} 2>/dev/null && for f in *.exit; do [ -f "$f" ] && '
            'echo "${f%.exit} $(cat "$f")"; done; true'
        )
        exits: dict[int, int] = {}
        for line in out.splitlines():
            task, _, code = line.partition(" ")
            if task.isdigit() and code.strip().lstrip("-").isdigit():
                exits[int(task)] = int(code)
        return exits

    def _size(self, cluster: Cluster, job_id: str) -> int:
        """The array's task count: from the queue, else (it left the queue) from the records of its tasks."""
        out = cluster.run(f"squeue -h -r -j {shlex.quote(job_id)} -o %K", check=False)
        ids = [int(line) for line in out.split() if line.isdigit()]
        ids = ids or [record.task for record in cluster.attempt_records(job_id)]
        return max(ids) + 1 if ids else 1

    def fetch_logs(self, instance: Instance, local_dir: Path) -> list[Path]:
        folder = f"{instance.private['root']}/runs/{instance.tags.get('run-id', '')}/logs"
        try:
            return self._cluster_of(instance).host.fetch_tree(folder, local_dir)
        except RemoteError as exc:
            raise ProviderError(f"could not pull {folder} from {instance.private['login']}: {exc}") from exc

    def host_record(self, instance: Instance) -> dict[str, str]:
        login = parse_target(instance.private["login"])
        record = {"root": instance.private["root"], "host": login.host, "scheduler": "slurm"}
        optional = (("user", login.user), ("port", login.port), ("key", login.key_filename))
        record.update({key: str(value) for key, value in optional if value})
        if self.ssh_config is not None:
            record["ssh_config"] = str(self.ssh_config)
        return record

    def submitted_job(
        self, profile: Profile, run_id: str, job_id: str, platform: str
    ) -> tuple[Instance, list[str]] | None:
        """The job as `launch` returned it, from the run's folder: its tags (run.json) and its tasks' labels (the
        batch script's `case` lines, `  <index>)  # <label>`)."""
        settings = settings_of(profile)
        self.validate_profile(profile)
        folder = run_folder(settings, run_id)
        cluster = self._cluster(settings.cluster, settings.slurm_conf)
        script = cluster.run(f"cat {shlex.quote(folder)}/job.sh 2>/dev/null; true")
        labels = dict(TASK_LINE.findall(script))
        if not labels:
            return None
        if sorted(int(index) for index in labels) != list(range(len(labels))):
            raise ProviderError(f"{folder}/job.sh on {settings.login.display()}: its tasks are not 0-{len(labels) - 1}")
        try:
            tags = json.loads(cluster.run(f"cat {shlex.quote(folder)}/run.json"))
        except ValueError as exc:
            raise ProviderError(f"{folder}/run.json on {settings.login.display()} is not JSON: {exc}") from exc
        instance = Instance(
            provider=self.name,
            instance_id=f"{settings.cluster}:{job_id.rsplit(':', 1)[-1]}",
            zone=None,
            ssh=settings.login,
            tags={str(k): str(v) for k, v in tags.items()},
            private=_private(settings, job_id.rsplit(":", 1)[-1], platform, len(labels)),
        )
        return instance, [labels[str(index)] for index in range(len(labels))]

    def allocation_price(self, profile: Profile, nodes: int = 1) -> Profile:
        """A node-hour price times the task's nodes; a GPU-hour price times its GPUs per node and its nodes."""
        settings = settings_of(profile)
        factor = nodes * (settings.gpus if settings.price_unit == "gpu-hour" else 1)
        if factor == 1 or profile.on_demand is None:
            return profile
        price = profile.on_demand
        parts = ([f"{settings.gpus} GPUs"] if settings.price_unit == "gpu-hour" else []) + (
            [f"{nodes} nodes"] if nodes > 1 else []
        )
        per_task = Price(price.usd_per_hour * factor, price.date, f"{price.source} (x{' x '.join(parts)})")
        return replace(profile, on_demand=per_task)

    def check_nodes(self, profile: Profile, nodes: int) -> None:
        """The partition must hold `nodes` nodes and let one job have them (its MaxNodes)."""
        if nodes == 1:
            return
        settings = settings_of(profile)
        cluster = self._cluster(settings.cluster, settings.slurm_conf)
        total, most = cluster.partition_nodes(settings.partition)
        where = f"partition {settings.partition!r} of {settings.login.display()}"
        if total < nodes:
            raise ProviderError(f"--nodes {nodes}: {where} has {total} node{'s' if total != 1 else ''}")
        if most is not None and most < nodes:
            raise ProviderError(f"--nodes {nodes}: {where} gives one job at most {most} nodes (MaxNodes)")


def _private(settings: SlurmSettings, job_id: str, platform: str, size: int) -> dict[str, str]:
    return {
        "login": settings.cluster,
        "slurm_conf": settings.slurm_conf or "",
        "root": settings.shared_dir,
        "job": job_id,
        "platform": platform,
        "size": str(size),
    }


__all__ = ["SlurmProvider"]
