"""The ledger: one JSON line per change of an orchestrated run, appended and flushed to disk at once.

A run's record is written before anything is launched, again as soon as an instance exists, after every
workload and at the end. A crash between launch and the end therefore still leaves a record naming the run,
its instances and its owner process: the sweep uses that to find machines nobody is tearing down. The last
line of a run id is its current state.

Location: `--ledger PATH`, else `$KCB_LEDGER`, else `~/.keras-cloud-bench/ledger.jsonl`: one ledger per user
and machine, so runs started from any checkout are seen by `orchestrate sweep` and `orchestrate cost`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LEDGER_ENV = "KCB_LEDGER"
SCHEMA_VERSION = 1

# Run status. "starting" and "running" are live; the others are final.
STATUS_STARTING = "starting"
STATUS_RUNNING = "running"
STATUS_COMPLETE = "complete"  # every workload finished
STATUS_FAILED = "failed"  # a workload or a stage failed; finished workloads' logs are kept
STATUS_INTERRUPTED = "interrupted"  # Ctrl-C / SIGTERM; torn down
FINAL_STATUSES = frozenset({STATUS_COMPLETE, STATUS_FAILED, STATUS_INTERRUPTED})


class LedgerError(ValueError):
    """A ledger line that cannot be read; the message names the file and line."""


def default_ledger_path() -> Path:
    env = os.environ.get(LEDGER_ENV)
    return Path(env).expanduser() if env else Path.home() / ".keras-cloud-bench" / "ledger.jsonl"


@dataclass
class InstanceRecord:
    provider: str
    instance_id: str
    zone: str | None
    spot: bool
    launched_at: float  # epoch seconds
    terminated_at: float | None = None
    billed_seconds: int | None = None
    cost_usd: float | None = None
    preempted: bool = False


@dataclass
class StageRecord:
    name: str  # validate, launch, connect, prepare, image, workload, pull_logs, teardown
    started_at: float
    ended_at: float | None = None
    detail: str = ""  # e.g. the workload x backend, or how the image got there

    @property
    def seconds(self) -> float | None:
        return None if self.ended_at is None else self.ended_at - self.started_at


@dataclass
class ItemRecord:
    workload: str
    backend: str
    status: str  # complete, failed, preempted, interrupted, skipped
    exit_code: int | None = None
    started_at: float | None = None
    ended_at: float | None = None
    attempt: int = 1
    logs: list[str] = field(default_factory=list)  # local paths pulled for this item


@dataclass
class RunRecord:
    run_id: str
    profile: str
    provider: str
    platform: str
    suite: str
    owner: str  # user@host that started it
    pid: int  # the orchestrator process (the sweep checks it on the same host)
    started_at: float
    status: str = STATUS_STARTING
    ended_at: float | None = None
    spot: bool = False
    image: str | None = None
    image_digest: str | None = None
    logs_dir: str | None = None
    instances: list[InstanceRecord] = field(default_factory=list)
    stages: list[StageRecord] = field(default_factory=list)
    items: list[ItemRecord] = field(default_factory=list)
    preemptions: int = 0
    billed_seconds: int = 0
    estimated_cost_usd: float | None = None
    message: str = ""

    @property
    def final(self) -> bool:
        return self.status in FINAL_STATUSES

    def latest_items(self) -> list[ItemRecord]:
        """One record per workload x backend: the last attempt (a rerun after preemption supersedes the first)."""
        return list({(i.workload, i.backend): i for i in self.items}.values())

    def to_json(self) -> dict[str, Any]:
        data = _asdict(self)
        data["schema_version"] = SCHEMA_VERSION
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRecord:
        data = {k: v for k, v in data.items() if k != "schema_version"}
        data["instances"] = [InstanceRecord(**i) for i in data.get("instances", [])]
        data["stages"] = [StageRecord(**s) for s in data.get("stages", [])]
        data["items"] = [ItemRecord(**i) for i in data.get("items", [])]
        return cls(**data)


def _asdict(record: RunRecord) -> dict[str, Any]:
    # dataclasses.asdict deep-copies; plain vars() keeps it cheap and the nested dataclasses explicit
    data = dict(vars(record))
    data["instances"] = [dict(vars(i)) for i in record.instances]
    data["stages"] = [dict(vars(s)) for s in record.stages]
    data["items"] = [dict(vars(i)) for i in record.items]
    return data


class Ledger:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_ledger_path()

    def append(self, record: RunRecord) -> None:
        """Append the record's current state and fsync it: the line survives a crash right after."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(record.to_json(), sort_keys=True, default=str)
        with self.path.open("a") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def runs(self) -> dict[str, RunRecord]:
        """The latest state of every run, by run id, in the order runs were first written."""
        return latest_runs(read_lines(self.path))


def read_lines(path: Path) -> Iterable[RunRecord]:
    if not path.exists():
        return
    with path.open() as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield RunRecord.from_json(json.loads(line))
            except (json.JSONDecodeError, TypeError, KeyError) as exc:
                if not line.endswith("\n"):
                    return  # a torn last line from a crash mid-write: everything before it stands
                raise LedgerError(f"{path}:{number}: not a ledger record ({exc})") from exc


def latest_runs(records: Iterable[RunRecord]) -> dict[str, RunRecord]:
    runs: dict[str, RunRecord] = {}
    for record in records:
        runs[record.run_id] = record
    return runs


def read_runs(path: Path | None = None) -> dict[str, RunRecord]:
    """For the report and `orchestrate cost`: the latest state of every run in the ledger."""
    return Ledger(path).runs()
