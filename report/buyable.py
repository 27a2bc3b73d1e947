"""Machines one can buy today (estimator.buyable) against the rented GPU platforms of a user's runs: the speed-up
of each from the estimate of the bought machine's steady epoch, and the tables of the report."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace

import pandas as pd

from benchmarks.workload_set import built_in
from benchmarks.workloads import WORKLOADS
from estimator.buyable import Buyable, load_buyable
from estimator.model import Observation
from estimator.owned import Owned, Rival
from estimator.suite import Basis, steady_epoch


def estimated_rivals(
    machine: Owned,
    results: pd.DataFrame,
    rented: Mapping[str, tuple[str, float | None, float | None]],
    basis: Basis,
) -> Owned:
    """`machine` (with the `gpu` it holds) as an owned machine whose rivals are the rented GPU platforms measured in
    `results`, on demand and spot where priced (`rented`: platform -> (estimate_model machine key, on-demand, spot)
    USD/h): its speed-up is the median over the platform's measured workloads, the user's workload files included,
    of their steady seconds per sample over the owned GPU's estimated ones (estimator.suite: measured, published,
    physics or hardware), its range the estimate's backtested range. `basis`: what the estimates are made from."""
    rivals = []
    for platform, (key, on_demand, spot) in sorted(rented.items()):
        found = _speedups(machine.gpu or "", results[results["platform"] == platform], basis)
        if found is None or key == machine.gpu:
            continue
        speedup, low, high, what = found
        for market, price in (("on-demand", on_demand), ("spot", spot)):
            if price is None:
                continue
            rival = Rival(platform, platform, market, price, f"catalog {platform} {market}", speedup, "", {})
            fewest, most = (machine.break_even_days(replace(rival, speedup=s)) for s in (high, low))
            days = "never" if fewest is None or math.isinf(fewest) else f"{fewest:,.0f}"
            days += " to " + ("never" if most is None or math.isinf(most) else f"{most:,.0f}")
            source = f"{what}; range {low:.2f}x to {high:.2f}x, break-even {days} days"
            rivals.append(replace(rival, speedup_source=source))
    return replace(machine, rivals=machine.rivals + tuple(rivals))


def _speedups(gpu: str, measured: pd.DataFrame, basis: Basis) -> tuple[float, float, float, str] | None:
    ratios: list[float] = []
    lows: list[float] = []
    highs: list[float] = []
    bases: set[str] = set()
    for row in measured.itertuples():
        if not row.train_samples or not row.steady_epoch_s:
            continue
        workload, samples = str(row.workload), int(row.train_samples)
        code, batch = _file_of(workload, basis.pool) if workload not in WORKLOADS else ("", _batch(workload))
        if batch is None:
            continue
        found = steady_epoch(basis, gpu, workload, str(row.backend), batch, samples, code)
        if found is None:
            continue
        owned_steady, low, high, used, _ = found
        ratio = float(row.steady_epoch_s) / owned_steady
        ratios.append(ratio)
        lows.append(float(row.steady_epoch_s) / high)
        highs.append(float(row.steady_epoch_s) / low)
        bases.add(used)
    if not ratios:
        return None
    median = statistics.median
    what = f"estimated ({', '.join(sorted(bases))}) over {len(ratios)} workload run(s) measured on the rented machine"
    return median(ratios), median(lows), median(highs), what


def _batch(workload: str) -> int:
    return built_in()[workload].spec.batch_size


def _file_of(workload: str, pool: Sequence[Observation]) -> tuple[str, int | None]:
    """A workload file's content hash and batch, from its measured runs (the most runs, where it changed)."""
    runs = Counter((o.code, o.batch) for o in pool if o.workload == workload and o.code)
    return runs.most_common(1)[0][0] if runs else ("", None)


UNITS = {"purchase_usd": "USD", "gpu_watts": "W", "useful_life_years": "years", "electricity_usd_per_kwh": "USD/kWh"}


def catalog_table(machines: Mapping[str, Buyable] | None = None) -> pd.DataFrame:
    """One row per machine one can buy: each figure with its date and source, or why it is unknown."""
    rows = []
    for machine in (machines if machines is not None else load_buyable()).values():
        row = {"machine": machine.title, "GPU (speed figure)": machine.gpu}
        row.update({field: machine.figures[field].text(unit) for field, unit in UNITS.items()})
        rows.append(row)
    return pd.DataFrame(rows)
