"""The ledger: one JSON line per change of an orchestrated run, appended and flushed to disk at once.

A run's record is written before anything is launched, again as soon as an instance exists, after every
workload and at the end. A crash between launch and the end therefore still leaves a record naming the run,
its instances and its owner process: the sweep uses that to find machines nobody is tearing down. The last
line of a run id is its current state.

A line that cannot be read (torn by a crash or a full disk, cut by hand) is named in a warning by every command
that reads the ledger; `orchestrate sweep` moves it to `<ledger>.torn` beside the ledger and settles its run
(from the run's own `run.json`, else from the provider), so a lost final state is never silent.

Location: `--ledger PATH`, else `$KCB_LEDGER`, else `~/.keras-cloud-bench/ledger.jsonl`: one ledger per user
and machine, so runs started from any checkout are seen by `orchestrate sweep` and `orchestrate cost`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

LEDGER_ENV = "KCB_LEDGER"
SCHEMA_VERSION = 1

# Run status. "starting", "running" and "detached" are live; the others are final.
STATUS_STARTING = "starting"
STATUS_RUNNING = "running"
# A detached run (orchestrate.detached): its machine works alone and reports to a bucket; no orchestrator process
# watches it, so the sweep keeps its machine until its expiry. `orchestrate collect` finalises it.
STATUS_DETACHED = "detached"
STATUS_COMPLETE = "complete"  # every workload finished
STATUS_FAILED = "failed"  # a workload or a stage failed; finished workloads' logs are kept
STATUS_INTERRUPTED = "interrupted"  # Ctrl-C / SIGTERM; torn down
FINAL_STATUSES = frozenset({STATUS_COMPLETE, STATUS_FAILED, STATUS_INTERRUPTED})


# How a machine's termination time was learnt, when not from the orchestrator that terminated it.
TERMINATED_BY_PROVIDER = "provider"  # the machine ended itself (max lifetime, power-off) or was ended elsewhere;
# terminated_at is the provider's own record of it (EC2's state transition time, GCE's lastStopTimestamp)
TERMINATED_BY_EXPIRY = "expiry"  # it ended on its own and the provider kept no time (a GCE VM that deleted itself):
# terminated_at is its expiry, the latest it could have run, so the bill is an upper bound


class LedgerError(ValueError):
    """A ledger record that cannot be read (a torn or hand-edited line); the message names the field."""


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
    terminated_by: str | None = None  # TERMINATED_BY_PROVIDER or _EXPIRY, or None: this project terminated it
    expires_at: float | None = None  # epoch seconds: its max lifetime ends, and with it the machine


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
    repeat: int | None = None  # 1-based, with `--repeats`: the runner's --repeat-index


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
    teardown_failures: list[str] = field(default_factory=list)  # what teardown could not do: run the sweep
    recovered_by: str | None = None  # "sweep" when the sweep finalised a run whose orchestrator died
    # How many container runs the plan holds: the sweep calls a dead run complete only when that many completed.
    planned_items: int | None = None
    nodes: int = 1  # a batch job's nodes per task: each task's allocation is billed as that many machines
    # Where the run's containers and files are on a persistent host (ssh, local), for the sweep to recover a dead
    # run: host, user, port, key (a path), ssh_config (a path), root (the remote dir), docker (its command).
    host: dict[str, str] = field(default_factory=dict)
    # A detached run's bucket URL (s3://b/prefix/ or gs://b/prefix/): its files are under <prefix>runs/<run_id>/.
    storage: str | None = None
    # The sha256 of the run's spec (orchestrate.runspec): what it ran and carried; each run's metadata records it too.
    spec: str | None = None

    @property
    def final(self) -> bool:
        return self.status in FINAL_STATUSES

    def latest_items(self) -> list[ItemRecord]:
        """One record per workload x backend: the last attempt (a rerun after preemption supersedes the first)."""
        return list({(i.workload, i.backend, i.repeat): i for i in self.items}.values())

    def to_json(self) -> dict[str, Any]:
        data = _asdict(self)
        data["schema_version"] = SCHEMA_VERSION
        return data

    @classmethod
    def from_json(cls, data: object) -> RunRecord:
        """The record a ledger line holds; LedgerError when a field is missing, unknown or of the wrong type."""
        data = {k: v for k, v in _checked(cls, data).items() if k != "schema_version"}
        data["instances"] = [InstanceRecord(**_checked(InstanceRecord, i)) for i in data.get("instances", [])]
        data["stages"] = [StageRecord(**_checked(StageRecord, s)) for s in data.get("stages", [])]
        data["items"] = [ItemRecord(**_checked(ItemRecord, i)) for i in data.get("items", [])]
        try:
            return cls(**data)
        except TypeError as exc:  # a required field is missing
            raise LedgerError(str(exc)) from None


# Field annotations (strings under `from __future__ import annotations`) -> the JSON values they accept.
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "None": (type(None),),
}


def _checked(cls: type, data: object) -> dict[str, Any]:
    """`data` as the keyword arguments of dataclass `cls`, each value of its field's type (hand edits happen)."""
    if not isinstance(data, dict):
        raise LedgerError(f"expected a {cls.__name__} object, got {type(data).__name__}")
    known = {f.name: str(f.type) for f in fields(cls)}
    for key, value in data.items():
        if key == "schema_version" and cls is RunRecord:
            continue
        if key not in known:
            raise LedgerError(f"unknown field {key!r} in {cls.__name__}")
        annotation = known[key]
        if annotation.startswith(("list[", "dict[")):
            allowed: tuple[type, ...] = (list,) if annotation.startswith("list[") else (dict,)
        else:
            allowed = tuple(t for part in annotation.split("|") for t in _JSON_TYPES[part.strip()])
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            raise LedgerError(f"{cls.__name__}.{key} is {value!r}, expected {annotation}")
    return data


def _asdict(record: RunRecord) -> dict[str, Any]:
    # dataclasses.asdict deep-copies; plain vars() keeps it cheap and the nested dataclasses explicit
    data = dict(vars(record))
    data["instances"] = [dict(vars(i)) for i in record.instances]
    data["stages"] = [dict(vars(s)) for s in record.stages]
    data["items"] = [dict(vars(i)) for i in record.items]
    return data


@dataclass(frozen=True)
class TornLine:
    """A ledger line that is not a record: where it was, whose run it seems to be, why it cannot be read."""

    number: int
    run_id: str | None
    reason: str
    text: bytes

    def describe(self) -> str:
        return f"{self.number} (run {self.run_id or 'unknown'}: {self.reason})"


RUN_ID_FIELD = re.compile(rb'"run_id":\s*"([^"\\]+)"')


class Ledger:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_ledger_path()
        self._warned: set[str] = set()  # a command reads the ledger many times: each problem is said once

    @property
    def quarantine_path(self) -> Path:
        return self.path.with_name(self.path.name + ".torn")

    def append(self, record: RunRecord) -> None:
        """Append the record's current state and fsync it: the line survives a crash right after.

        One `write` of the whole line, under the ledger's lock, so lines of concurrent runs never interleave.
        A torn last line (a crash mid-write) first gets its newline, so it stays one unreadable line of its own
        instead of swallowing this one.
        """
        line = json.dumps(record.to_json(), sort_keys=True, default=str) + "\n"
        with self._locked() as descriptor:
            if not _ends_with_newline(descriptor):
                line = "\n" + line
            os.write(descriptor, line.encode())
            os.fsync(descriptor)

    def runs(self) -> dict[str, RunRecord]:
        """The latest state of every run, by run id, in the order runs were first written."""
        return latest_runs(read_lines(self.path, self._warn_once))

    def torn_lines(self) -> list[TornLine]:
        """The lines that are not records, as they are now."""
        return _torn_lines(self.path.read_bytes().splitlines(keepends=True)) if self.path.exists() else []

    def quarantine(self) -> list[TornLine]:
        """Move every unreadable line to `<ledger>.torn` (appended, fsynced first) and rewrite the ledger without
        them, atomically and under the lock appenders take; the lines moved."""
        if not self.path.exists():
            return []
        with self._locked() as descriptor:
            with open(descriptor, "rb", closefd=False) as handle:
                handle.seek(0)
                lines = handle.read().splitlines(keepends=True)
            torn = list(_torn_lines(lines))
            if not torn:
                return []
            with self.quarantine_path.open("ab") as quarantine:
                quarantine.write(b"".join(t.text.rstrip(b"\n") + b"\n" for t in torn))
                quarantine.flush()
                os.fsync(quarantine.fileno())
            numbers = {t.number for t in torn}
            kept = b"".join(line for number, line in enumerate(lines, start=1) if number not in numbers)
            temporary = self.path.with_name(self.path.name + ".rewrite")
            with temporary.open("wb") as rewrite:
                rewrite.write(kept)
                rewrite.flush()
                os.fsync(rewrite.fileno())
            os.chmod(temporary, 0o600)
            os.replace(temporary, self.path)
        return torn

    @contextlib.contextmanager
    def _locked(self) -> Iterator[int]:
        """The ledger open for appending, under an exclusive lock: of the file the path names now (a quarantine
        may have replaced it while this process waited)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            descriptor = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX)
                with contextlib.suppress(FileNotFoundError):
                    if os.fstat(descriptor).st_ino == os.stat(self.path).st_ino:
                        yield descriptor
                        return
            finally:
                os.close(descriptor)  # closing releases the lock

    def _warn_once(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            _to_stderr(message)


def _ends_with_newline(descriptor: int) -> bool:
    size = os.fstat(descriptor).st_size
    return size == 0 or os.pread(descriptor, 1, size - 1) == b"\n"


def read_lines(path: Path, warn: Callable[[str], None] | None = None) -> Iterable[RunRecord]:
    """Every readable record in the file. Lines that are not records (torn by a crash, edited by hand) are
    skipped and named, with the run each seems to belong to, in one warning line (stderr by default): the ledger
    stays usable after any crash, and the user learns that a run's latest state may be lost."""
    if not path.exists():
        return
    if not path.is_file():  # a device (/dev/zero, /dev/full) or a pipe: its read would never end
        raise LedgerError(f"{path}: not a regular file")
    with path.open("rb") as handle:
        lines = handle.read().splitlines(keepends=True)
    torn: list[TornLine] = []
    for entry in _parsed(lines):
        if isinstance(entry, TornLine):
            torn.append(entry)
        else:
            yield entry
    if torn:
        named = "; ".join(t.describe() for t in torn)
        message = f"warning: {path}: skipped {len(torn)} unreadable line(s): {named}"
        hint = " -- `python -m orchestrate sweep` sets them aside and settles their runs"
        (warn or _to_stderr)(message[: 500 - len(hint)] + hint)


def _parsed(lines: Iterable[bytes]) -> Iterator[RunRecord | TornLine]:
    """Each non-blank line as its record, or as a TornLine naming the run its text mentions."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield RunRecord.from_json(json.loads(line))
        except (json.JSONDecodeError, UnicodeDecodeError, LedgerError) as exc:
            found = RUN_ID_FIELD.search(line)
            run_id = found.group(1).decode(errors="replace") if found else None
            yield TornLine(number, run_id, str(exc)[:120], line)


def _torn_lines(lines: Iterable[bytes]) -> list[TornLine]:
    return [entry for entry in _parsed(lines) if isinstance(entry, TornLine)]


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr)


def latest_runs(records: Iterable[RunRecord]) -> dict[str, RunRecord]:
    runs: dict[str, RunRecord] = {}
    for record in records:
        runs[record.run_id] = record
    return runs


def read_runs(path: Path | None = None) -> dict[str, RunRecord]:
    """For the report and `orchestrate cost`: the latest state of every run in the ledger."""
    return Ledger(path).runs()
