"""Own or rent: an owned machine's effective cost, the speed-adjusted cost of the rented machine it replaces, and
the break-even in days of use, with each published figure checked against its own inputs.

The arithmetic, in the owned machine's currency:

- running cost per hour of use = load watts / 1000 x electricity price per kWh;
- idle cost per day = idle watts / 1000 x (24 - hours of use per day) x electricity price;
- effective cost per hour of use = purchase / (useful life in days x hours per day) + running cost
  + idle cost per day / hours per day;
- speed-adjusted rented cost per hour = the rival's price x speed-up (one owned hour does `speedup` rented hours:
  the Canadian build's "$0.45/h, half as fast, so $0.90/h");
- break-even days = purchase / (hours per day x (speed-adjusted rented cost - running cost) - idle cost per day);
- the posts' own method, for checking their figures: purchase / rival price / 24 (every hour of every day, no
  speed-up, no electricity).
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from estimator import DATA_DIR
from records.catalog import MAX_USD_PER_HOUR, MAX_USD_PER_KWH, MAX_USD_PER_MACHINE, price_problem

OWNED_FILE = DATA_DIR / "owned.toml"

HOURS_PER_DAY = 24.0
# What a post published of a rival, as owned.toml names it (report.owned checks each against its inputs).
PUBLISHED = ("published_days", "published_day", "published_month", "published_year", "published_quarter_year")
DAYS_PER_YEAR = 365.0


class OwnedDataError(ValueError):
    """A bad owned-machine entry; the message names the file, the machine and the field."""


@dataclass(frozen=True)
class Rival:
    """A rented machine the owned one replaces."""

    name: str
    profile: str
    market: str
    price_per_hour: float
    price_source: str
    speedup: float | None  # how many times faster the owned machine is; None: not known
    speedup_source: str
    published: Mapping[str, float]  # published_days / published_day / ... as the post gave them
    rounded_within: float = 0.0  # how far off a figure the post called rough ("roughly $20/day") may be


@dataclass(frozen=True)
class Owned:
    name: str
    title: str
    source: str
    currency: str
    purchase_price: float | None = None
    useful_life_years: float | None = None
    hours_per_day: float | None = None
    idle_watts: float | None = None
    load_watts: float | None = None
    electricity_per_kwh: float | None = None
    platform: str | None = None
    gpu: str | None = None  # its GPU as the estimator names it (report/data/gpu_peaks.toml): its speed is estimated
    run_seconds: float | None = None  # one published run's wall time on this machine
    run_name: str = ""
    rivals: tuple[Rival, ...] = ()

    @property
    def energy_per_run_wh(self) -> float | None:
        """Load draw x one run's time: an upper bound where the load figure is the peak draw."""
        if self.load_watts is None or self.run_seconds is None:
            return None
        return self.load_watts * self.run_seconds / 3600

    @property
    def running_cost_per_hour(self) -> float | None:
        if self.load_watts is None or self.electricity_per_kwh is None:
            return None
        return self.load_watts / 1000 * self.electricity_per_kwh

    @property
    def idle_cost_per_day(self) -> float | None:
        if self.idle_watts is None or self.electricity_per_kwh is None or self.hours_per_day is None:
            return None
        return self.idle_watts / 1000 * (HOURS_PER_DAY - self.hours_per_day) * self.electricity_per_kwh

    @property
    def effective_cost_per_hour(self) -> float | None:
        """Purchase spread over the hours of use in its useful life, plus electricity; None without the
        purchase price, the useful life or the hours per day."""
        if self.purchase_price is None or self.useful_life_years is None or self.hours_per_day is None:
            return None
        hours = self.useful_life_years * DAYS_PER_YEAR * self.hours_per_day
        electricity = (self.running_cost_per_hour or 0.0) + (self.idle_cost_per_day or 0.0) / self.hours_per_day
        return self.purchase_price / hours + electricity

    def break_even_days(self, rival: Rival) -> float | None:
        """Days of use (at `hours_per_day`, else around the clock) after which owning has cost less than renting
        the speed-adjusted equivalent; inf when renting stays cheaper; None without purchase price or speed-up."""
        if self.purchase_price is None or rival.speedup is None:
            return None
        hours = self.hours_per_day or HOURS_PER_DAY
        saved_per_day = hours * (rival.price_per_hour * rival.speedup - (self.running_cost_per_hour or 0.0))
        saved_per_day -= self.idle_cost_per_day or 0.0
        return self.purchase_price / saved_per_day if saved_per_day > 0 else math.inf


def load_owned(path: Path = OWNED_FILE) -> dict[str, Owned]:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise OwnedDataError(f"{path}: cannot read ({exc})") from exc
    return {name: _owned(path, name, entry) for name, entry in data.items()}


def _number(path: Path, where: str, entry: Mapping[str, Any], key: str, required: bool = False) -> float | None:
    value = entry.get(key)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise OwnedDataError(f"{path}: {where}: field {key!r} must be a number >= 0, got {value!r}")
    return float(value)


def _price(
    path: Path, where: str, entry: Mapping[str, Any], key: str, ceiling: float, required: bool = False
) -> float | None:
    """A price of the file: absent (None) unless required, else a finite number > 0 no higher than `ceiling`."""
    value = entry.get(key)
    if value is None and not required:
        return None
    problem = price_problem(value, ceiling)
    if problem is not None:
        raise OwnedDataError(f"{path}: {where}: field {key!r} {problem}")
    assert isinstance(value, int | float)  # price_problem said so
    return float(value)


def _text(path: Path, where: str, entry: Mapping[str, Any], key: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise OwnedDataError(f"{path}: {where}: field {key!r} must be a non-empty string")
    return value


def _owned(path: Path, name: str, entry: Any) -> Owned:
    where = f"owned machine {name!r}"
    if not isinstance(entry, dict):
        raise OwnedDataError(f"{path}: {where}: expected a table")
    hours = _number(path, where, entry, "hours_per_day")
    if hours is not None and not 0 < hours <= HOURS_PER_DAY:
        raise OwnedDataError(f"{path}: {where}: field 'hours_per_day' must be in (0, 24], got {hours}")
    return Owned(
        name=name,
        title=_text(path, where, entry, "title"),
        source=_text(path, where, entry, "source"),
        currency=_text(path, where, entry, "currency"),
        purchase_price=_price(path, where, entry, "purchase_price", MAX_USD_PER_MACHINE),
        useful_life_years=_number(path, where, entry, "useful_life_years"),
        hours_per_day=hours,
        idle_watts=_number(path, where, entry, "idle_watts"),
        load_watts=_number(path, where, entry, "load_watts"),
        electricity_per_kwh=_price(path, where, entry, "electricity_per_kwh", MAX_USD_PER_KWH),
        platform=entry.get("platform"),
        gpu=_gpu(path, where, entry),
        run_seconds=_number(path, where, entry, "run_seconds"),
        run_name=str(entry.get("run_name") or ""),
        rivals=tuple(_rival(path, f"{where} rival {i}", r) for i, r in enumerate(entry.get("rivals", []))),
    )


def _rival(path: Path, where: str, entry: Mapping[str, Any]) -> Rival:
    speedup = _number(path, where, entry, "speedup")
    owned_s, rival_s = _number(path, where, entry, "owned_seconds"), _number(path, where, entry, "rival_seconds")
    if speedup is None and owned_s and rival_s:
        speedup = rival_s / owned_s
    price = _price(path, where, entry, "price_per_hour", MAX_USD_PER_HOUR, required=True)
    assert price is not None
    return Rival(
        name=_text(path, where, entry, "name"),
        profile=_text(path, where, entry, "profile"),
        market=_text(path, where, entry, "market"),
        price_per_hour=price,
        price_source=_text(path, where, entry, "price_source"),
        speedup=speedup,
        speedup_source=str(entry.get("speedup_source") or "not stated"),
        published={k: float(v) for k in PUBLISHED if (v := entry.get(k)) is not None},
        rounded_within=_number(path, where, entry, "published_rounded_within") or 0.0,
    )


def _gpu(path: Path, where: str, entry: Mapping[str, Any]) -> str | None:
    gpu = entry.get("gpu")
    if gpu is None:
        return None
    known = tomllib.loads((DATA_DIR / "gpu_peaks.toml").read_text())
    if gpu not in known:
        raise OwnedDataError(f"{path}: {where}: field 'gpu' {gpu!r}: no datasheet peak; one of {', '.join(known)}")
    return str(gpu)
