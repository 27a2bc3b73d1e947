"""Turn the epoch logs under a folder into runs: one run = one CSV (+ its metadata) = one repeat.

Logs are read only through `benchmarks.logs`, which also reads the published 2017 logs. A file that cannot be
read is skipped with a one-line reason naming it; the other files are still reported.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchmarks.harness import backends
from benchmarks.logs import STATUS_COMPLETE, EpochLog, LogFormatError, find_logs, read_epoch_log
from benchmarks.metadata import UNCACHED, Fingerprint, RunMetadata, Settings, StabilityLabel

RUN_ID_PATTERN = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{4}$")
# A repeat's files carry its two-digit index: `<workload>_<backend>[_synthetic].r02.csv`.
REPEAT_SUFFIX = re.compile(r"\.r\d{2}$")
# The project's committed measurements live under `<logs>/reference/<NAME>/`, apart from the user's runs.
REFERENCE_FOLDER = "reference"
# Backends a log's file name can end with: ours, plus those of the published logs.
KNOWN_BACKENDS = ("tensorflow", "jax", "torch", "torch-native", "cntk", "theano")
SYNTHETIC_SUFFIX = "_synthetic"
DATA_SOURCES = ("real", "synthetic")
NO_RUN_ID = "-"
# How a run's process differed from a fresh one of its own, as its label says it: by the design its starter
# recorded (`process.design`, benchmarks.cli.main), the campaign's two in words; a repeat trained with other
# workloads in one process (the runner's own repeats never are) is a round.
PROCESS_VARIANTS = {
    "preloaded": "forked from a preloaded parent",
    "staged": "forked with its round, steady epochs in turn",
}
ROUND_VARIANT = "one process per round"
UNRECORDED = RunMetadata.from_dict({})  # the metadata of a log without any (a published one): every field unknown


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

    stability: StabilityLabel | None = None
    steady_cv: float | None = None
    host_bound: bool | None = None
    host_share: float | None = None  # fraction of steady-epoch time the GPU sat idle
    gpu_wh: float | None = None
    gpu_wh_per_steady_epoch: float | None = None  # median over the epochs after the compiling one
    host_wh: float | None = None
    energy_method: str | None = None
    host_id: str | None = None
    repeat_group: str | None = None
    fingerprint: Fingerprint | None = None


@dataclass(frozen=True)
class Cluster:
    """A run trained across the processes of a job of several nodes (`orchestrate run --nodes N`): what the job
    recorded beside its logs before the clock started, `orchestrate/<stem>.allreduce.json` (the all-reduce check,
    benchmarks.allreduce) and `orchestrate/<stem>.setup.json` (when the image was present on every node)."""

    nodes: int
    processes: int
    per_node: int
    hosts: tuple[str, ...]
    backend: str  # the check's process group: gloo or nccl
    bus_gbps: float | None  # nccl-tests' bus bandwidth of the check's all-reduce
    interconnect: str  # what the processes saw of the network, e.g. "eth0 (25 Gb/s)", "NCCL network IB"
    setup_s: float | None = None  # the image made present on every node
    check_s: float | None = None  # the all-reduce check

    @property
    def shape(self) -> str:
        return f"{self.nodes} nodes x {self.per_node} process{'es' if self.per_node > 1 else ''}"


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
    process_variant: str = ""  # not trained alone in a fresh process: how (process_variant)
    measured: Measured = field(default_factory=Measured)
    cluster: Cluster | None = None  # trained across nodes: the job's check and set-up

    @property
    def metadata(self) -> RunMetadata:
        return self.log.metadata or UNRECORDED

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
        """The compiling epoch of a fresh process; None where the run loaded its programs from a warm compile
        cache (that epoch measured a load) or followed another workload in its process (the process's start-up
        was paid before it): such epochs are never pooled with fresh compiles, campaign.configurations shows
        them apart."""
        first = self.log.first_epoch
        cache = self.metadata.settings.compile_cache
        place = self.metadata.process
        if first is None or (cache is not None and cache.state not in UNCACHED) or (place and place.position > 1):
            return None
        return first.elapsed

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
        sampled = self.metadata.gpu_utilization
        return sampled.mean_pct if sampled else None

    @property
    def error(self) -> str:
        return self.metadata.error or ""

    @property
    def default_settings(self) -> bool:
        """Whether the run trained as the runner does by default (`default_settings` below): not a sweep's variant,
        a diagnostic host setting or a shared-process design."""
        return not self.process_variant and default_settings(self.metadata)

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


def _run_from_metadata(log: EpochLog, meta: RunMetadata) -> Run:
    where = log.path.with_suffix(".json")
    for key in ("workload", "backend", "platform"):
        if not getattr(meta, key):
            raise LogFormatError(f"{where}: field '{key}' is missing or empty; expected a non-empty string")
    source = meta.data.source or "unknown"
    if source not in (*DATA_SOURCES, "unknown"):
        raise LogFormatError(f"{where}: field 'data.source' is {source!r}; expected real or synthetic")
    cluster = read_cluster(log.path)
    settings = _compile_settings(meta)
    if cluster is not None:  # never pooled with one node's runs, nor with another shape's
        settings = ", ".join(part for part in (settings, cluster.shape) if part)
    return Run(
        workload=meta.workload,
        config=Configuration(platform=meta.platform, backend=meta.backend, synthetic=source == "synthetic"),
        run_id=meta.run_id or NO_RUN_ID,
        log=log,
        data_source=source,
        epochs_planned=meta.epochs_planned,
        image=_short_image_name(meta.container.image if meta.container else None),
        precision=meta.settings.dtype_policy,
        compile_settings=settings,
        process_variant=process_variant(meta),
        measured=_measured(meta),
        cluster=cluster,
    )


def read_cluster(csv: Path) -> Cluster | None:
    """The job's record of a run across nodes, beside the run's CSV (None: one node, or none recorded); a record
    that cannot be read is left out (it changes no time the run measured)."""
    stem = REPEAT_SUFFIX.sub("", csv.stem).removesuffix(SYNTHETIC_SUFFIX) + "".join(REPEAT_SUFFIX.findall(csv.stem))
    folder = csv.parent / "orchestrate"
    try:
        check = json.loads((folder / f"{stem}.allreduce.json").read_text())
        hosts = tuple(str(host) for host in check["hosts"])
        cluster = Cluster(
            nodes=int(check["nodes"]),
            processes=int(check["processes"]),
            per_node=int(check["processes_per_node"]),
            hosts=hosts,
            backend=str(check["backend"]),
            bus_gbps=float(check["bus_gbps"]) if check.get("bus_gbps") is not None else None,
            interconnect=_interconnect(check.get("interconnect") or {}),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        setup = json.loads((folder / f"{stem}.setup.json").read_text())
        image, checked = setup["image"], setup["check"]
        return replace(
            cluster, setup_s=float(image[1]) - float(image[0]), check_s=float(checked[1]) - float(checked[0])
        )
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return cluster


def _interconnect(seen: dict[str, object]) -> str:
    parts = []
    if seen.get("interface"):
        speed = seen.get("link_mbps")
        parts.append(f"{seen['interface']}" + (f" ({float(str(speed)) / 1000:g} Gb/s)" if speed else ""))
    if seen.get("nccl_network"):
        parts.append(f"NCCL network {seen['nccl_network']}")
    infiniband = seen.get("infiniband")
    if isinstance(infiniband, list) and infiniband:
        parts.append("InfiniBand " + ", ".join(str(device) for device in infiniband))
    return "; ".join(parts) or "unknown"


def _measured(meta: RunMetadata) -> Measured:
    stability, energy, repeat = meta.stability, meta.energy, meta.repeat
    return Measured(
        stability=stability.label if stability else None,
        steady_cv=stability.steady_cv if stability else None,
        host_bound=stability.host_bound if stability else None,
        host_share=stability.host_share if stability else None,
        gpu_wh=energy.gpu_wh if energy else None,
        gpu_wh_per_steady_epoch=_steady_epoch_wh(energy.gpu_joules_per_epoch) if energy else None,
        host_wh=energy.host_wh if energy else None,
        energy_method=energy.gpu_method if energy else None,
        host_id=str(meta.hardware["host_id"]) if meta.hardware.get("host_id") else None,
        repeat_group=repeat.group if repeat and repeat.group else None,
        fingerprint=meta.fingerprint,
    )


def _steady_epoch_wh(joules: list[float]) -> float | None:
    steady = joules[1:]  # the first epoch compiles, as in the timing
    return statistics.median(steady) / 3600 if steady else None


def default_settings(meta: RunMetadata) -> bool:
    """Whether a run's recorded settings are those the runner picks for its workload, backend and device when no
    flag changes them (benchmarks.harness.backends): jit and steps per execution, the LSTM kernel, float32 matmuls,
    Python's collector and all the machine's cores. A setting a run did not record counts as the default."""
    if meta.backend not in backends.DEFAULTS:  # a published log (no metadata, or another framework): not recorded
        return True
    settings, hardware = meta.settings, meta.hardware
    gpu = bool(hardware.get("gpus")) or (meta.distribution or {}).get("device_type") == "gpu"
    default = backends.default_settings(meta.backend, meta.workload, gpu)
    recorded = (
        (settings.jit_compile_requested, default.jit_compile),
        (settings.steps_per_execution, default.steps_per_execution),
        (settings.use_cudnn, default.use_cudnn),
        (settings.float32_matmul, default.float32_matmul),
    )
    usable, logical = hardware.get("cpu_cores_usable"), hardware.get("cpu_cores_logical")
    return (
        all(value is None or value == expected for value, expected in recorded)
        and settings.host_gc in (None, "on")
        and not (usable and logical and usable < logical)
    )


def _compile_settings(meta: RunMetadata) -> str | None:
    """What the run set that changes its times: runs differing in any of these are never pooled as repeats."""
    settings, distribution, hardware = meta.settings, meta.distribution or {}, meta.hardware
    if settings == Settings():  # none recorded
        return None
    parts = [f"jit {'on' if settings.jit_compile else 'off'}"]
    if (distribution.get("devices") or 1) > 1:  # never pool runs on several devices with one-device runs
        parts.append(f"{distribution['devices']} devices {distribution.get('batch_policy')}")
    if (settings.steps_per_execution or 1) > 1:
        parts.append(f"{settings.steps_per_execution} steps/execution")
    if settings.lstm_kernel:
        parts.append(f"{settings.lstm_kernel} LSTM")
    if settings.float32_matmul:
        parts.append(f"{settings.float32_matmul} matmul")
    if settings.host_gc not in (None, "on"):  # --host-gc frozen/off: Python's collector changed
        parts.append(f"gc {settings.host_gc}")
    usable, logical = hardware.get("cpu_cores_usable"), hardware.get("cpu_cores_logical")
    if usable and logical and usable < logical:  # held to fewer cores (taskset, a container's cpuset)
        parts.append(f"{usable} of {logical} cores")
    return ", ".join(parts)


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


def _code(run: Run) -> str | None:
    """A plug-in workload's version: its file name and the start of its content hash (None: a built-in)."""
    source = run.metadata.plugin
    return f"{source.file} {source.sha256[:8]}" if source is not None else None


def assign_variants(runs: Iterable[Run]) -> list[Run]:
    """Name the image, precision and compile settings in a configuration only where runs of one platform+backend
    (for precision and settings: of one workload, whose own model may set its precision) differ in them, so that
    they are never pooled and labels stay short otherwise.
    Runs whose process was not a fresh one of their own (`process_variant`) are always named apart from fresh
    processes' runs, which stay unnamed; a suite's runs share a process by design and are not named for it. A
    user's workload file is named by its content hash where its runs trained more than one version of it."""
    runs = list(runs)
    images: dict[tuple[str, str], set[str | None]] = defaultdict(set)
    precisions: dict[tuple[str, str, str], set[str | None]] = defaultdict(set)
    compiled: dict[tuple[str, str, str], set[str | None]] = defaultdict(set)
    codes: dict[str, set[str | None]] = defaultdict(set)
    for run in runs:
        codes[run.workload].add(_code(run))
        key = (run.config.platform, run.config.backend)
        images[key].add(run.image)
        precisions[(*key, run.workload)].add(run.precision)
        compiled[(*key, run.workload)].add(run.compile_settings)
    named = []
    for run in runs:
        key = (run.config.platform, run.config.backend)
        parts = []
        if len(images[key]) > 1:
            parts.append(run.image or "no image")
        if len(precisions[(*key, run.workload)]) > 1:
            parts.append(run.precision or "default precision")
        if len(compiled[(*key, run.workload)]) > 1:
            parts.append(run.compile_settings or "default settings")
        if len(codes[run.workload]) > 1:
            parts.append(_code(run) or "built in")
        if run.process_variant:
            parts.append(run.process_variant)
        named.append(replace(run, config=replace(run.config, variant=", ".join(parts))))
    return named


def process_variant(meta: RunMetadata) -> str:
    """How the run's process differed from a fresh process of its own, from its metadata alone ("" where it did
    not): a design its starter named, or a repeat trained beside other workloads in one process."""
    process = meta.process
    if process is None:
        return ""
    if process.design is not None:
        return PROCESS_VARIANTS.get(process.design, f"process design {process.design}")
    return ROUND_VARIANT if meta.repeat is not None and process.workloads > 1 else ""
