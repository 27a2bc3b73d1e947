"""The physics basis: a model on a GPU it has never run on, from its own step costs and what the GPU achieves.

    small_transformer [jax] on h200: 45.1 GFLOP of matrix products and 2,782 operations a step (its step costs,
    measured on the CPU), at h200's rates for jax (fitted on 11 workloads' runs): 0.66 ms a step + 0.49 us an
    operation + matrix products at 63 TFLOP/s ...

A workload's step costs (benchmarks.step_costs: the built-in workloads' in report/data/model_costs.toml, a workload
file's in logs/step-costs/ once `python -m benchmarks step-costs` or a dry run has measured it) are priced at the
target GPU's rates (estimator.throughput): fitted on its runs where it has runs (`physics`), else the measured GPUs'
rates with each kind of arithmetic scaled by the datasheet peaks of report/data/gpu_peaks.toml (`datasheet`).
A backend with no GPU runs of its own (TensorFlow) borrows JAX's rates (both compile with XLA), and says so.

The first epoch adds the compilation the GPU's runs of the same backend and compile mode spent (their median
first epoch less their steady epoch), and the run adds its time outside its epochs as every basis does.

`outcomes` is the basis's backtest: every measured GPU's default run of every workload predicted from the other
workloads' runs on that GPU (`physics`), and from the other GPUs' runs of the other workloads scaled by the
datasheet (`datasheet`).

The rates fitted on the committed reference runs, and the basis's ranges from its backtest, ship with the estimator
(`data/gpu_rates.json`), written with the reference basis by `python -m estimator.basis write`: a dry run fits
nothing unless the user's own logs hold GPU runs of the built-in workloads.
"""

from __future__ import annotations

import json
import math
import statistics
import tomllib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from benchmarks.harness.backends import REFERENCE, default_settings
from benchmarks.step_costs import StepCosts, recorded
from benchmarks.workloads import WORKLOADS
from estimator import DATA_DIR
from estimator.bands import Band, band
from estimator.model import Observation, Prediction, Target
from estimator.throughput import Rates, Work, fit, from_dict, informed_by, scaled

PHYSICS, DATASHEET = "physics", "datasheet"
PEAKS_FILE = DATA_DIR / "gpu_peaks.toml"
COSTS_FILE = DATA_DIR / "model_costs.toml"
RATES_TABLE = Path(__file__).resolve().parent / "data" / "gpu_rates.json"
RATES_VERSION = 2  # 2: shares of the peak at the run's precision, not FLOP/s
BORROWED = {"tensorflow": "jax"}  # a backend with no GPU runs prices its steps at another's rates
AUTO_JIT = {"jax": True, "tensorflow": True, "torch": False}  # what Keras's jit_compile="auto" does on a GPU


PRECISIONS = {"bfloat16": "bf16", "float16": "fp16"}  # the runner's mixed-precision types -> a peak's name
LABELS = {"tf32": "TF32", "fp32": "FP32", "bf16": "BF16", "fp16": "FP16"}


@cache
def peaks() -> dict[str, dict[str, float]]:
    """Per GPU, its dense datasheet peaks in FLOP/s by precision (tf32, fp32, bf16, fp16 where given)."""
    return {
        gpu: {k: float(v) * 1e12 for k, v in entry.items() if k in LABELS}
        for gpu, entry in tomllib.loads(PEAKS_FILE.read_text()).items()
    }


def peak(gpu: str, precision: str) -> tuple[float, str] | None:
    """The peak a step computing in `precision` ("tf32", "fp32", "bf16", "fp16") reaches on `gpu`, with the
    precision it runs at there: a half type the GPU lacks (bfloat16 before Ampere) and float32 without TF32 run on
    its float32 units; None for a GPU without a datasheet."""
    sheet = peaks().get(gpu)
    if sheet is None:
        return None
    order = {"tf32": ("tf32", "fp32"), "fp32": ("fp32",), "bf16": ("bf16", "fp32"), "fp16": ("fp16", "bf16", "fp32")}
    chosen = next(name for name in order[precision] if name in sheet)
    return sheet[chosen], LABELS[chosen]


@cache
def builtin_costs() -> dict[str, StepCosts]:
    """The built-in workloads' step costs, from report/data/model_costs.toml (python -m campaign.model_costs)."""
    raw = tomllib.loads(COSTS_FILE.read_text()) if COSTS_FILE.is_file() else {}
    return {
        name: StepCosts(
            workload=name,
            batch_size=int(entry["batch_size"]),
            matmul_flops=float(entry["matmul_flops"]),
            conv_flops=float(entry["conv_flops"]),
            operations=int(entry["operations"]),
            host_data_s=float(entry["host_data_s"]),
            host_score=float(entry["host_score"]),
            parameters=int(entry["parameters"]),
            data=str(entry["data"]),
            jax=str(entry["jax"]),
            keras=str(entry["keras"]),
        )
        for name, entry in raw.items()
        if "operations" in entry
    }


def costs_of(workload: str, code: str, logs: Path) -> StepCosts | None:
    """A built-in workload's step costs, or a workload file's (by its content hash) as recorded under `logs`."""
    if not code:
        return builtin_costs().get(workload)
    return next((c for c in recorded(logs) if c.workload == workload and c.sha256 == code), None)


# ---- the GPUs' rates -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fitted:
    """One GPU's rates for one backend, with the compilation its runs spent per compile mode."""

    rates: Rates
    compile_s: Mapping[bool | None, float]  # compiled (True) or eager (False): median first epoch less steady
    runs: int


def usable(o: Observation) -> bool:
    """A run the rates are fitted on: a built-in workload's default run on one GPU with a datasheet."""
    return o.origin == "measured" and o.defaults and not o.code and o.machine in peaks() and o.workload in WORKLOADS


def table(observations: Sequence[Observation], costs: Mapping[str, StepCosts]) -> dict[tuple[str, str], Fitted]:
    """(gpu, backend) -> its fitted rates, for every measured GPU and backend with enough workloads."""
    by_key: dict[tuple[str, str], list[Observation]] = defaultdict(list)
    for o in observations:
        if usable(o) and o.workload in costs:
            by_key[(o.machine, o.backend)].append(o)
    fitted = {}
    for (gpu, backend), runs in by_key.items():
        found = fit_gpu(gpu, backend, runs, costs)
        if found is not None:
            fitted[(gpu, backend)] = found
    for (gpu, backend), found in fitted.items():  # a fit its runs told nothing of arithmetic: another's shares,
        others = [f.rates for k, f in fitted.items() if k != (gpu, backend)]  # the same backend's first, then
        for kin in ([r for r in others if r.backend == backend], [r for r in others if r.gpu == gpu], others):
            if any(r.informed for r in kin):  # the same GPU's other backends, then any
                fitted[(gpu, backend)] = replace(found, rates=informed_by(found.rates, kin))
                break
    return fitted


def fit_gpu(gpu: str, backend: str, runs: Sequence[Observation], costs: Mapping[str, StepCosts]) -> Fitted | None:
    host = statistics.median([o.host_score for o in runs if o.host_score] or [0.0]) or None
    by_key: dict[tuple[str, str], list[Observation]] = defaultdict(list)  # a workload's runs per precision
    for o in runs:
        by_key[(o.workload, o.precision or "tf32")].append(o)
    works = []
    for (name, precision), found in sorted(by_key.items()):
        at = peak(gpu, precision)
        assert at is not None  # usable(): a GPU with a datasheet
        works.append(work(costs[name], host, at[0], statistics.median(o.steady_s * o.batch / o.samples for o in found)))
    rates = fit(gpu, backend, works, host or 0.0)
    if rates is None:
        return None
    return Fitted(rates, compile_medians(runs), len(runs))


def work(costs: StepCosts, host_score: float | None, peak_flops: float, step_s: float = 0.0) -> Work:
    """A workload's step costs on a host of `host_score` (None: as measured), at a GPU peak of `peak_flops`."""
    ratio = costs.host_score / host_score if host_score and costs.host_score else 1.0
    return Work(costs.workload, costs.host_data_s * ratio, costs.operations, costs.conv_flops, costs.matmul_flops,
                peak_flops, step_s)  # fmt: skip


def compile_medians(runs: Iterable[Observation]) -> dict[bool | None, float]:
    """Per compile mode, the median compilation of the runs that compiled in a fresh process."""
    by_mode: dict[bool | None, list[float]] = defaultdict(list)
    for o in runs:
        if not o.cached_first and not o.warm_first:
            by_mode[o.jit_compile].append(o.compile_s)
    return {mode: statistics.median(values) for mode, values in by_mode.items()}


# ---- prediction ------------------------------------------------------------------------------------------------


def target_precision(workload: str, backend: str) -> str:
    """What the runner computes `workload`'s matrix products in on a GPU by default: the reference workloads' mixed
    precision, else float32 in TF32 (a workload file's SPEC.mixed_precision is not read here: taken as float32)."""
    if workload in REFERENCE:
        return PRECISIONS.get(default_settings(backend, workload, gpu=True).precision, "tf32")
    return "tf32"


def target_jit(workload: str, backend: str) -> bool:
    """Whether the runner compiles `workload` on a GPU by default (a workload file: the backend's default)."""
    chosen = default_settings(backend, workload, gpu=True).jit_compile if workload in WORKLOADS else "auto"
    return AUTO_JIT[backend] if chosen == "auto" else bool(chosen)


def rates_for(
    gpu: str, backend: str, fitted: Mapping[tuple[str, str], Fitted], borrow: bool = True
) -> tuple[Fitted, str, str] | None:
    """The rates to price a step on `gpu` at: (fitted, basis, what they are) or None; `borrow`: another backend's
    where this one has no GPU runs."""
    own_backend = any(b == backend for _, b in fitted)
    priced_as = backend if own_backend else BORROWED.get(backend) if borrow else None
    if priced_as is None or gpu not in peaks():
        return None
    borrowed = f"; {backend} has no GPU runs: {priced_as}'s rates stand in (both compile with XLA)" * (
        priced_as != backend
    )
    own = fitted.get((gpu, priced_as))
    if own is not None:
        what = f"{gpu}'s rates for {priced_as}, fitted on {len(own.rates.workloads)} workloads' runs{borrowed}"
        return own, PHYSICS, what
    measured = [f for (g, b), f in sorted(fitted.items()) if b == priced_as]
    if not measured:
        return None
    rates = scaled([f.rates for f in measured], gpu)
    compile_s = {
        mode: statistics.median(f.compile_s[mode] for f in measured if mode in f.compile_s)
        for mode in {m for f in measured for m in f.compile_s}
    }
    gpus = "/".join(f.rates.gpu for f in measured)
    what = (
        f"{gpus}'s rates for {priced_as}, each kind of arithmetic at the share of the datasheet peak they reached, "
        f"on {gpu}'s own peak{borrowed}"
    )
    return Fitted(rates, compile_s, sum(f.runs for f in measured)), DATASHEET, what


def predict(
    target: Target, costs: StepCosts, fitted: Mapping[tuple[str, str], Fitted], borrow: bool = True
) -> Prediction | None:
    """The run's training time on `target.machine` from `costs`; None where the GPU has no datasheet or no rates
    can be had (`borrow`: another backend's rates may stand in)."""
    found = rates_for(target.machine, target.backend, fitted, borrow)
    if found is None or target.batch != costs.batch_size:
        return None
    chosen, basis, what = found
    rates = chosen.rates
    at = peak(target.machine, target_precision(target.workload, target.backend))
    assert at is not None  # rates_for: a GPU with a datasheet
    step = rates.step(work(costs, rates.host_score, at[0]))
    jit = target_jit(target.workload, target.backend)
    compile_s = chosen.compile_s.get(jit)
    if compile_s is None:
        compile_s = statistics.median(chosen.compile_s.values()) if chosen.compile_s else 0.0
    seconds = compile_s + target.epochs * target.samples / target.batch * step / target.speedup
    where = (
        f"{_costs_text(costs)}, at {what}: {_rates_text(rates)} of its {at[1]} {at[0] / 1e12:,.4g} TFLOP/s, "
        f"{step * 1e3:,.3g} ms a step of {target.batch}"
    )
    where += f"; first epoch +{compile_s:,.1f} s to {'compile' if jit else 'start'} (the median of its runs)"
    return Prediction(seconds, basis, where)


def _costs_text(costs: StepCosts) -> str:
    arithmetic = " and ".join(
        f"{value / 1e9:,.3g} GFLOP of {kind}"
        for kind, value in (("convolutions", costs.conv_flops), ("matrix products", costs.matmul_flops))
        if value
    )
    return f"{arithmetic or 'no matrix arithmetic'}, {costs.operations:,} operations a step (measured on the CPU)"


def _rates_text(rates: Rates) -> str:
    if rates.shared:
        arithmetic = f"arithmetic at {rates.matmul_share:.1%}"
    else:
        arithmetic = f"convolutions at {rates.conv_share:.1%}, matrix products at {rates.matmul_share:.1%}"
    return f"{rates.step_s * 1e3:,.2g} ms a step + {rates.operation_s * 1e6:,.2g} us an operation + {arithmetic}"


# ---- backtest --------------------------------------------------------------------------------------------------


def outcomes(
    observations: Sequence[Observation], costs: Mapping[str, StepCosts]
) -> list[tuple[str, Observation, Prediction | None]]:
    """Each measured GPU's default runs (fresh processes that compiled) of each workload with step costs, predicted
    from the other workloads' runs: on the same GPU (row `physics`) and on the other GPUs, scaled by the datasheet
    (row `datasheet`)."""
    runs = [o for o in observations if usable(o) and o.workload in costs]
    judged = [o for o in runs if not o.cached_first and not o.warm_first]
    found: list[tuple[str, Observation, Prediction | None]] = []
    for workload in sorted({o.workload for o in judged}):
        fitted = table([o for o in runs if o.workload != workload], costs)
        for o in (x for x in judged if x.workload == workload):
            target = Target(o.workload, o.backend, o.machine, o.batch, o.samples, o.epochs)
            own = {k: f for k, f in fitted.items() if k == (o.machine, o.backend)}
            others = {k: f for k, f in fitted.items() if k[0] != o.machine}
            found.append((PHYSICS, o, predict(target, costs[workload], own) if own else None))
            found.append((DATASHEET, o, predict(target, costs[workload], others) if others else None))
    return found


# ---- the shipped rates and ranges ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Shipped:
    fitted: dict[tuple[str, str], Fitted]
    bands: dict[str, Band]


MODES: dict[str, bool | None] = {"compiled": True, "eager": False, "unrecorded": None}


def rates_text(observations: Sequence[Observation]) -> str:
    """The rates fitted on `observations` (the reference basis) and the physics basis's ranges from their backtest,
    as written to data/gpu_rates.json: one line per GPU and backend."""
    costs = builtin_costs()
    errors: dict[str, list[float]] = defaultdict(list)
    for basis, o, found in outcomes(observations, costs):
        if found is not None:
            errors[basis].append(math.log(o.total_s / found.seconds))
    ranges = {basis: b for basis, values in sorted(errors.items()) if (b := band(values)) is not None}
    rows = [
        json.dumps(
            {
                **f.rates.as_dict(),
                "compile_s": {m: f.compile_s[v] for m, v in MODES.items() if v in f.compile_s},
                "runs": f.runs,
            }
        )
        for _, f in sorted(table(observations, costs).items())
    ]
    head = {"version": RATES_VERSION, "bands": {b: [r.low, r.high, r.runs] for b, r in ranges.items()}}
    return json.dumps(head)[:-1] + ', "rates": [\n' + ",\n".join(rows) + "\n]}\n"


def read_rates(path: Path = RATES_TABLE) -> Shipped:
    data = json.loads(path.read_text())
    if data.get("version") != RATES_VERSION:
        raise ValueError(f"{path}: version {data.get('version')}; regenerate it with `python -m estimator.basis write`")
    fitted = {}
    for row in data["rates"]:
        compile_s = {MODES[m]: float(v) for m, v in row.pop("compile_s").items()}
        runs = int(row.pop("runs"))
        rates = from_dict(row)
        fitted[(rates.gpu, rates.backend)] = Fitted(rates, compile_s, runs)
    return Shipped(fitted, {b: Band(low, high, int(runs)) for b, (low, high, runs) in data["bands"].items()})


@cache
def shipped() -> Shipped:
    """The rates and ranges written with the reference basis (estimator.basis)."""
    return read_rates()
