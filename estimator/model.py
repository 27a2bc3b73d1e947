"""The estimator's model: a run's training time from measured throughput, and the runs it can be learned from.

A run's training time is its first epoch plus its steady epochs. A steady epoch of N training samples takes
N / throughput, the throughput (samples per second of steady epochs) taken from comparable runs; the first epoch
takes a steady epoch plus the compilation the comparable runs spent in theirs (first epoch - steady epoch). The
comparable runs are, in this order of bases:

1. measured: runs of the same workload, backend, machine and global batch in the user's logs/ and the committed
   logs/reference/, shipped as a table (estimator.basis) (those of the same configuration where the target names
   one, else of the configuration measured most, the default settings);
2. published: the same, from the published studies' figures (estimator.published);
3. hardware: the same workload, backend and batch on the nearest machine of the same kind (GPU or CPU) with a
   speed figure in data/estimate.toml, its throughput scaled by (figure ratio) ^ exponent, the exponent fitted on
   the workloads that ran on two such machines (`fits`); a ratio wider than any fitted on is said to be
   extrapolated.

Among comparable runs, those whose sample count is nearest the target's are used (epochs of small slices carry
fixed costs that larger ones spread), and their medians taken. Nothing comparable: no figure.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache

from benchmarks.metadata import UNCACHED
from benchmarks.workloads import WORKLOADS
from estimator.published import Figures, Study, load_studies, published_figures
from estimator.workload_plan import estimate_data, planned_spec, train_samples
from records.loading import Run

BASES = ("measured", "published", "hardware")
# h200, k80, p100, a10g, l4, l40s, t4, b200, m60, p6000; not "80gb", and not the machine families n1, e2 or c2
# that a CPU machine's description names.
MODEL = re.compile(r"^[abhklmptv]\d{1,4}[a-z]{0,2}$")
GPU_WORDS = ("nvidia", "tesla", "geforce", "gtx", "rtx", "quadro", "radeon", "gpu")
GEFORCE = ("gtx", "rtx")
MACHINE_TYPE = re.compile(r"\b([a-z]\d[a-z]?-[a-z]+-\d+|[a-z]\d[a-z]*\.\d*x?large)\b")  # n1-highcpu-16, c5.4xlarge
MIN_FIGURE_RATIO = 1.2  # machines closer than this say too little about the exponent


def accelerator_model(text: str | None) -> str:
    """ "nvidia-h100-80gb", "NVIDIA H200", "Tesla K80", "GeForce GTX 1070 Ti" -> "h100", "h200", "k80",
    "gtx1070ti"; no GPU -> "cpu"."""
    lowered = (text or "").lower()
    tokens = [t for t in re.split(r"[^a-z0-9]+", lowered) if t]
    for i, word in enumerate(tokens[:-1]):
        if word in GEFORCE and tokens[i + 1].isdigit():
            return f"{word}{tokens[i + 1]}{'ti' if tokens[i + 2 : i + 3] == ['ti'] else ''}"
    models = [t for t in tokens if MODEL.match(t)]
    # "AWS p2.xlarge: half a Tesla K80": the model named after a GPU word wins over an instance family.
    named = [t for before, t in itertools.pairwise(tokens) if before in GPU_WORDS and MODEL.match(t)]
    if named or models:
        return (named or models)[0]
    # A GPU of no known model is named as written; anything else (no text, a CPU machine) is a CPU.
    return lowered if any(word in lowered for word in GPU_WORDS) else "cpu"


def cpu_machine(text: str | None) -> str:
    """A CPU machine's key: "cpu:n1-highcpu-16" where a machine type is named (an 8-core and a 64-core machine of
    one family differ severalfold), else "cpu"."""
    found = MACHINE_TYPE.search((text or "").lower())
    return f"cpu:{found.group(1)}" if found else "cpu"


def machine_kind(machine: str) -> str:
    return "cpu" if machine.startswith("cpu") else "gpu"


@cache
def speed_figure(machine: str) -> float | None:
    """FP32 TFLOP/s of a GPU, vCPUs of a CPU machine (data/estimate.toml); None where the table has none."""
    data = estimate_data()
    if machine.startswith("cpu:"):
        entry = data["cpus"].get(machine.removeprefix("cpu:"))
        return None if entry is None else float(entry["vcpus"])
    entry = data["gpus"].get(machine)
    return None if entry is None else float(entry["tflops"])


@dataclass(frozen=True)
class Observation:
    """One run, as the estimator sees it."""

    workload: str
    backend: str
    machine: str  # "h200", "k80", "gtx1070ti", "cpu:n1-highcpu-8", "cpu"
    batch: int  # global batch size
    origin: str  # "measured" or "published"
    group: str  # runs of one workload, backend, machine and configuration
    variant: str  # the configuration's settings ("" where runs of a platform differ in none)
    where: str  # what a user reads as the basis
    samples: int  # training samples per epoch
    epochs: int
    first_s: float
    steady_s: float
    total_s: float  # the run's training time: every epoch
    outside_s: float | None = None  # the run's time outside its epochs: data, model, fingerprint (measured runs)
    defaults: bool = True  # trained with the runner's default settings in a fresh process (Run.default_settings)
    cached_first: bool = False  # its first epoch loaded most programs from a compile cache instead of compiling
    code: str = ""  # a plug-in workload's file sha256 ("" for a built-in one)
    warm_first: bool = False  # a later workload of a shared process: its first epoch found the framework started
    host_score: float | None = None  # the host's single-thread score (fingerprint), for the host's share of a step
    jit_compile: bool | None = None  # compiled (XLA, torch.compile) or eager, as the run resolved it
    precision: str | None = None  # its matrix products': "bf16"/"fp16" (mixed precision), "tf32" or "fp32"
    devices: int = 1  # devices per node it trained on (one process over them, or a process each on several nodes)
    nodes: int = 1
    base_machine: str = ""  # the machine without its devices and nodes ("" where the same as `machine`)

    @property
    def throughput(self) -> float:
        return self.samples / self.steady_s

    @property
    def compile_s(self) -> float:
        return max(self.first_s - self.steady_s, 0.0)


@dataclass(frozen=True)
class Target:
    workload: str
    backend: str
    machine: str
    batch: int
    samples: int
    epochs: int
    variant: str | None = None  # the configuration to prefer; None: the one measured most
    speedup: float = 1.0  # the steady epochs' speed-up on several devices or nodes (estimator.parallel)


@dataclass(frozen=True)
class Prediction:
    seconds: float  # training time
    basis: str  # one of BASES
    where: str
    outside_s: float | None = None  # the median time the runs it came from spent outside their epochs


# ---- observations ---------------------------------------------------------------------------------------------


def measured_observations(runs: Iterable[Run], origin_text: str) -> list[Observation]:
    return [o for o in (_observation(run, origin_text) for run in runs) if o is not None]


def _observation(run: Run, origin_text: str) -> Observation | None:
    """A complete run of one of our workloads that recorded its sample count; None for any other."""
    steady, first = run.steady_median_s, run.log.first_epoch.elapsed if run.log.first_epoch else None
    samples = run.metadata.data.train_samples
    if not run.complete or not steady or first is None or samples is None or samples <= 0:
        return None
    source = run.metadata.plugin
    if run.workload not in WORKLOADS and source is None:
        return None
    gpus = run.metadata.hardware.get("gpus") or []
    name = gpus[0].get("name") if gpus and isinstance(gpus[0], dict) else None
    distribution = run.metadata.distribution or {}
    devices = run.cluster.per_node if run.cluster else int(distribution.get("devices") or 1)
    nodes = run.cluster.nodes if run.cluster else 1
    base = accelerator_model(name) if name else cpu_machine(run.config.platform)
    machine = shaped(base, devices, nodes)
    recorded = distribution.get("global_batch_size")
    if recorded is None and source is not None:
        return None  # a plug-in's batch is only what its run recorded
    batch = int(recorded or planned_spec(run.workload).batch_size)
    code = source.sha256 if source is not None else ""
    return Observation(
        workload=run.workload,
        backend=run.config.backend,
        machine=machine,
        batch=batch,
        origin="measured",
        group=f"{run.workload}{code[:12]}|{run.config.label}|{machine}|{batch}|{samples}|{run.epochs_planned}",
        variant=run.config.variant,
        where=f"{origin_text} {run.config.label}",
        samples=samples,
        epochs=run.epochs_completed,
        first_s=first,
        steady_s=steady,
        total_s=run.total_s,
        outside_s=_outside_s(run),
        defaults=run.default_settings,
        cached_first=first_epoch_cached(run),
        code=code,
        warm_first=warm_first(run),
        host_score=run.metadata.fingerprint.host_single_thread_score if run.metadata.fingerprint else None,
        jit_compile=jit if isinstance(jit := run.metadata.settings.jit_compile, bool) else None,
        precision=precision_of(run.metadata.settings.dtype_policy, run.metadata.settings.float32_matmul),
        devices=devices,
        nodes=nodes,
        base_machine=base,
    )


def precision_of(dtype_policy: str | None, float32_matmul: str | None) -> str:
    """What a run's matrix products computed in: its mixed-precision type, else float32 in TF32 or in full."""
    half = {"mixed_bfloat16": "bf16", "mixed_float16": "fp16"}.get(dtype_policy or "")
    return half or ("tf32" if float32_matmul == "tf32" else "fp32")


def shaped(machine: str, devices: int = 1, nodes: int = 1) -> str:
    """A machine key with its devices per node and its nodes: "h200", "h200x4", "h200x4 on 2 nodes"."""
    return machine + (f"x{devices}" if devices > 1 else "") + (f" on {nodes} nodes" if nodes > 1 else "")


def first_epoch_cached(run: Run) -> bool:
    """Whether the run's first epoch loaded most of its programs from a compile cache: a `mixed` one that compiled
    more than it loaded measured what a fresh machine pays, near enough."""
    cache = run.metadata.settings.compile_cache
    if cache is None or cache.state in UNCACHED:
        return False
    return cache.state != "mixed" or cache.hits > cache.misses


def warm_first(run: Run) -> bool:
    """Whether the run was a later workload of a shared process (`make bench` trains each backend's workloads in
    one): its steady epochs count as any run's, but its first epoch did not pay the process's start-up, so `_from`
    takes the first epoch's extra time from the runs that were first in their process, where any were."""
    place = run.metadata.process
    return place is not None and place.position > 1


def _outside_s(run: Run) -> float | None:
    """Wall time of the run's process outside its epochs (data loading, model building, fingerprint)."""
    started, ended = run.metadata.started_at, run.metadata.ended_at
    try:
        wall = (dt.datetime.fromisoformat(str(ended)) - dt.datetime.fromisoformat(str(started))).total_seconds()
    except ValueError:
        return None
    return max(wall - run.total_s, 0.0)


def _published_machine(hardware: str) -> str:
    """ "1x Tesla K80 + GCE n1-standard-1" -> "k80"; "GCE preemptible n1-highcpu-16" -> "cpu:n1-highcpu-16"."""
    model = accelerator_model(hardware.split(" + ")[0].split("x ")[-1])
    return cpu_machine(hardware) if model == "cpu" else model


@cache
def published_observations() -> tuple[Observation, ...]:
    """Every published run of a workload of ours, on the published (full) data and batch."""
    found: list[Observation] = []
    groups: dict[tuple[str, str, str, float, float, float], str] = {}
    for study in load_studies().values():
        for row in published_figures(study):
            o = _published(study, row)
            if o is None:
                continue
            # Logs one study copied from another (the November 2017 K80 CNTK logs are the June ones) are one group:
            # left out together, so that a copy does not predict itself.
            same = groups.setdefault((o.workload, o.backend, o.machine, o.first_s, o.steady_s, o.total_s), o.group)
            found.append(replace(o, group=same))
    return tuple(found)


def _published(study: Study, row: Figures) -> Observation | None:
    workload, config = row.workload, row.config
    if workload not in WORKLOADS:
        return None
    if study.kind == "provider-table":
        if " x" in config:  # trained on several GPUs with multi_gpu_model
            return None
        machine = accelerator_model(config)
        steady = first = row.total_s / row.epochs  # totals only: no first epoch apart
        total = row.total_s
    else:
        published = next(c for c in study.configs if c.name == row.platform)
        machine = _published_machine(published.hardware)
        if row.steady_epoch_s is None or row.first_epoch_s is None:  # a single-epoch log
            return None
        steady, first = row.steady_epoch_s, row.first_epoch_s
        # Where the study published whole-run times (data loading included), the epochs are the training.
        total = row.total_s if published.wall_seconds is None else first + (row.epochs - 1) * steady
    return Observation(
        workload=workload,
        backend=row.backend,
        machine=machine,
        batch=planned_spec(workload).batch_size,
        origin="published",
        group=f"{workload}|{config}|{study.name}",
        variant="",
        where=f"published {config} ({study.name})",
        samples=train_samples(workload),
        epochs=row.epochs,
        first_s=first,
        steady_s=steady,
        total_s=total,
    )


# ---- prediction -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fit:
    """How throughput grows with a kind of machine's speed figure: as (figure ratio) ^ exponent."""

    exponent: float
    pairs: int  # the workload x backend x batch x sample-count pairs of machines it was fitted on
    widest: float  # the largest figure ratio among them: beyond it the relation is extrapolated


def fits(pool: Sequence[Observation]) -> dict[str, Fit]:
    """Per machine kind, the median over every workload, backend, batch and sample count run on two machines of
    that kind of log(throughput ratio) / log(figure ratio)."""
    by_key: dict[tuple[str, str, int, int, str], list[float]] = defaultdict(list)
    for o in pool:
        if speed_figure(o.machine) is not None:
            by_key[(o.workload, o.backend, o.batch, o.samples, o.machine)].append(o.throughput)
    medians: dict[tuple[str, str, int, int], dict[str, float]] = defaultdict(dict)
    for (workload, backend, batch, samples, machine), values in by_key.items():
        medians[(workload, backend, batch, samples)][machine] = statistics.median(values)
    slopes: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for machines in medians.values():
        for (a, ta), (b, tb) in itertools.combinations(sorted(machines.items()), 2):
            fa, fb = speed_figure(a), speed_figure(b)
            assert fa is not None and fb is not None
            ratio = max(fa, fb) / min(fa, fb)
            if machine_kind(a) == machine_kind(b) and ratio >= MIN_FIGURE_RATIO:
                slopes[machine_kind(a)].append((math.log(ta / tb) / math.log(fa / fb), ratio))
    return {
        kind: Fit(statistics.median(s for s, _ in found), len(found), max(r for _, r in found))
        for kind, found in slopes.items()
    }


def predict(
    target: Target, pool: Sequence[Observation], fitted: Mapping[str, Fit], hardware: bool = True
) -> Prediction | None:
    """From the target machine's own runs (measured, then published), else (`hardware`) from the nearest machine's."""
    comparable = [
        o for o in pool if o.workload == target.workload and o.backend == target.backend and o.batch == target.batch
    ]
    same_machine = [o for o in comparable if o.machine == target.machine]
    for origin in ("measured", "published"):
        chosen = _configuration([o for o in same_machine if o.origin == origin], target.variant)
        if chosen:
            return _from(target, chosen, origin, 1.0, "")
    return _from_hardware(target, comparable, fitted) if hardware else None


def _from_hardware(target: Target, comparable: Sequence[Observation], fitted: Mapping[str, Fit]) -> Prediction | None:
    kind, figure = machine_kind(target.machine), speed_figure(target.machine)
    if figure is None or kind not in fitted:
        return None
    others = [
        o
        for o in comparable
        if o.machine != target.machine and machine_kind(o.machine) == kind and speed_figure(o.machine) is not None
    ]
    if not others:
        return None

    def distance(o: Observation) -> tuple[float, bool]:
        other = speed_figure(o.machine)
        assert other is not None
        return abs(math.log(figure / other)), o.origin != "measured"

    nearest = min(others, key=distance)
    same = [o for o in others if o.machine == nearest.machine and o.origin == nearest.origin]
    other_figure = speed_figure(nearest.machine)
    assert other_figure is not None
    fit, ratio = fitted[kind], max(figure, other_figure) / min(figure, other_figure)
    scale = (figure / other_figure) ** fit.exponent
    beyond = f"; extrapolated: fitted on machines at most {fit.widest:.1f}x apart" if ratio > fit.widest else ""
    note = f" ({nearest.machine}, scaled x{scale:.2f} for a {target.machine}{beyond})"
    return _from(target, _configuration(same, target.variant), "hardware", scale, note)


def _configuration(observations: Sequence[Observation], variant: str | None) -> list[Observation]:
    """The runs of the target's configuration, else of the default settings' configuration measured most (a
    sweep's variant, or a repeat forked from a preloaded parent, is not what the runner does), else of the
    configuration measured most."""
    if not observations:
        return []
    defaults = [o for o in observations if o.defaults]
    variants = Counter(o.variant for o in observations)
    chosen = (
        variant if variant in variants else Counter(o.variant for o in defaults or observations).most_common(1)[0][0]
    )
    return [o for o in observations if o.variant == chosen]


def _from(target: Target, observations: Sequence[Observation], basis: str, scale: float, note: str) -> Prediction:
    def distance(o: Observation) -> float:
        return abs(math.log(o.samples / target.samples))

    nearest = min(distance(o) for o in observations)
    used = [o for o in observations if distance(o) == nearest]
    throughput = statistics.median(o.throughput for o in used) * scale
    # Orchestrated runs keep no compile cache, so their first epoch compiles: its cost comes from the runs that
    # compiled, where any did; a warm cache's load would understate it several times over.
    compiled = [o for o in used if not o.cached_first and not o.warm_first]
    compile_s = statistics.median(o.compile_s for o in compiled or used)
    seconds = compile_s + target.epochs * target.samples / (throughput * target.speedup)
    runs = f"{len(used)} run{'s' if len(used) != 1 else ''}"
    outside = [o.outside_s for o in used if o.outside_s is not None]
    where = f"{used[0].where}{note}, {runs} of {used[0].samples:,} samples"
    cached = sum(o.cached_first for o in used)
    warm = sum(o.warm_first and not o.cached_first for o in used)
    if (cached or warm) and compiled:
        where += f" (the first epoch's compile from the {len(compiled)} that compiled in a fresh process; "
        where += f"{cached} loaded a cache)" if cached else f"{warm} followed another workload in its process)"
    elif cached:
        where += (
            f" ({cached} of them loaded compiled programs from a cache in their first epoch: a fresh machine compiles)"
        )
    elif warm:
        where += " (each followed another workload in its process: its first epoch paid no start-up of its own)"
    return Prediction(seconds, basis, where, statistics.median(outside) if outside else None)


def outside_epochs_s(workload: str, backend: str, pool: Sequence[Observation]) -> float:
    """Median time a measured run spent outside its epochs: same workload and backend, else same workload, else
    any measured run; 0 where none recorded it."""
    recorded = [o for o in pool if o.outside_s is not None]
    for match in (
        lambda o: o.workload == workload and o.backend == backend,
        lambda o: o.workload == workload,
        lambda o: True,
    ):
        values = [o.outside_s for o in recorded if match(o) and o.outside_s is not None]
        if values:
            return statistics.median(values)
    return 0.0
