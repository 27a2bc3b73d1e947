"""A user's workload on a machine it has not run on: its own measured throughput on another machine, scaled by how
much faster or slower the built-in workloads measured on the target machine than on that one.

    tiny_mlp [jax] on h200: from tiny_mlp's 3 runs on h100, scaled x1.12, the median h200/h100 throughput ratio
    of 8 built-in workload x backend pairs measured on both (x0.95 to x1.40: the range)

The range is that of the built-in pairs' ratios (lowest to highest): how differently the two machines treat
different models is how unsure the plug-in's scaled figure is. With a single pair there is no spread to measure:
the range is then the one the estimator's backtest found for scaling a workload's runs from one machine to another
(the hardware basis, `python -m report backtest`), and the estimate says so; without that either, it says no range.
Only measured runs count (never a datasheet figure), the same backend's pairs first, and the plug-in's runs of the
same file content (its sha256) where the planned file's hash is known.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.workloads import WORKLOADS
from estimator.backtest import Band
from estimator.model import Observation, Target

BASIS = "scaled"


@dataclass(frozen=True)
class Scaled:
    seconds: float  # training time at the median ratio
    low: float  # at the highest ratio (the target machine fastest)
    high: float  # at the lowest ratio
    where: str


def scaled_by_builtins(
    target: Target, pool: Sequence[Observation], code: str | None = None, one_pair_band: Band | None = None
) -> Scaled | None:
    """The plug-in's training time on `target.machine` from its own runs on another machine and the built-ins'
    measured ratio between the two; None where no machine has both its runs and built-in pairs with the target.
    `one_pair_band`: the range to give where a single built-in pair leaves no spread (the hardware basis's)."""
    own = [
        o
        for o in pool
        if o.origin == "measured"
        and o.workload == target.workload
        and o.backend == target.backend
        and o.machine != target.machine
        and (code is None or o.code == code)
    ]
    best: tuple[int, str, list[float]] | None = None
    for machine in sorted({o.machine for o in own}):
        ratios = builtin_ratios(pool, machine, target.machine, target.backend)
        if ratios and (best is None or len(ratios) > len(best[2])):
            best = (len(ratios), machine, ratios)
    if best is None:
        return None
    _, machine, ratios = best
    runs = [o for o in own if o.machine == machine]
    nearest = min(abs(math.log(o.samples / target.samples)) for o in runs)
    used = [o for o in runs if abs(math.log(o.samples / target.samples)) == nearest]
    throughput = statistics.median(o.throughput for o in used)
    compile_s = statistics.median(o.compile_s for o in used)

    def seconds(ratio: float) -> float:
        return compile_s + target.epochs * target.samples / (throughput * ratio)

    ratio = statistics.median(ratios)
    low, high = seconds(max(ratios)), seconds(min(ratios))
    if len(ratios) > 1:
        spread = f"x{min(ratios):.2f} to x{max(ratios):.2f}: the range"
    elif one_pair_band is not None:
        low, high = low * one_pair_band.low, high * one_pair_band.high
        spread = (
            f"one pair, no spread of its own: the range is the backtest's for scaling between machines, "
            f"x{one_pair_band.low:.2f} to x{one_pair_band.high:.2f}"
        )
    else:
        spread = "one pair and no backtested range: no range"
    where = (
        f"from {target.workload}'s {len(used)} run{'s' if len(used) != 1 else ''} of {used[0].samples:,} samples on "
        f"{machine}, scaled x{ratio:.2f}, the median {target.machine}/{machine} throughput ratio of {len(ratios)} "
        f"built-in workload x backend pair{'s' if len(ratios) != 1 else ''} measured on both ({spread})"
    )
    return Scaled(seconds(ratio), low, high, where)


def builtin_ratios(pool: Sequence[Observation], source: str, target: str, backend: str) -> list[float]:
    """Throughput on `target` / on `source` of each built-in workload x backend x batch measured on both (the median
    of each side's steady throughputs, whatever slice each ran: a machine's speed, not a run's length, is what is
    compared); the same backend's pairs, else every backend's."""
    medians: dict[tuple[str, str, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for o in pool:
        if o.origin == "measured" and o.workload in WORKLOADS and o.machine in (source, target):
            medians[(o.workload, o.backend, o.batch)][o.machine].append(o.throughput)
    pairs = {key: sides for key, sides in medians.items() if source in sides and target in sides}
    same_backend = {key: sides for key, sides in pairs.items() if key[1] == backend}
    chosen = same_backend or pairs
    return sorted(statistics.median(sides[target]) / statistics.median(sides[source]) for sides in chosen.values())
