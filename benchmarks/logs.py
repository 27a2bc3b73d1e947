"""The per-epoch log format, shared by the harness (writer) and the report (reader).

The first six columns are those of the published 2017 logs (minimaxir's `EpochStatsLogger`), so one reader handles
both the published files and ours. Our extra columns come after them; a published file simply lacks them.
Each run's CSV has a metadata JSON beside it with the same stem (`<stem>.json`).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.metadata import SCHEMA_VERSION, MetadataError, RunMetadata, Status

PUBLISHED_COLUMNS: tuple[str, ...] = ("epoch", "elapsed", "loss", "acc", "val_loss", "val_acc")
EXTRA_COLUMNS: tuple[str, ...] = (
    "samples_per_sec",  # training samples / elapsed
    "compiled",  # 1 for the epoch that paid for tracing/compilation (the first), else 0
    "train_samples",  # samples seen in the epoch's training pass
    "started_at",  # epoch start, seconds since the run started (after data loading)
)
COLUMNS: tuple[str, ...] = PUBLISHED_COLUMNS + EXTRA_COLUMNS
METADATA_SCHEMA_VERSION = SCHEMA_VERSION

# Run status, recorded in the metadata (benchmarks.metadata.Status): only `complete` runs are results.
STATUS_COMPLETE = Status.COMPLETE
STATUS_PARTIAL = Status.PARTIAL
STATUS_RUNNING = Status.RUNNING


class LogFormatError(ValueError):
    """A log or metadata file that cannot be read; the message names the file."""


@dataclass(frozen=True)
class EpochRecord:
    epoch: int
    elapsed: float
    loss: float | None = None
    acc: float | None = None
    val_loss: float | None = None
    val_acc: float | None = None
    samples_per_sec: float | None = None
    compiled: bool | None = None
    train_samples: int | None = None
    started_at: float | None = None

    def as_row(self) -> dict[str, str]:
        return {name: _format_cell(getattr(self, name)) for name in COLUMNS}


@dataclass
class EpochLog:
    """One run's epochs, as read from a CSV (ours or a published one)."""

    path: Path
    epochs: list[EpochRecord]
    columns: tuple[str, ...]
    metadata: RunMetadata | None = field(default=None)

    @property
    def total_elapsed(self) -> float:
        return sum(e.elapsed for e in self.epochs)

    @property
    def first_epoch(self) -> EpochRecord | None:
        return self.epochs[0] if self.epochs else None

    @property
    def steady_epochs(self) -> list[EpochRecord]:
        """Epochs after the compiling one. Published logs have no `compiled` column: their first epoch is it."""
        return [e for e in self.epochs[1:] if not e.compiled]

    @property
    def final(self) -> EpochRecord | None:
        return self.epochs[-1] if self.epochs else None

    @property
    def status(self) -> Status:
        if self.metadata is None:
            return STATUS_COMPLETE  # published logs are finished runs
        return self.metadata.status


def _format_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    return str(value)


def _parse_float(text: str | None) -> float | None:
    if text is None or text.strip() in ("", "NA", "nan", "None"):
        return None
    return float(text)


def _parse_int(text: str | None) -> int | None:
    value = _parse_float(text)
    return None if value is None else int(value)


def _parse_bool(text: str | None) -> bool | None:
    if text is None or text.strip() == "":
        return None
    return text.strip().lower() in ("1", "true", "yes")


class EpochLogWriter:
    """Appends one row per epoch and flushes it, so an interrupted run keeps every finished epoch."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("w", newline="")
        self._writer = csv.DictWriter(self._file, fieldnames=list(COLUMNS))
        self._writer.writeheader()
        self._file.flush()

    def append(self, record: EpochRecord) -> None:
        self._writer.writerow(record.as_row())
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def metadata_path(csv_path: Path) -> Path:
    return csv_path.with_suffix(".json")


def write_metadata(csv_path: Path, metadata: dict[str, Any]) -> Path:
    """Write atomically: a reader never sees half a file even if the run is killed mid-write."""
    path = metadata_path(csv_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"schema_version": METADATA_SCHEMA_VERSION, **metadata}, indent=2, default=str))
    tmp.replace(path)
    return path


def read_metadata(csv_path: Path) -> RunMetadata | None:
    """The run's metadata, typed; older schema versions read with the blocks they lack as None. A file that is not
    a metadata object raises LogFormatError naming the file and the field."""
    path = metadata_path(csv_path)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise LogFormatError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise LogFormatError(f"{path}: metadata must be a JSON object")
    try:
        return RunMetadata.from_dict(data)
    except MetadataError as exc:
        raise LogFormatError(f"{path}: {exc}") from None


def read_epoch_log(path: Path | str, with_metadata: bool = True) -> EpochLog:
    """Read an epoch CSV; missing optional columns become None. Errors name the file and the row."""
    path = Path(path)
    try:
        with path.open(newline="") as handle:
            reader = csv.DictReader(handle)
            columns = tuple(reader.fieldnames or ())
            _check_columns(path, columns)
            epochs = [_parse_row(path, line, row) for line, row in enumerate(reader, start=2)]
    except (OSError, UnicodeDecodeError) as exc:
        raise LogFormatError(f"{path}: cannot read ({exc})") from exc
    if not epochs:
        raise LogFormatError(f"{path}: no epochs (empty log)")
    metadata = read_metadata(path) if with_metadata else None
    return EpochLog(path=path, epochs=epochs, columns=columns, metadata=metadata)


def _check_columns(path: Path, columns: Sequence[str]) -> None:
    if not columns:
        raise LogFormatError(f"{path}: empty file (no header)")
    missing = [c for c in ("epoch", "elapsed") if c not in columns]
    if missing:
        raise LogFormatError(f"{path}: missing column(s) {', '.join(missing)}; header is {','.join(columns)}")


def _parse_row(path: Path, line: int, row: dict[str, str]) -> EpochRecord:
    try:
        epoch = _parse_int(row.get("epoch"))
        elapsed = _parse_float(row.get("elapsed"))
        if epoch is None or elapsed is None:
            raise ValueError("epoch and elapsed are required")
        return EpochRecord(
            epoch=epoch,
            elapsed=elapsed,
            loss=_parse_float(row.get("loss")),
            acc=_parse_float(row.get("acc")),
            val_loss=_parse_float(row.get("val_loss")),
            val_acc=_parse_float(row.get("val_acc")),
            samples_per_sec=_parse_float(row.get("samples_per_sec")),
            compiled=_parse_bool(row.get("compiled")),
            train_samples=_parse_int(row.get("train_samples")),
            started_at=_parse_float(row.get("started_at")),
        )
    except ValueError as exc:
        raise LogFormatError(f"{path}:{line}: bad value ({exc})") from exc


def find_logs(root: Path | str) -> Iterable[Path]:
    """Every epoch CSV under `root`, in a stable order."""
    return sorted(p for p in Path(root).rglob("*.csv") if p.is_file())
