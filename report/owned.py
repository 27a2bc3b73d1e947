"""Own or rent, as the report shows it: the owned machines of data/owned.toml, their published figures checked
against their own inputs (the arithmetic is estimator.owned's).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

import pandas as pd

from estimator.owned import DAYS_PER_YEAR, HOURS_PER_DAY, OWNED_FILE, Owned, Rival, load_owned

__all__ = ["OWNED_FILE", "break_even_table", "load_owned", "machines_table", "with_measured_rivals"]
# A published figure "follows" from its inputs when it is within this of the recomputed one: the posts round to
# two significant digits at most, which is within 5 %, and anything further off is not rounding.
FOLLOWS_WITHIN = 0.05
# Renting the equivalent for a period, as the Canadian build's post counted it (a month is a twelfth of a year).
PERIODS = {
    "published_day": ("a day", 1.0),
    "published_month": ("a month", DAYS_PER_YEAR / 12),
    "published_year": ("a year", DAYS_PER_YEAR),
    "published_quarter_year": ("a year at a quarter of the time", DAYS_PER_YEAR / 4),
}


def published_method_days(purchase: float, price_per_hour: float) -> float:
    """The posts' break-even: the purchase price in hours of renting, run around the clock."""
    return purchase / price_per_hour / HOURS_PER_DAY


# ---- tables -------------------------------------------------------------------------------------------------


def _money(value: float | None, currency: str) -> str:
    return "unknown" if value is None else f"{value:,.2f} {currency}"


def machines_table(owned: Mapping[str, Owned]) -> pd.DataFrame:
    """One row per owned machine: its inputs and effective cost per hour, unknowns in words."""
    rows = []
    for machine in owned.values():
        effective = machine.effective_cost_per_hour
        missing = [
            label
            for label, value in (
                ("purchase price", machine.purchase_price),
                ("useful life", machine.useful_life_years),
                ("hours of use per day", machine.hours_per_day),
            )
            if value is None
        ]
        rows.append(
            {
                "owned machine": machine.title,
                "purchase": _money(machine.purchase_price, machine.currency),
                "useful life": "not given" if machine.useful_life_years is None else f"{machine.useful_life_years:g} y",
                "use per day": "not given" if machine.hours_per_day is None else f"{machine.hours_per_day:g} h",
                "power idle / load": f"{_watts(machine.idle_watts)} / {_watts(machine.load_watts)}",
                "electricity": "no price given"
                if machine.electricity_per_kwh is None
                else f"{machine.electricity_per_kwh:g} {machine.currency}/kWh",
                "effective cost per hour of use": _money(effective, machine.currency)
                if effective is not None
                else f"unknown: no {', '.join(missing)}",
                "energy per run": _energy(machine),
                "source": machine.source,
            }
        )
    return pd.DataFrame(rows)


def _energy(machine: Owned) -> str:
    wh = machine.energy_per_run_wh
    if wh is None:
        return "unknown: no load power or run time"
    text = f"{wh:,.1f} Wh for {machine.run_name} ({machine.load_watts:g} W x {machine.run_seconds:,.0f} s)"
    if machine.electricity_per_kwh is None:
        return f"{text}; its cost needs an electricity price, which the source does not give"
    return f"{text} = {wh / 1000 * machine.electricity_per_kwh:,.3f} {machine.currency}"


def _watts(value: float | None) -> str:
    return "not given" if value is None else f"{value:g} W"


def break_even_table(owned: Mapping[str, Owned]) -> pd.DataFrame:
    """One row per owned machine x rival: speed-adjusted rented cost and break-even days, next to the published
    figure and whether it follows from the post's own inputs."""
    rows = []
    for machine in owned.values():
        for rival in machine.rivals:
            rows.append(_break_even_row(machine, rival))
    return pd.DataFrame(rows)


def _break_even_row(machine: Owned, rival: Rival) -> dict[str, str]:
    currency = machine.currency
    adjusted = None if rival.speedup is None else rival.price_per_hour * rival.speedup
    days = machine.break_even_days(rival)
    row = {
        "owned machine": machine.title,
        "rented": f"{rival.name} ({rival.profile}, {rival.market})",
        "price per hour": f"{rival.price_per_hour:.2f} {currency}",
        "owned is faster by": "unknown" if rival.speedup is None else f"{rival.speedup:.2f}x ({rival.speedup_source})",
        "speed-adjusted rented cost per hour": "unknown" if adjusted is None else f"{adjusted:.2f} {currency}",
        "break-even (days of use)": _days(days, machine),
        "published": "",
        "check": "",
    }
    checks = []
    if "published_days" in rival.published and machine.purchase_price is not None:
        recomputed = published_method_days(machine.purchase_price, rival.price_per_hour)
        published = rival.published["published_days"]
        implied = published * HOURS_PER_DAY * rival.price_per_hour
        row["published"] = f"{published:g} days"
        checks.append(
            _verdict(
                f"{machine.purchase_price:,.2f} / {rival.price_per_hour:.2f} / 24 h = {recomputed:.1f} days",
                published,
                recomputed,
                f"{published:g} days follow from a purchase of {implied:,.2f} {currency}",
            )
        )
    if adjusted is not None:
        for key, (period, days_in_period) in PERIODS.items():
            if key in rival.published:
                recomputed = adjusted * HOURS_PER_DAY * days_in_period
                published = rival.published[key]
                row["published"] = _join(row["published"], f"{published:,.0f} {currency} {period}")
                checks.append(
                    _verdict(
                        f"{adjusted:.2f} x 24 h x {days_in_period:g} d = {recomputed:,.2f} {currency} {period}",
                        published,
                        recomputed,
                        f"{published:,.0f} {currency} is {published / adjusted:,.0f} h of renting",
                        rival.rounded_within,
                    )
                )
    row["check"] = "; ".join(checks)
    return row


def _verdict(arithmetic: str, published: float, recomputed: float, implied: str, rounded_within: float = 0.0) -> str:
    if abs(published - recomputed) <= FOLLOWS_WITHIN * recomputed:
        return f"{arithmetic}: the published figure follows"
    if abs(published - recomputed) <= rounded_within * published:
        return f"{arithmetic}: the published {published:,.0f} holds, rounded (the post gives it as rough)"
    return f"{arithmetic}: the published {published:,.0f} does not follow ({implied})"


def _join(*parts: str) -> str:
    return ", ".join(p for p in parts if p)


def _days(days: float | None, machine: Owned) -> str:
    if days is None:
        return "unknown: no purchase price" if machine.purchase_price is None else "unknown: speed not known"
    if math.isinf(days):
        return "never: renting costs less per hour of use than the electricity"
    basis = "24 h a day" if machine.hours_per_day is None else f"{machine.hours_per_day:g} h a day"
    electricity = "" if machine.electricity_per_kwh is not None else ", electricity not counted (no price given)"
    return f"{days:,.1f} ({basis}{electricity})"


def with_measured_rivals(
    owned: Mapping[str, Owned], results: pd.DataFrame, prices: Mapping[str, tuple[float | None, float | None]]
) -> dict[str, Owned]:
    """Owned machines whose runs are in `results` (their `platform`) get every rented platform measured beside them
    as rivals, on demand and spot where priced: speed-up = the median over shared workloads and backends of the
    rented machine's median steady-epoch seconds per training sample over the owned one's (runs without a recorded
    sample count give no ratio). `prices`: platform -> (on-demand, spot) USD/h."""
    measured = {}
    for name, machine in owned.items():
        if machine.platform is None or machine.currency != "USD":
            measured[name] = machine  # catalog prices are USD: no exchange rate is assumed
            continue
        mine = results[results["platform"] == machine.platform]
        rivals = [
            rival
            for platform, (on_demand, spot) in sorted(prices.items())
            if platform != machine.platform
            for rival in _measured_rivals(platform, on_demand, spot, mine, results[results["platform"] == platform])
        ]
        measured[name] = replace(machine, rivals=machine.rivals + tuple(rivals))
    return measured


def _measured_rivals(
    platform: str, on_demand: float | None, spot: float | None, mine: pd.DataFrame, theirs: pd.DataFrame
) -> list[Rival]:
    shared = mine.merge(theirs, on=["workload", "backend", "data_source"], suffixes=("_owned", "_rented"))
    # Per training sample: an epoch over 500 samples and one over 60,000 are not the same work.
    per_sample = {
        side: shared[f"steady_epoch_s_{side}"] / shared[f"train_samples_{side}"] for side in ("owned", "rented")
    }
    ratios = (per_sample["rented"] / per_sample["owned"]).dropna()
    if ratios.empty:
        return []
    speedup = float(ratios.median())
    source = f"measured: median over {len(ratios)} shared workload(s) of the seconds-per-training-sample ratio"
    return [
        Rival(platform, platform, market, price, f"catalog {platform} {market}", speedup, source, {})
        for market, price in (("on-demand", on_demand), ("spot", spot))
        if price is not None
    ]
