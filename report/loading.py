"""Turn the epoch logs under a folder into runs: one run = one CSV (+ its metadata) = one repeat.

Logs are read only through `benchmarks.logs`, which also reads the published 2017 logs. A file that cannot be
read is skipped with a one-line reason naming it; the other files are still reported.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks.logs import STATUS_COMPLETE, EpochLog, LogFormatError, find_logs, read_epoch_log
from benchmarks.metadata import StabilityLabel, Status

RUN_ID_PATTERN = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{4}$")
# A repeat's files carry its two-digit index: `<workload>_<backend>[_synthetic].r02.csv`.
REPEAT_SUFFIX = re.compile(r"\.r\d{2}$")
# The project's committed measurements live under `<logs>/reference/<NAME>/`, apart from the user's runs.
REFERENCE_FOLDER = "reference"
# Backends a log's file name can end with: ours, plus those of the published logs.
KNOWN_BACKENDS = ("tensorflow", "jax", "torch", "cntk", "theano")
SYNTHETIC_SUFFIX = "_synthetic"
DATA_SOURCES = ("real", "synthetic")
STATUSES = tuple(s.value for s in Status)
STABILITY_LABELS = tuple(label.value for label in StabilityLabel)
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
    reference: bool = False  # a committed project measurement (logs/reference/NAME), not the user's run

    @property
    def name(self) -> str:
        name = f"{self.platform}-{self.backend}"
        return f"{name} [{self.variant}]" if self.variant else name

    @property
    def label(self) -> str:
        label = f"{self.name} (synthetic)" if self.synthetic else self.name
        return f"{label} (reference)" if self.reference else label


@dataclass(frozen=True)
class Measured:
    """What metadata schema 2 adds to a run (stability, energy, machine identity, repeat group). Logs written
    before it lack these keys: every field is then None, which the report shows as "not recorded"."""

    stability: str | None = None  # "stable", "unstable" or "too few epochs"
    steady_cv: float | None = None
    host_bound: bool | None = None
    host_share: float | None = None  # fraction of steady-epoch time the GPU sat idle
    gpu_wh: float | None = None
    gpu_wh_per_steady_epoch: float | None = None  # median over the epochs after the compiling one
    host_wh: float | None = None
    energy_method: str | None = None
    host_id: str | None = None
    repeat_group: str | None = None
    fingerprint: Mapping[str, Any] | None = None


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
    measured: Measured = field(default_factory=Measured)

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

    @property
    def machine(self) -> str:
        """Which machine ran it: the harness's host id, else the run id (one run id = one machine session)."""
        return self.measured.host_id or self.run_id


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


def load_runs(root: Path, reference: str | None = None) -> LoadResult:
    """Every run under `root` (our layout `<platform>/<run_id>/<workload>_<backend>.csv`, or any folder of
    `<workload>_<backend>.csv` files such as the published logs).

    A top-level `reference/` folder holds the project's committed measurements: left out, so a user's report
    shows the user's runs; `reference=NAME` adds `reference/NAME` beside them, labelled as reference."""
    runs: list[Run] = []
    skipped: list[Skipped] = []
    for path in find_logs(root):
        if path.relative_to(root).parts[0] == REFERENCE_FOLDER:
            continue
        _read_into(root, path, runs, skipped, as_reference=False)
    if reference is not None:
        folder = reference_folder(root, reference)
        for path in find_logs(folder):
            _read_into(folder, path, runs, skipped, as_reference=True)
    return LoadResult(runs=assign_variants(runs), skipped=skipped)


def reference_folder(root: Path, name: str) -> Path:
    """`root/reference/NAME`; a one-line error lists the names there when it does not exist."""
    folder = root / REFERENCE_FOLDER / name
    if not name or "/" in name or not folder.is_dir():
        parent = root / REFERENCE_FOLDER
        known = sorted(p.name for p in parent.iterdir() if p.is_dir()) if parent.is_dir() else []
        raise LogFormatError(
            f"--reference {name!r}: no folder {folder}; references there: {', '.join(known) or 'none'}"
        )
    return folder


def _read_into(root: Path, path: Path, runs: list[Run], skipped: list[Skipped], as_reference: bool) -> None:
    try:
        run = _read_run(root, path)
    except LogFormatError as exc:
        skipped.append(Skipped(path, str(exc)))
        return
    runs.append(replace(run, config=replace(run.config, reference=True)) if as_reference else run)


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
        compile_settings=_compile_settings(
            settings, _optional_mapping(where, meta, "distribution"), _optional_mapping(where, meta, "hardware")
        ),
        measured=_measured(where, meta),
    )


def _measured(where: Path, meta: Mapping[str, Any]) -> Measured:
    stability = _optional_mapping(where, meta, "stability")
    energy = _optional_mapping(where, meta, "energy")
    hardware = _optional_mapping(where, meta, "hardware")
    repeat = _optional_mapping(where, meta, "repeat")
    fingerprint = _optional_mapping(where, meta, "fingerprint")
    label = stability.get("label")
    if label is not None and label not in STABILITY_LABELS:
        expected = ", ".join(STABILITY_LABELS)
        raise LogFormatError(f"{where}: field 'stability.label' is {label!r}; expected one of {expected}")
    host_bound = stability.get("host_bound")
    if host_bound is not None and not isinstance(host_bound, bool):
        raise LogFormatError(f"{where}: field 'stability.host_bound' is {host_bound!r}; expected true, false or null")
    return Measured(
        stability=label,
        steady_cv=_optional_number(where, stability, "stability", "steady_cv"),
        host_bound=host_bound,
        host_share=_optional_number(where, stability, "stability", "host_share"),
        gpu_wh=_optional_number(where, energy, "energy", "gpu_wh"),
        gpu_wh_per_steady_epoch=_steady_epoch_wh(where, energy.get("gpu_joules_per_epoch")),
        host_wh=_optional_number(where, energy, "energy", "host_wh"),
        energy_method=energy.get("gpu_method"),
        host_id=str(hardware["host_id"]) if hardware.get("host_id") else None,
        repeat_group=str(repeat["group"]) if repeat.get("group") else None,
        fingerprint=fingerprint or None,
    )


def _steady_epoch_wh(where: Path, joules: object) -> float | None:
    if joules is None:
        return None
    if not isinstance(joules, list) or not all(isinstance(j, int | float) and not isinstance(j, bool) for j in joules):
        raise LogFormatError(f"{where}: field 'energy.gpu_joules_per_epoch' is {joules!r}; expected a list of numbers")
    steady = joules[1:]  # the first epoch compiles, as in the timing
    return statistics.median(steady) / 3600 if steady else None


def _optional_number(where: Path, section: Mapping[str, Any], name: str, key: str) -> float | None:
    value = section.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise LogFormatError(f"{where}: field '{name}.{key}' is {value!r}; expected a number or null")
    return float(value)


def _compile_settings(
    settings: Mapping[str, Any], distribution: Mapping[str, Any], hardware: Mapping[str, Any]
) -> str | None:
    """What the run set that changes its times: runs differing in any of these are never pooled as repeats."""
    if not settings:
        return None
    parts = [f"jit {'on' if settings.get('jit_compile') else 'off'}"]
    if (distribution.get("devices") or 1) > 1:  # never pool runs on several devices with one-device runs
        parts.append(f"{distribution['devices']} devices {distribution.get('batch_policy')}")
    if (settings.get("steps_per_execution") or 1) > 1:
        parts.append(f"{settings['steps_per_execution']} steps/execution")
    if settings.get("lstm_kernel"):
        parts.append(f"{settings['lstm_kernel']} LSTM")
    if settings.get("float32_matmul"):
        parts.append(f"{settings['float32_matmul']} matmul")
    if settings.get("host_gc") not in (None, "on"):  # --host-gc frozen/off: Python's collector changed
        parts.append(f"gc {settings['host_gc']}")
    usable, logical = hardware.get("cpu_cores_usable"), hardware.get("cpu_cores_logical")
    if usable and logical and usable < logical:  # held to fewer cores (taskset, a container's cpuset)
        parts.append(f"{usable} of {logical} cores")
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
    stem = REPEAT_SUFFIX.sub("", log.path.stem)
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
