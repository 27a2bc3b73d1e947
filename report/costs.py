"""Prices and billing rules: what a configuration's training time cost.

A price comes from the catalog profile whose name is the run's platform, or from
`--price PLATFORM=USD_PER_HOUR` (which wins). Two billing rules, each named next to the figures it produced:

- `profile`: the catalog profile's billing (round up to its increment, at least its minimum) applied to a
  workload's training time, as if that workload had the machine to itself;
- `training-time`: training seconds x hourly price / 3600 with no rounding and no minimum, the rule of the
  published studies (and the only one possible for a price given on the command line outside the catalog).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the catalog is imported lazily: the report works without the orchestration extras
    from orchestrate.catalog import Profile

PROFILE_BILLING = "profile"
TRAINING_TIME = "training-time"
BILLING_RULES = (PROFILE_BILLING, TRAINING_TIME)


class PriceError(ValueError):
    """A bad `--price` argument; the message is one line."""


@dataclass(frozen=True)
class Pricing:
    usd_per_hour: float
    source: str  # where the price came from, shown next to the cost
    billing: str  # PROFILE_BILLING or TRAINING_TIME
    profile: Profile | None = None

    def billed_seconds(self, seconds: float) -> float:
        if self.billing == PROFILE_BILLING and self.profile is not None:
            return float(self.profile.billed_seconds(seconds))
        return seconds

    @property
    def increment_s(self) -> float:
        """Rounding up by less than this is the increment, not the minimum."""
        if self.billing == PROFILE_BILLING and self.profile is not None:
            return float(self.profile.billing_increment_s)
        return 0.0

    def cost_usd(self, seconds: float) -> float:
        return self.billed_seconds(seconds) * self.usd_per_hour / 3600

    @property
    def rule(self) -> str:
        if self.billing == PROFILE_BILLING and self.profile is not None:
            return (
                f"profile {self.profile.name}: billed per {self.profile.billing_increment_s} s, "
                f"minimum {self.profile.billing_minimum_s} s"
            )
        return "training time x hourly price (no rounding, no minimum)"


@dataclass(frozen=True)
class Unpriced:
    reason: str


def parse_price_arguments(values: list[str]) -> dict[str, float]:
    """`["gce-k80=0.4975", ...]` -> {"gce-k80": 0.4975}; one-line errors naming the bad argument."""
    prices: dict[str, float] = {}
    for value in values:
        platform, sep, number = value.partition("=")
        if not sep or not platform.strip():
            raise PriceError(f"--price {value!r}: expected PLATFORM=USD_PER_HOUR, e.g. local=0.10")
        try:
            price = float(number)
        except ValueError:
            raise PriceError(f"--price {value!r}: {number!r} is not a number") from None
        if not math.isfinite(price) or price < 0:
            raise PriceError(f"--price {value!r}: the hourly price must be a finite number >= 0")
        prices[platform.strip()] = price
    return prices


def load_catalog_profiles() -> tuple[dict[str, Profile], str | None]:
    """The catalog's profiles by name, or no profiles and the reason (so cost can say why it is missing)."""
    try:
        from orchestrate.catalog import load_catalog
    except ImportError as exc:
        return {}, f"the catalog cannot be loaded ({exc})"
    try:
        catalog = load_catalog()
    except (OSError, ValueError) as exc:
        return {}, f"the catalog is invalid ({exc})"
    return dict(catalog), None


class PriceBook:
    """Resolves each platform to a price and billing rule, or to the reason it has none."""

    def __init__(
        self,
        overrides: Mapping[str, float],
        billing: str,
        profiles: Mapping[str, Profile],
        catalog_problem: str | None = None,
    ) -> None:
        if billing not in BILLING_RULES:
            raise PriceError(f"--billing {billing!r}: expected one of {', '.join(BILLING_RULES)}")
        self.overrides = dict(overrides)
        self.billing = billing
        self.profiles = dict(profiles)
        self.catalog_problem = catalog_problem

    def pricing(self, platform: str) -> Pricing | Unpriced:
        profile = self.profiles.get(platform)
        billing = self.billing if profile is not None else TRAINING_TIME
        if platform in self.overrides:
            return Pricing(self.overrides[platform], "--price on the command line", billing, profile)
        if profile is None:
            missing = self.catalog_problem or f"platform {platform!r} is not a catalog profile"
            return Unpriced(f"no price: {missing} (give --price {platform}=USD_PER_HOUR)")
        price = profile.hourly_price()
        if price is None:
            return Unpriced(f"no price: catalog profile {platform!r} has none (give --price {platform}=USD_PER_HOUR)")
        market = "spot" if profile.use_spot else "on-demand"
        return Pricing(
            price.usd_per_hour,
            f"catalog {platform} {market}, read {price.date} from {price.source}",
            billing,
            profile,
        )

    def unused_overrides(self, platforms: set[str]) -> list[str]:
        return sorted(set(self.overrides) - platforms)
