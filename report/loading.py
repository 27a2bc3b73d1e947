"""Turn the epoch logs under a folder into runs: one run = one CSV (+ its metadata) = one repeat.

Logs are read only through `benchmarks.logs`, which also reads the published 2017 logs. A file that cannot be
read is skipped with a one-line reason naming it; the other files are still reported.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.logs import STATUS_COMPLETE, EpochLog, LogFormatError, find_logs, read_epoch_log

RUN_ID_PATTERN = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{4}$")
# Backends a log's file name can end with: ours, plus those of the published logs.
KNOWN_BACKENDS = ("tensorflow", "jax", "torch", "cntk", "theano")
SYNTHETIC_SUFFIX = "_synthetic"
DATA_SOURCES = ("real", "synthetic")
STATUSES = ("complete", "partial", "running")
NO_RUN_ID = "-"


@dataclass(frozen=True)
class Skipped:
    path: Path
    reason: str  # one line; names the file


@dataclass(frozen=True)
class Configuration:
    """What a result is attributed to. Real and synthetic data are separate configurations, never pooled."""

    platform: str
    backend: str
    variant: str = ""  # image and/or precision, set only where runs of one platform+backend differ in them
    synthetic: bool = False

    @property
    def name(self) -> str:
        name = f"{self.platform}-{self.backend}"
        return f"{name} [{self.variant}]" if self.variant else name

    @property
    def label(self) -> str:
        return f"{self.name} (synthetic)" if self.synthetic else self.name


@dataclass(frozen=True)
class Run:
    workload: str
    config: Configuration
    run_id: str
    log: EpochLog
    data_source: str  # "real", "synthetic" or "unknown" (a log without metadata)
    epochs_planned: int | None = None
    image: str | None = None
    precision: str | None = None
    compile_settings: str | None = None  # jit, steps per execution and LSTM kernel: each changes the times

    @property
    def metadata(self) -> Mapping[str, Any]:
        return self.log.metadata or {}

    @property
    def status(self) -> str:
        return self.log.status

    @property
    def complete(self) -> bool:
        return self.status == STATUS_COMPLETE

    @property
    def epochs_completed(self) -> int:
        return len(self.log.epochs)

    @property
    def total_s(self) -> float:
        return self.log.total_elapsed

    @property
    def first_epoch_s(self) -> float | None:
        first = self.log.first_epoch
        return None if first is None else first.elapsed

    @property
    def steady_median_s(self) -> float | None:
        steady = self.log.steady_epochs
        return statistics.median(e.elapsed for e in steady) if steady else None

    @property
    def final_accuracy(self) -> tuple[float | None, str]:
        """Validation accuracy of the last epoch, else training accuracy; with which one it is."""
        final = self.log.final
        if final is None:
            return None, ""
        if final.val_acc is not None:
            return final.val_acc, "val_acc"
        if final.acc is not None:
            return final.acc, "acc"
        return None, ""

    @property
    def gpu_utilization_pct(self) -> float | None:
        sampled = self.metadata.get("gpu_utilization")
        value = sampled.get("mean_pct") if isinstance(sampled, dict) else None
        return float(value) if isinstance(value, int | float) else None

    @property
    def error(self) -> str:
        return str(self.metadata.get("error") or "")


@dataclass
class LoadResult:
    runs: list[Run]
    skipped: list[Skipped]

    @property
    def complete_runs(self) -> list[Run]:
        return [r for r in self.runs if r.complete]

    @property
    def partial_runs(self) -> list[Run]:
        return [r for r in self.runs if not r.complete]


def load_runs(root: Path) -> LoadResult:
    """Every run under `root` (our layout `<platform>/<run_id>/<workload>_<backend>.csv`, or any folder of
    `<workload>_<backend>.csv` files such as the published logs)."""
    runs: list[Run] = []
    skipped: list[Skipped] = []
    for path in find_logs(root):
        try:
            runs.append(_read_run(root, path))
        except LogFormatError as exc:
            skipped.append(Skipped(path, str(exc)))
    return LoadResult(runs=assign_variants(runs), skipped=skipped)


def _read_run(root: Path, path: Path) -> Run:
    log = read_epoch_log(path)
    if log.metadata is None:
        return _run_from_path(root, log)
    return _run_from_metadata(log, log.metadata)


def _run_from_metadata(log: EpochLog, meta: Mapping[str, Any]) -> Run:
    where = log.path.with_suffix(".json")
    workload = _required_text(where, meta, "workload")
    backend = _required_text(where, meta, "backend")
    platform = _required_text(where, meta, "platform")
    status = meta.get("status")
    if status not in STATUSES:
        raise LogFormatError(f"{where}: field 'status' is {status!r}; expected one of {', '.join(STATUSES)}")
    data = _optional_mapping(where, meta, "data")
    source = data.get("source") or "unknown"
    if source not in (*DATA_SOURCES, "unknown"):
        raise LogFormatError(f"{where}: field 'data.source' is {source!r}; expected real or synthetic")
    container = _optional_mapping(where, meta, "container")
    settings = _optional_mapping(where, meta, "settings")
    planned = meta.get("epochs_planned")
    if planned is not None and not isinstance(planned, int):
        raise LogFormatError(f"{where}: field 'epochs_planned' is {planned!r}; expected an integer or null")
    return Run(
        workload=workload,
        config=Configuration(platform=platform, backend=backend, synthetic=source == "synthetic"),
        run_id=str(meta.get("run_id") or NO_RUN_ID),
        log=log,
        data_source=source,
        epochs_planned=planned,
        image=_short_image_name(container.get("image")),
        precision=settings.get("dtype_policy"),
        compile_settings=_compile_settings(settings),
    )


def _compile_settings(settings: Mapping[str, Any]) -> str | None:
    if not settings:
        return None
    parts = [f"jit {'on' if settings.get('jit_compile') else 'off'}"]
    if (settings.get("steps_per_execution") or 1) > 1:
        parts.append(f"{settings['steps_per_execution']} steps/execution")
    if settings.get("lstm_kernel"):
        parts.append(f"{settings['lstm_kernel']} LSTM")
    if settings.get("float32_matmul"):
        parts.append(f"{settings['float32_matmul']} matmul")
    return ", ".join(parts)


def _required_text(where: Path, meta: Mapping[str, Any], key: str) -> str:
    value = meta.get(key)
    if not isinstance(value, str) or not value:
        raise LogFormatError(f"{where}: field '{key}' is {value!r}; expected a non-empty string")
    return value


def _optional_mapping(where: Path, meta: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = meta.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise LogFormatError(f"{where}: field '{key}' is {type(value).__name__}; expected an object or null")
    return value


def _short_image_name(image: object) -> str | None:
    return str(image).rsplit("/", 1)[-1] if image else None


def _run_from_path(root: Path, log: EpochLog) -> Run:
    """A log without metadata (a published one): identity from `<workload>_<backend>[_synthetic].csv` and its
    folder; the folder under `root` names the platform, or `<platform>/<run_id>/` in our layout."""
    stem = log.path.stem
    synthetic = stem.endswith(SYNTHETIC_SUFFIX)
    if synthetic:
        stem = stem.removesuffix(SYNTHETIC_SUFFIX)
    workload, _, backend = stem.rpartition("_")
    if not workload or backend not in KNOWN_BACKENDS:
        raise LogFormatError(
            f"{log.path}: no metadata JSON beside it and the file name is not <workload>_<backend>.csv "
            f"(backend one of {', '.join(KNOWN_BACKENDS)})"
        )
    folders = log.path.parent.relative_to(root).parts
    run_id = NO_RUN_ID
    if folders and RUN_ID_PATTERN.match(folders[-1]):
        run_id, folders = folders[-1], folders[:-1]
    platform = "/".join(folders) or root.resolve().name
    return Run(
        workload=workload,
        config=Configuration(platform=platform, backend=backend, synthetic=synthetic),
        run_id=run_id,
        log=log,
        data_source="synthetic" if synthetic else "unknown",
    )


def assign_variants(runs: Iterable[Run]) -> list[Run]:
    """Name the image, precision and compile settings in a configuration only where runs of one platform+backend
    (for settings: of one workload) differ in them, so that they are never pooled and labels stay short otherwise."""
    runs = list(runs)
    images: dict[tuple[str, str], set[str | None]] = defaultdict(set)
    precisions: dict[tuple[str, str], set[str | None]] = defaultdict(set)
    compiled: dict[tuple[str, str, str], set[str | None]] = defaultdict(set)
    for run in runs:
        key = (run.config.platform, run.config.backend)
        images[key].add(run.image)
        precisions[key].add(run.precision)
        compiled[(*key, run.workload)].add(run.compile_settings)
    named = []
    for run in runs:
        key = (run.config.platform, run.config.backend)
        parts = []
        if len(images[key]) > 1:
            parts.append(run.image or "no image")
        if len(precisions[key]) > 1:
            parts.append(run.precision or "default precision")
        if len(compiled[(*key, run.workload)]) > 1:
            parts.append(run.compile_settings or "default settings")
        named.append(replace(run, config=replace(run.config, variant=", ".join(parts))))
    return named
