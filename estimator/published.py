"""The published studies (report/data/studies.toml) and their figures per workload, configuration and backend,
read with the standard library: the estimator's published basis, before anything is rented. The report compares
measured runs with the same studies (report.studies).
"""

from __future__ import annotations

import csv
import statistics
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.logs import EpochLog, EpochRecord, LogFormatError, read_epoch_log
from estimator import DATA_DIR
from records.loading import Configuration

PUBLISHED_DIR = DATA_DIR / "published"
STUDIES_FILE = DATA_DIR / "studies.toml"
KINDS = ("epoch-logs", "epoch-table", "provider-table")
PUBLISHED_RUN_ID = "published"


class StudyDataError(ValueError):
    """The bundled study data is inconsistent; the message names the study and the field or file."""


@dataclass(frozen=True)
class PublishedConfig:
    name: str
    backends: tuple[str, ...]
    hardware: str
    software: Mapping[str, str]  # by backend
    usd_per_hour: float | None = None
    logs: str | None = None  # epoch-logs: folder of <workload>_<backend>.csv
    rows: str | None = None  # epoch-table: value of the table's `config` column
    matches: tuple[str, ...] = ()  # catalog profiles whose runs reproduce this configuration
    wall_seconds: float | None = None  # a whole-run time the study published (`time`), which beats summed epochs

    def label(self, backend: str) -> str:
        return Configuration(self.name, backend).label


@dataclass(frozen=True)
class Study:
    name: str
    title: str
    author: str
    date: str
    url: str
    source: str
    kind: str
    base: str
    price_note: str
    notes: tuple[str, ...]
    workloads: Mapping[str, int]  # workload -> published epochs
    configs: tuple[PublishedConfig, ...] = ()
    table: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)  # kind-specific keys (provider-table)

    def matching_label(self, platform: str, backend: str) -> str | None:
        """The published configuration a measured platform+backend reproduces, if the study names one."""
        for config in self.configs:
            if platform in config.matches and backend in config.backends:
                return config.label(backend)
        for label, profiles in self.raw.get("matches", {}).items():
            if platform in profiles and backend == self.raw.get("backend"):
                return label
        return None


def load_studies(path: Path = STUDIES_FILE) -> dict[str, Study]:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise StudyDataError(f"{path}: cannot read ({exc})") from exc
    return {name: _study(path, name, entry) for name, entry in data.items()}


def _study(path: Path, name: str, entry: Mapping[str, Any]) -> Study:
    def text(key: str, required: bool = True) -> str:
        value = entry.get(key, None if required else "")
        if not isinstance(value, str):
            raise StudyDataError(f"{path}: study {name!r}: field {key!r} must be a string")
        return value

    kind = text("kind")
    if kind not in KINDS:
        raise StudyDataError(f"{path}: study {name!r}: kind {kind!r} is not one of {', '.join(KINDS)}")
    if kind == "provider-table":
        workloads = {text("workload"): int(entry["epochs"])}
    else:
        workloads = {str(w): int(e) for w, e in dict(entry.get("workloads", {})).items()}
    if not workloads:
        raise StudyDataError(f"{path}: study {name!r}: no workloads")
    return Study(
        name=name,
        title=text("title"),
        author=text("author"),
        date=text("date"),
        url=text("url"),
        source=text("source"),
        kind=kind,
        base=text("base"),
        price_note=text("price_note"),
        notes=tuple(entry.get("notes", ())),
        workloads=workloads,
        configs=tuple(_config(path, name, c) for c in entry.get("configs", ())),
        table=entry.get("table"),
        raw=entry,
    )


def _config(path: Path, study: str, entry: Mapping[str, Any]) -> PublishedConfig:
    try:
        backends = tuple(entry["backends"])
        software = entry["software"]
        return PublishedConfig(
            name=entry["name"],
            backends=backends,
            hardware=entry["hardware"],
            software=software if isinstance(software, dict) else dict.fromkeys(backends, software),
            usd_per_hour=entry.get("usd_per_hour"),
            logs=entry.get("logs"),
            rows=entry.get("rows"),
            matches=tuple(entry.get("matches", ())),
            wall_seconds=entry.get("wall_seconds"),
        )
    except KeyError as exc:
        raise StudyDataError(f"{path}: study {study!r}: a configuration lacks field {exc}") from None


def provider_label(provider: str, gpu: str, gpus_used: int) -> str:
    label = f"{provider} {gpu}"
    return f"{label} x{gpus_used}" if gpus_used > 1 else label


@dataclass(frozen=True)
class Figures:
    """One published workload x configuration x backend: its epochs and times (None where the study has none)."""

    workload: str
    config: str  # the configuration's label
    platform: str
    backend: str
    epochs: int
    first_epoch_s: float | None
    steady_epoch_s: float | None  # the median of the epochs after the first
    total_s: float  # the published whole-run time where the study gives one, else the epochs' sum


def published_figures(study: Study, root: Path = PUBLISHED_DIR) -> Iterator[Figures]:
    """A study's figures, workloads alphabetically, then configurations and backends in the study's order."""
    if study.kind == "provider-table":
        yield from _provider_figures(study, root)
        return
    logs = _epoch_logs(study, root) if study.kind == "epoch-logs" else _epoch_table(study, root)
    for workload in sorted(study.workloads):
        for config in study.configs:
            for backend in config.backends:
                log = logs[(workload, config.name, backend)]
                steady = log.steady_epochs
                yield Figures(
                    workload=workload,
                    config=config.label(backend),
                    platform=config.name,
                    backend=backend,
                    epochs=len(log.epochs),
                    first_epoch_s=log.first_epoch.elapsed if log.first_epoch else None,
                    steady_epoch_s=statistics.median(e.elapsed for e in steady) if steady else None,
                    total_s=log.total_elapsed if config.wall_seconds is None else float(config.wall_seconds),
                )


def epoch_log(
    study: Study, config: PublishedConfig, workload: str, backend: str, root: Path = PUBLISHED_DIR
) -> EpochLog:
    path = root / str(config.logs) / f"{workload}_{backend}.csv"
    try:
        return read_epoch_log(path, with_metadata=False)
    except LogFormatError as exc:
        raise StudyDataError(f"study {study.name!r}: bundled log unreadable: {exc}") from exc


def _epoch_logs(study: Study, root: Path) -> dict[tuple[str, str, str], EpochLog]:
    return {
        (workload, config.name, backend): epoch_log(study, config, workload, backend, root)
        for config in study.configs
        for backend in config.backends
        for workload in study.workloads
    }


def table_epoch_logs(study: Study, root: Path = PUBLISHED_DIR) -> dict[str, EpochLog]:
    """The transcribed per-epoch table (several configurations in one CSV): one log per configuration name."""
    path = root / str(study.table)
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        columns = tuple(reader.fieldnames or ())
    logs = {}
    for config in study.configs:
        epochs = [
            EpochRecord(
                epoch=int(r["epoch"]),
                elapsed=float(r["elapsed"]),
                loss=float(r["loss"]),
                acc=float(r["acc"]),
                val_loss=float(r["val_loss"]),
                val_acc=float(r["val_acc"]),
            )
            for r in rows
            if r["config"] == config.rows
        ]
        if not epochs:
            raise StudyDataError(f"{path}: no rows with config {config.rows!r} (study {study.name!r})")
        logs[config.name] = EpochLog(path=path, epochs=epochs, columns=columns)
    return logs


def _epoch_table(study: Study, root: Path) -> dict[tuple[str, str, str], EpochLog]:
    (workload,) = study.workloads
    logs = table_epoch_logs(study, root)
    return {(workload, c.name, b): logs[c.name] for c in study.configs for b in c.backends}


def provider_rows(study: Study, root: Path = PUBLISHED_DIR) -> list[dict[str, str]]:
    """The provider table's rows as text, each with its configuration label under `config`."""
    with (root / str(study.table)).open(newline="") as f:
        rows = list(csv.DictReader(f))
    return [{**r, "config": provider_label(r["provider"], r["gpu"], int(r["gpus_used"]))} for r in rows]


def _provider_figures(study: Study, root: Path) -> Iterator[Figures]:
    (workload,) = study.workloads
    for row in provider_rows(study, root):
        yield Figures(
            workload=workload,
            config=row["config"],
            platform=row["config"],
            backend=str(study.raw["backend"]),
            epochs=study.workloads[workload],
            first_epoch_s=None,
            steady_epoch_s=None,
            total_s=float(row["train_time_h"]) * 3600,
        )
