"""What each measured GPU achieves by kind of work, fitted on its runs: the rates the physics basis
(estimator.physics) prices a model's step costs at.

A training step on a GPU, as the runner trains it (one Python thread feeding the device), takes

    step = host data time + per-step cost + operations x per-operation cost
           + convolution FLOPs / convolution rate + matrix-product FLOPs / matrix-product rate

- the *host data time*: the step's data pipeline on the host (benchmarks.step_costs), scaled from the CPU it was
  measured on to this host's CPU by their single-thread scores;
- the *per-step cost*: what every step pays whatever the model (Keras's loop, the dispatch, the metrics);
- the *per-operation cost*: the latency of work too small to fill the GPU, a kernel launch or a host dispatch per
  primitive operation: small dense layers, and recurrent layers, whose time steps run one after another;
- the *achieved share of the datasheet peak* of the two kinds of arithmetic that fill a GPU, convolutions and matrix
  products (attention, dense layers of a transformer), each at the peak of the precision the run computed in
  (TF32 for float32, BF16 or FP16 for mixed precision): a share, so that a run in bfloat16 and one in float32 tell
  of one GPU, and a GPU without runs is its own peak times that share.

Per GPU and backend, the four figures are fitted on the runs of the workloads whose step costs are known, by least
squares on log(actual / predicted) (each step time counts by its ratio, not by its seconds). A kind of arithmetic
fitted apart only where some workload spends at least `EVIDENCE` of its step on it: otherwise the two kinds share
one share (the runs say nothing about that kind on its own). Standard library only: the dry run fits nothing it
need not, and the fitted tables can be written out as data (`Rates.as_dict`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace

EVIDENCE = 0.25  # share of a step a kind of arithmetic must take in some run for its rate to be fitted on its own
MIN_WORKLOADS = 4  # a fit has three or four figures: fewer workloads would say nothing of its error
LOG_SHARE_LOW = -4.0  # 0.01 % of the peak: the least achieved share searched
COARSE, FINE = 0.2, 0.05  # decades between searched rates


@dataclass(frozen=True)
class Work:
    """One workload's step, as the fit sees it: its costs and, where measured, its median step time on the GPU."""

    workload: str
    data_s: float  # host data time per step, already scaled to this GPU's host
    operations: int
    conv_flops: float
    matmul_flops: float
    peak: float  # FLOP/s: the GPU's datasheet peak at the precision the step computes in
    step_s: float = 0.0  # measured (0 where it is to be predicted)


@dataclass(frozen=True)
class Rates:
    """A GPU's fitted rates for one backend."""

    gpu: str
    backend: str
    step_s: float
    operation_s: float
    conv_share: float  # of the datasheet peak, on convolutions
    matmul_share: float  # of the datasheet peak, on matrix products
    shared: bool  # one share for both kinds of arithmetic (the runs did not tell them apart)
    informed: bool  # some run spent a quarter of its step on arithmetic: the shares are this fit's own
    workloads: tuple[str, ...]  # fitted on
    host_score: float  # the median single-thread score of the runs' hosts

    def step(self, work: Work) -> float:
        return (
            work.data_s
            + self.step_s
            + self.operation_s * work.operations
            + work.conv_flops / (self.conv_share * work.peak)
            + work.matmul_flops / (self.matmul_share * work.peak)
        )

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def fit(gpu: str, backend: str, works: Sequence[Work], host_score: float) -> Rates | None:
    """The rates that best explain `works` (each with its measured step time); None with fewer than
    MIN_WORKLOADS workloads."""
    if len({w.workload for w in works}) < MIN_WORKLOADS:
        return None
    shared = _search(works, shared=True)
    conv, matmul = shared[2], shared[3]
    evidence = [
        any(w.conv_flops / (conv * w.peak) >= EVIDENCE * w.step_s for w in works),
        any(w.matmul_flops / (matmul * w.peak) >= EVIDENCE * w.step_s for w in works),
    ]
    best = _search(works, shared=False) if all(evidence) else shared
    step_s, operation_s, conv, matmul = best
    return Rates(gpu, backend, step_s, operation_s, conv, matmul, not all(evidence), any(evidence),
                 tuple(sorted({w.workload for w in works})), host_score)  # fmt: skip


def informed_by(rates: Rates, others: Sequence[Rates]) -> Rates:
    """Rates whose runs said nothing of the arithmetic (every step bound by latency: any share fits them) take the
    median shares of `others` that did (the same GPU's other backends first, else every GPU's); as fitted where none
    did, or where they said something themselves."""
    told = [r for r in others if r.informed]
    if rates.informed or not told:
        return rates
    return replace(
        rates,
        conv_share=statistics.median(r.conv_share for r in told),
        matmul_share=statistics.median(r.matmul_share for r in told),
        shared=all(r.shared for r in told),
    )


def _search(works: Sequence[Work], shared: bool) -> tuple[float, float, float, float]:
    """Shares of the peak (log-spaced, coarse then fine, at most the whole peak) and, for each, the per-step and
    per-operation costs by weighted least squares; the combination with the least squared log error."""

    def grid(low: float, high: float, step: float) -> list[float]:
        count = round((high - low) / step)
        return [low + i * step for i in range(count + 1)]

    def best_of(pairs: Iterable[tuple[float, float]]) -> tuple[float, tuple[float, float, float, float]]:
        found = None
        for log_conv, log_matmul in pairs:
            conv, matmul = 10.0**log_conv, 10.0**log_matmul
            step_s, operation_s = _overheads(works, conv, matmul)
            loss = _loss(works, step_s, operation_s, conv, matmul)
            if found is None or loss < found[0]:
                found = (loss, (step_s, operation_s, conv, matmul))
        assert found is not None
        return found

    coarse = grid(LOG_SHARE_LOW, 0.0, COARSE)
    pairs = [(r, r) for r in coarse] if shared else [(a, b) for a in coarse for b in coarse]
    _, first = best_of(pairs)
    around = [math.log10(first[2]), math.log10(first[3])]
    fine = [[v for v in grid(c - COARSE, c + COARSE, FINE) if LOG_SHARE_LOW <= v <= 0.0] for c in around]
    pairs = [(r, r) for r in fine[0]] if shared else [(a, b) for a in fine[0] for b in fine[1]]
    return best_of(pairs)[1]


def _overheads(works: Sequence[Work], conv: float, matmul: float) -> tuple[float, float]:
    """Per-step and per-operation costs (both >= 0) minimising sum(((a + c * ops - rest) / step)^2), where rest is
    the step time the data and the arithmetic leave."""
    rows = [(1.0 / w.step_s, w.operations / w.step_s, _rest(w, conv, matmul) / w.step_s) for w in works]

    def alone(column: int) -> float:
        top = sum(r[column] * r[2] for r in rows)
        bottom = sum(r[column] ** 2 for r in rows)
        return max(top / bottom, 0.0) if bottom else 0.0

    s11 = sum(r[0] * r[0] for r in rows)
    s12 = sum(r[0] * r[1] for r in rows)
    s22 = sum(r[1] * r[1] for r in rows)
    b1 = sum(r[0] * r[2] for r in rows)
    b2 = sum(r[1] * r[2] for r in rows)
    det = s11 * s22 - s12 * s12
    if det > 0:
        a, c = (b1 * s22 - b2 * s12) / det, (b2 * s11 - b1 * s12) / det
        if a >= 0 and c >= 0:
            return a, c
    # A negative figure means the other explains the times alone: keep the one with the smaller error.
    options = [(alone(0), 0.0), (0.0, alone(1))]
    return min(options, key=lambda o: sum((o[0] * r[0] + o[1] * r[1] - r[2]) ** 2 for r in rows))


def _rest(work: Work, conv: float, matmul: float) -> float:
    return work.step_s - work.data_s - (work.conv_flops / conv + work.matmul_flops / matmul) / work.peak


def _loss(works: Sequence[Work], step_s: float, operation_s: float, conv: float, matmul: float) -> float:
    total = 0.0
    for w in works:
        arithmetic = (w.conv_flops / conv + w.matmul_flops / matmul) / w.peak
        predicted = w.data_s + step_s + operation_s * w.operations + arithmetic
        total += math.log(w.step_s / max(predicted, 1e-9)) ** 2
    return total


def scaled(rates: Sequence[Rates], gpu: str) -> Rates:
    """Rates for a GPU without runs: the measured GPUs' median per-step and per-operation costs, host score and
    shares of the peak (which a step then takes of this GPU's own peak)."""

    def median(values: Iterable[float]) -> float:
        return statistics.median(list(values))

    return Rates(
        gpu=gpu,
        backend=rates[0].backend,
        step_s=median(r.step_s for r in rates),
        operation_s=median(r.operation_s for r in rates),
        conv_share=median(r.conv_share for r in rates),
        matmul_share=median(r.matmul_share for r in rates),
        shared=all(r.shared for r in rates),
        informed=any(r.informed for r in rates),
        workloads=tuple(sorted({w for r in rates for w in r.workloads})),
        host_score=median(r.host_score for r in rates),
    )


def from_dict(raw: Mapping[str, object]) -> Rates:
    values = dict(raw)
    values["workloads"] = tuple(values["workloads"])  # type: ignore[arg-type]
    return Rates(**values)  # type: ignore[arg-type]
