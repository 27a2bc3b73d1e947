"""The run-metadata schema: one typed record per run, written by the runner beside its CSV and read back by the
summary, the report and the GPU tools, instead of string keys spread over several modules.

Open-ended descriptions (the machine, the software, the telemetry samples, the distribution plan) stay mappings;
everything a number is judged by (status, data, timing, settings, repeat, stability, energy, fingerprint, container,
GPU utilisation) is typed. Reading checks each value against its field's type (MetadataError names the field) and is
otherwise tolerant: keys a newer writer added are kept in `extra`, and keys an older log lacks read as None, so logs
of every schema version load. docs/architecture.md's key list is checked against `key_list()`.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from functools import cache
from typing import Any

SCHEMA_VERSION = 2


class Status(enum.StrEnum):
    COMPLETE = "complete"  # a result
    PARTIAL = "partial"  # stopped early (error, interrupt, preemption); finished epochs are kept
    RUNNING = "running"  # written before training; a run that died without a word stays so


class StabilityLabel(enum.StrEnum):
    STABLE = "stable"
    UNSTABLE = "unstable"
    TOO_FEW_EPOCHS = "too few epochs"


class MetadataError(ValueError):
    """A metadata object that does not fit the schema; the message names the field and what it should be."""


@dataclass(frozen=True)
class DataRecord:
    """The data a run trained on (benchmarks.data.types.DataInfo, as recorded)."""

    dataset: str | None = None
    source: str | None = None  # "real" or "synthetic"
    train_samples: int | None = None
    val_samples: int | None = None
    files: list[dict[str, str]] = field(default_factory=list)  # [{name, sha256}]
    synthetic_reason: str | None = None


@dataclass(frozen=True)
class Container:
    image: str | None = None
    digest: str | None = None


@dataclass(frozen=True)
class GpuUtilization:
    """The busiest GPU's utilisation over the run's telemetry samples."""

    mean_pct: float | None = None
    max_pct: float | None = None
    samples: int = 0
    interval_s: float | None = None


@dataclass(frozen=True)
class Timing:
    first_epoch_s: float | None = None
    steady_median_s: float | None = None
    steady_epochs: int = 0
    total_s: float = 0.0
    harness_hook_s: float | None = None  # the timing callback's own work, CSV rows included
    # Where the run's time before its first epoch went: loading and preparing the data, building and compiling the
    # Keras model, describing the run (versions, hardware, the fingerprint's measurements).
    data_s: float | None = None
    build_s: float | None = None
    describe_s: float | None = None
    # What the run's extra callbacks (a `process.design` that takes turns on one device) held the loop after its
    # first epoch: outside every timed epoch, but inside the run's span.
    turn_wait_s: float | None = None


@dataclass(frozen=True)
class Final:
    loss: float | None = None
    acc: float | None = None
    val_loss: float | None = None
    val_acc: float | None = None


# Compile-cache states whose first epoch loaded nothing from the cache: it measured what a process without one does.
UNCACHED = ("cold", "unused")


@dataclass(frozen=True)
class CompileCache:
    """A persistent compile cache the run used (benchmarks.harness.compile_cache): where, and whether its compiles
    loaded from it (warm), compiled afresh (cold) or both (mixed), or looked nothing up (unused: an eager model). It
    changes the first epoch, not the steady ones."""

    dir: str
    state: str
    hits: int = 0
    misses: int = 0


@dataclass(frozen=True)
class Settings:
    """What changes a time, as the run used it."""

    jit_compile: bool | str | None = None
    jit_compile_requested: bool | str | None = None
    steps_per_execution: int | None = None
    dtype_policy: str | None = None
    float32_matmul: str | None = None
    lstm_kernel: str | None = None
    use_cudnn: bool | str | None = None
    host_gc: str | None = None
    omp_wait_policy: str | None = None  # PyTorch's OpenMP threads: PASSIVE by default (benchmarks.harness.backends)
    cudnn_benchmark: bool | None = None  # torch-native on GPUs: cuDNN's autotuning on (None: not set by the run)
    compile_cache: CompileCache | None = None  # None: no persistent cache asked for (each process compiles)


@dataclass(frozen=True)
class ProcessPlace:
    """Where the run stood in its process. The runner may train several workloads in one process; only the first
    pays the process's own start-up (library handles, allocator pools) in its first epoch, so the first epochs of
    the others are not pooled with it. `design` names how the process was started, in the words of whoever
    started it through the runner's Python API (`benchmarks.cli.main(design=...)`); None: a process started as
    `python -m benchmarks` starts one, fresh."""

    position: int  # 1: the process's first workload
    workloads: int  # how many the process was asked to train
    design: str | None = None


@dataclass(frozen=True)
class Repeat:
    group: str
    index: int
    planned: int | None = None
    target_ci_pct: float | None = None


@dataclass(frozen=True)
class Stability:
    steady_cv: float | None = None
    steady_epochs: int = 0
    outlier_epochs: list[int] = field(default_factory=list)
    label: StabilityLabel = StabilityLabel.TOO_FEW_EPOCHS
    host_share: float | None = None
    host_bound: bool | None = None


@dataclass(frozen=True)
class Energy:
    gpu_joules: float | None = None
    gpu_wh: float | None = None
    gpu_joules_per_epoch: list[float] = field(default_factory=list)
    gpu_method: str | None = None
    host_joules: float | None = None
    host_wh: float | None = None
    host_method: str | None = None


@dataclass(frozen=True)
class Fingerprint:
    device: str
    backend: str
    host_single_thread_score: float
    host_single_thread_unit: str
    seconds: float
    gemm_tflops: float | None = None
    device_memory_gbps: float | None = None
    host_to_device_gbps: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class WorkloadSource:
    """Where a workload that is not built in came from (benchmarks.plugins): a file or an installed
    package's entry point. None on a built-in workload's run."""

    kind: str  # "file" or "entry point"
    file: str  # the module file's name (its folder differs from machine to machine)
    sha256: str  # of the file's bytes: two runs of one workload name with different hashes trained different code
    entry_point: str | None = None  # "name = module" of an installed package
    distribution: str | None = None  # "package version"


@dataclass(frozen=True)
class RunSpecRecord:
    """What an orchestrated run carried (the orchestrator's BENCH_RUN_SPEC): its run spec's sha256, as its ledger
    entry records it, and its payload (the user's workload files and data folder): the sha256 of the payload's
    manifest, which names every file's, its files and bytes. None on a run started by hand."""

    sha256: str
    payload_sha256: str | None = None
    payload_files: int = 0
    payload_bytes: int = 0


@dataclass(frozen=True)
class RunMetadata:
    run_id: str
    workload: str
    backend: str
    platform: str
    status: Status
    schema_version: int = SCHEMA_VERSION
    suite: str | None = None
    epochs_planned: int | None = None
    epochs_completed: int | None = None
    seed: int | None = None
    started_at: str | None = None
    ended_at: str | None = None
    git_commit: str | None = None
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    cut: str | None = None
    cut_down: bool | None = None
    reference: str | None = None
    data: DataRecord = field(default_factory=DataRecord)
    settings: Settings = field(default_factory=Settings)
    software: dict[str, Any] = field(default_factory=dict)
    hardware: dict[str, Any] = field(default_factory=dict)
    container: Container | None = None
    fingerprint: Fingerprint | None = None
    repeat: Repeat | None = None
    process: ProcessPlace | None = None  # None: written before the place was recorded
    distribution: dict[str, Any] | None = None
    parameters: int | None = None
    timing: Timing | None = None
    final: Final | None = None
    stability: Stability | None = None
    telemetry: dict[str, Any] | None = None
    energy: Energy | None = None
    gpu_utilization: GpuUtilization | None = None
    after_training: dict[str, Any] | None = None
    error: str | None = None
    relabelled_from: dict[str, Any] | None = None
    plugin: WorkloadSource | None = None  # None: a built-in workload
    run_spec: RunSpecRecord | None = None  # None: not started by the orchestrator
    extra: dict[str, Any] = field(default_factory=dict)  # keys this schema does not know (a newer writer's)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object written beside the CSV (enums as their words, `extra` merged back in)."""
        out = {f.name: _plain(getattr(self, f.name)) for f in fields(self) if f.name != "extra"}
        return {**self.extra, **out}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> RunMetadata:
        """Read any schema version: missing keys (and nulls) take the field's default, unknown keys go to `extra`.
        A value of the wrong kind raises MetadataError naming the field, e.g. `stability.label`."""
        values = _values(cls, raw, "")
        values.setdefault("status", Status.PARTIAL)  # a log that never said is not a result
        for name in ("run_id", "workload", "backend", "platform"):
            values.setdefault(name, "")
        values.setdefault("schema_version", 1)
        known = {f.name for f in fields(cls)}
        return cls(**values, extra={k: v for k, v in raw.items() if k not in known})

    def finished(self, **changes: Any) -> RunMetadata:
        return dataclasses.replace(self, **changes)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _dataclass_in(annotation: Any) -> type | None:
    """The dataclass in `X | None` or `X`, if any."""
    return next((k for k in _kinds(annotation) if isinstance(k, type) and dataclasses.is_dataclass(k)), None)


def _kinds(annotation: Any) -> tuple[Any, ...]:
    """The types an annotation admits, None left out: `bool | str | None` -> (bool, str)."""
    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    return tuple(k for k in options if k is not type(None))


def _values(owner: type, raw: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """`owner`'s fields found in `raw`, each checked against its annotation."""
    hints = _hints(owner)
    return {
        f.name: _checked(hints[f.name], raw[f.name], prefix + f.name)
        for f in fields(owner)
        if f.name != "extra" and raw.get(f.name) is not None
    }


@cache
def _hints(owner: type) -> dict[str, Any]:
    """A block's annotations, resolved once: resolving them (typing.get_type_hints) costs more than reading a log."""
    return typing.get_type_hints(owner)


def _block(kind: type, raw: Mapping[str, Any], where: str) -> Any:
    if kind is ProcessPlace:
        raw = _process_design(raw)
    values = _values(kind, raw, where + ".")
    required = [f.name for f in fields(kind) if f.default is MISSING and f.default_factory is MISSING]
    if missing := [name for name in required if name not in values]:
        raise MetadataError(f"field '{where}.{missing[0]}' is missing")
    return kind(**values)


def _process_design(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """Logs before `process.design` said `preloaded` (forked from a parent that had imported the frameworks) and
    `staged` (forked with its siblings at once) as two flags: read as the designs those parents name."""
    if "design" in raw or not (raw.get("preloaded") or raw.get("staged")):
        return raw
    return {**raw, "design": "staged" if raw.get("staged") else "preloaded"}


def _checked(annotation: Any, value: Any, where: str) -> Any:
    kinds = _kinds(annotation)
    for kind in kinds:
        if _fits(kind, value):
            return _converted(kind, value, where)
    expected = " or ".join(_expected(k) for k in kinds) + (
        " or null" if len(kinds) < len(typing.get_args(annotation)) else ""
    )
    shown = repr(value) if not isinstance(value, dict | list) else type(value).__name__
    raise MetadataError(f"field '{where}' is {shown}; expected {expected}")


def _fits(kind: Any, value: Any) -> bool:
    origin = typing.get_origin(kind) or kind
    if kind is Any:
        return True
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return value in {member.value for member in kind}
    if dataclasses.is_dataclass(kind) or origin is dict:
        return isinstance(value, dict)
    if origin is list:
        return isinstance(value, list)
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, origin)


def _converted(kind: Any, value: Any, where: str) -> Any:
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return kind(value)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return _block(kind, value, where)
    if typing.get_origin(kind) is list:
        (item,) = typing.get_args(kind)
        return [_checked(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    return float(value) if kind is float else value


def _expected(kind: Any) -> str:
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return "one of " + ", ".join(member.value for member in kind)
    words = {bool: "true or false", int: "an integer", float: "a number", str: "a string", list: "a list"}
    return words.get(typing.get_origin(kind) or kind, "an object")


def key_list() -> dict[str, list[str]]:
    """Every top-level key, and the keys of each typed block: what docs/architecture.md must list."""
    blocks = {}
    hints = _hints(RunMetadata)
    for f in fields(RunMetadata):
        nested = _dataclass_in(hints[f.name])
        if nested is not None:
            blocks[f.name] = [g.name for g in fields(nested)]
    return {"": [f.name for f in fields(RunMetadata) if f.name != "extra"], **blocks}
