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
from collections.abc import Mapping
from dataclasses import dataclass

HOURS_PER_DAY = 24.0
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
