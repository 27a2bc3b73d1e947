"""Machines one can buy today (estimator.buyable) against the rented GPU platforms of a user's runs: the speed-up
of each from the estimate of the bought machine's steady epoch, and the tables of the report."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import replace

import pandas as pd

from benchmarks.workloads import WORKLOADS
from estimator.backtest import Band
from estimator.buyable import BreakEven, Buyable, days_text, load_buyable
from estimator.model import Fit, Observation, Target, predict
from estimator.owned import Owned, Rival
from estimator.workload_plan import planned_spec


def estimated_rivals(
    machine: Buyable,
    results: pd.DataFrame,
    rented: Mapping[str, tuple[str, float | None, float | None]],
    pool: list[Observation],
    fitted: Mapping[str, Fit],
    bands: Mapping[str, Band],
) -> Owned:
    """`machine` as an owned machine whose rivals are the rented GPU platforms measured in `results`, on demand
    and spot where priced (`rented`: platform -> (estimate_model machine key, on-demand, spot) USD/h): its speed-up
    is the median over the platform's measured workloads of their steady seconds per sample over the bought
    machine's estimated ones, its range the estimate's backtested range."""
    rivals = []
    for platform, (key, on_demand, spot) in sorted(rented.items()):
        found = _speedups(machine, results[results["platform"] == platform], pool, fitted, bands)
        if found is None or key == machine.gpu:
            continue
        speedup, low, high, basis = found
        for market, price in (("on-demand", on_demand), ("spot", spot)):
            if price is None:
                continue
            result = BreakEven(machine, platform, price, speedup, low, high, basis)
            source = f"{basis}; range {low:.2f}x to {high:.2f}x, break-even {days_text(result)}"
            rivals.append(Rival(platform, platform, market, price, f"catalog {platform} {market}", speedup, source, {}))
    return replace(machine.as_owned(), rivals=tuple(rivals))


def _speedups(
    machine: Buyable,
    measured: pd.DataFrame,
    pool: list[Observation],
    fitted: Mapping[str, Fit],
    bands: Mapping[str, Band],
) -> tuple[float, float, float, str] | None:
    ratios, lows, highs, bases = [], [], [], set()
    for row in measured.itertuples():
        if not row.train_samples or not row.steady_epoch_s or row.workload not in WORKLOADS:
            continue
        target = Target(row.workload, row.backend, machine.gpu, planned_spec(row.workload).batch_size,
                        int(row.train_samples), 1)  # fmt: skip
        one, two = predict(target, pool, fitted), predict(replace(target, epochs=2), pool, fitted)
        if one is None or two is None:
            continue
        owned_steady = two.seconds - one.seconds  # one more epoch: the steady epoch without the compilation
        ratio = float(row.steady_epoch_s) / owned_steady
        band = bands.get(one.basis)
        ratios.append(ratio)
        lows.append(ratio / band.high if band else ratio)
        highs.append(ratio / band.low if band else ratio)
        bases.add(one.basis)
    if not ratios:
        return None
    median = statistics.median
    basis = f"estimated ({', '.join(sorted(bases))}) over {len(ratios)} workload run(s) measured on the rented machine"
    return median(ratios), median(lows), median(highs), basis


UNITS = {"purchase_usd": "USD", "gpu_watts": "W", "useful_life_years": "years", "electricity_usd_per_kwh": "USD/kWh"}


def catalog_table(machines: Mapping[str, Buyable] | None = None) -> pd.DataFrame:
    """One row per machine one can buy: each figure with its date and source, or why it is unknown."""
    rows = []
    for machine in (machines if machines is not None else load_buyable()).values():
        row = {"machine": machine.title, "GPU (speed figure)": machine.gpu}
        row.update({field: machine.figures[field].text(unit) for field, unit in UNITS.items()})
        rows.append(row)
    return pd.DataFrame(rows)
