"""One Slurm cluster seen from its login node over SSH (Fabric): the client commands and what they print, parsed.

Task states come from `scontrol -o show job` while the controller still holds the job (MinJobAge, 300 s by default),
then from the accounting database (`sacct`) where the cluster has one, else from the job completion log
(`JobCompType=jobcomp/filetxt`) where the login node can read it; each task's own exit record on the shared file
system says how its work item ended. Times are the login node's local time, read with its UTC offset.
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from orchestrate.private_files import UMASK
from orchestrate.provider import (
    TASK_CANCELLED,
    TASK_COMPLETE,
    TASK_ENDED,
    TASK_FAILED,
    TASK_PENDING,
    TASK_RUNNING,
    ProviderError,
    SSHTarget,
    TaskState,
)
from orchestrate.remote import Host, RemoteError, SSHHost, wait_for_ssh

CONNECT_TIMEOUT_S = 60.0
PENDING_STATES = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "RESV_DEL_HOLD", "SPECIAL_EXIT"}
RUNNING_STATES = {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "RESIZING"}
CANCELLED_STATES = {"CANCELLED", "REVOKED"}
RECORD_FIELD = re.compile(r"(\w+)=(\S*)")


@dataclass
class JobRecord:
    """One array task as a Slurm record (scontrol, sacct or the completion log) states it."""

    task: int
    state: str  # Slurm's word: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT...
    exit_code: int | None = None
    start: float | None = None
    end: float | None = None
    restarts: int = 0
    reason: str = ""

    def as_task(self, exit_record: int | None) -> TaskState:
        """The task as the lifecycle sees it; `exit_record` is its item's own exit code (None: not ended)."""
        state = task_state(self.state)
        ended = state in TASK_ENDED
        if ended and state != TASK_CANCELLED:
            # every item ends with its exit record: the record, not Slurm's word for the script, says how it ended
            state = TASK_COMPLETE if exit_record == 0 else TASK_FAILED
        return TaskState(
            index=self.task,
            state=state,
            exit_code=(exit_record if exit_record is not None else self.exit_code) if ended else None,
            started_at=self.start,
            ended_at=self.end if ended else None,
            restarts=self.restarts,
            reason=self.reason,
            item_exit_code=exit_record,
        )


def task_state(slurm_state: str) -> str:
    word = slurm_state.split()[0].rstrip("+") if slurm_state else ""
    if word in PENDING_STATES:
        return TASK_PENDING
    if word in RUNNING_STATES:
        return TASK_RUNNING
    if word == "COMPLETED":
        return TASK_COMPLETE
    if word in CANCELLED_STATES:
        return TASK_CANCELLED
    return TASK_FAILED  # FAILED, TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, BOOT_FAIL, DEADLINE, PREEMPTED


@dataclass
class Cluster:
    """The login node of one cluster; commands run there with the cluster's SLURM_CONF where one is named."""

    login: SSHTarget
    slurm_conf: str | None = None
    ssh_config: Path | None = None
    _host: SSHHost | None = field(default=None, repr=False)
    _utc_offset: dt.timezone | None = field(default=None, repr=False)

    @property
    def host(self) -> Host:
        if self._host is None:
            host = SSHHost(self.login, ssh_config=self.ssh_config)
            wait_for_ssh(host, CONNECT_TIMEOUT_S)
            self._host = host
        return self._host

    def close(self) -> None:
        if self._host is not None:
            self._host.close()
            self._host = None

    def run(self, command: str, *, check: bool = True, timeout: float = 120) -> str:
        """A command on the login node, where whatever it creates is the user's alone (umask 077, which sbatch also
        passes to the job: docs/slurm.md, "Who sees a run's files")."""
        prefix = f"{UMASK}; " + (f"export SLURM_CONF={shlex.quote(self.slurm_conf)}; " if self.slurm_conf else "")
        try:
            return self.host.run(prefix + command, check=check, timeout=timeout).stdout
        except RemoteError as exc:
            raise ProviderError(f"{self.login.display()}: {exc}") from exc

    def write_file(self, path: str, text: str) -> None:
        delimiter = "KCB_END_OF_FILE"
        assert delimiter not in text
        self.run(f"cat > {shlex.quote(path)} <<'{delimiter}'\n{text}\n{delimiter}")

    # ---- the scheduler ---------------------------------------------------------------------------------------

    def partitions(self) -> list[str]:
        return [line.strip().rstrip("*") for line in self.run("sinfo -h -o %P").splitlines() if line.strip()]

    def partition_nodes(self, partition: str) -> tuple[int, int | None]:
        """(the nodes partition holds, the most one job may have: its MaxNodes, None when unlimited)."""
        out = self.run(f"scontrol -o show partition {shlex.quote(partition)} 2>&1", check=False)
        fields = dict(RECORD_FIELD.findall(out))
        if "TotalNodes" not in fields:
            raise ProviderError(
                f"{self.login.display()}: scontrol shows no partition {partition!r}: {out.strip()[:200]}"
            )
        most = fields.get("MaxNodes", "UNLIMITED")
        return int(fields["TotalNodes"]), int(most) if most.isdigit() else None

    def submit(self, flags: list[str], script: str) -> str:
        """`sbatch --parsable`: the job id."""
        out = self.run(f"sbatch {' '.join(shlex.quote(flag) for flag in flags)} {shlex.quote(script)}")
        job_id = out.strip().split(";")[0]
        if not job_id.isdigit():
            raise ProviderError(f"sbatch on {self.login.display()} printed no job id: {out.strip()[:200]}")
        return job_id

    def cancel(self, job_id: str) -> None:
        """`scancel` of the whole array; a job the controller no longer knows is already gone."""
        out = self.run(f"scancel {shlex.quote(job_id)} 2>&1; echo exit=$?")
        if not out.rstrip().endswith("exit=0") and "Invalid job id" not in out:
            raise ProviderError(f"scancel {job_id} on {self.login.display()}: {out.strip()[:300]}")

    def queued_jobs(self) -> list[tuple[str, str, str]]:
        """(array job id, name, comment) of every job of this user in the queue, once per array."""
        out = self.run("squeue -h --me -r -o '%F|%j|%k'")
        seen: dict[str, tuple[str, str, str]] = {}
        for line in out.splitlines():
            parts = line.split("|", 2)
            if len(parts) == 3:
                seen.setdefault(parts[0], (parts[0], parts[1], parts[2]))
        return list(seen.values())

    def job_records(self, job_id: str, size: int) -> dict[int, JobRecord]:
        """The array's tasks: live from the controller, ended ones it dropped from accounting or the completion log."""
        records = self._controller_records(job_id, size)
        missing = [task for task in range(size) if task not in records]
        if missing:
            for record in self._finished_records(job_id):
                if record.task in missing:
                    records[record.task] = record
        return records

    def _controller_records(self, job_id: str, size: int) -> dict[int, JobRecord]:
        out = self.run(f"scontrol -o show job {shlex.quote(job_id)} 2>&1", check=False)
        if "Invalid job id" in out:
            return {}
        records: dict[int, JobRecord] = {}
        for line in out.splitlines():
            fields = dict(RECORD_FIELD.findall(line))
            if "JobState" not in fields or fields.get("ArrayJobId") != job_id:
                continue
            for task in _task_ids(fields.get("ArrayTaskId", ""), size):
                records[task] = JobRecord(
                    task=task,
                    state=fields["JobState"],
                    exit_code=_exit_code(fields.get("ExitCode", "")),
                    start=self._time(fields.get("StartTime", "")),
                    end=self._time(fields.get("EndTime", "")),
                    restarts=int(fields.get("Restarts", "0") or 0),
                    reason=fields.get("Reason", ""),
                )
        return records

    def attempt_records(self, job_id: str) -> list[JobRecord]:
        """Every attempt of every task that ran (a requeue's included), from accounting or the completion log; a
        requeue of an ended task writes its attempt again with a later end: the first end of an attempt is kept."""
        first: dict[tuple[int, float], JobRecord] = {}
        for record in self._finished_records(job_id, duplicates=True):
            if record.start is None or record.end is None:
                continue
            key = (record.task, record.start)
            if key not in first or record.end < (first[key].end or 0):
                first[key] = record
        return sorted(first.values(), key=lambda r: (r.task, r.start or 0))

    def _finished_records(self, job_id: str, duplicates: bool = False) -> list[JobRecord]:
        config = self.config()
        if config.get("AccountingStorageType", "accounting_storage/none") != "accounting_storage/none":
            every = " --duplicates" if duplicates else ""
            out = self.run(
                f"sacct -n -P -X{every} -j {shlex.quote(job_id)} -o JobID,State,ExitCode,Start,End", check=False
            )
            return [r for r in (self._sacct_record(line) for line in out.splitlines()) if r is not None]
        location = config.get("JobCompLoc", "")
        if config.get("JobCompType") == "jobcomp/filetxt" and location.startswith("/"):
            out = self.run(f"grep -F ' ArrayJobId={job_id} ' {shlex.quote(location)} 2>/dev/null", check=False)
            return [self._jobcomp_record(line) for line in out.splitlines() if "ArrayTaskId=" in line]
        return []

    def _sacct_record(self, line: str) -> JobRecord | None:
        parts = line.split("|")
        if len(parts) != 5 or "_" not in parts[0] or not parts[0].rsplit("_", 1)[1].isdigit():
            return None
        return JobRecord(
            task=int(parts[0].rsplit("_", 1)[1]),
            state=parts[1],
            exit_code=_exit_code(parts[2]),
            start=self._time(parts[3]),
            end=self._time(parts[4]),
        )

    def _jobcomp_record(self, line: str) -> JobRecord:
        fields = dict(RECORD_FIELD.findall(line))
        return JobRecord(
            task=int(fields["ArrayTaskId"]),
            state=fields.get("JobState", ""),
            exit_code=_exit_code(fields.get("ExitCode", "")),
            start=self._time(fields.get("StartTime", "")),
            end=self._time(fields.get("EndTime", "")),
        )

    def config(self) -> dict[str, str]:
        out = self.run("scontrol show config", check=False)
        pairs = (line.split("=", 1) for line in out.splitlines() if " = " in line)
        return {key.strip(): value.strip() for key, value in pairs}

    def _time(self, text: str) -> float | None:
        """Slurm's local `2026-11-28T04:14:28` as epoch seconds (None for Unknown, None, N/A)."""
        try:
            naive = dt.datetime.fromisoformat(text)
        except ValueError:
            return None
        if self._utc_offset is None:
            offset = self.run("date +%z").strip()  # +0100
            sign = -1 if offset.startswith("-") else 1
            minutes = int(offset[1:3]) * 60 + int(offset[3:5])
            self._utc_offset = dt.timezone(dt.timedelta(minutes=sign * minutes))
        return naive.replace(tzinfo=self._utc_offset).timestamp()


def _task_ids(text: str, size: int) -> list[int]:
    """`3`, `0-4`, `1,3-5`, `2-9%4` (a throttle): the task ids a record stands for."""
    ids: list[int] = []
    for part in text.split("%")[0].split(","):
        if "-" in part:
            low, high = part.split("-", 1)
            if low.isdigit() and high.isdigit():
                ids += range(int(low), int(high) + 1)
        elif part.isdigit():
            ids.append(int(part))
    return [task for task in ids if task < size]


def _exit_code(text: str) -> int | None:
    """Slurm's `code:signal`: the code, or 128 + the signal when a signal ended it."""
    code, _, signal = text.partition(":")
    if not code.isdigit():
        return None
    return 128 + int(signal) if signal.isdigit() and int(signal) else int(code)
