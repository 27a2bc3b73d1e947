"""Prices and billing rules: what a configuration's training time cost.

A price comes from the catalog profile whose name is the run's platform, or from
`--price PLATFORM=USD_PER_HOUR` (which wins). Two billing rules, each named next to the figures it produced:

- `profile`: the catalog profile's billing (round up to its increment, at least its minimum) applied to a
  workload's training time, as if that workload had the machine to itself;
- `training-time`: training seconds x hourly price / 3600 with no rounding and no minimum, the rule of the
  published studies (and the only one possible for a price given on the command line outside the catalog).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from estimator.owned import Owned
from records.catalog import Profile, load_catalog, price_problem

STAND_INS_FILE = Path(__file__).parent / "data" / "platforms.toml"
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
        problem = price_problem(price)
        if problem is not None:
            raise PriceError(f"--price {value!r}: the hourly price {problem}")
        prices[platform.strip()] = price
    return prices


def load_stand_ins(path: Path = STAND_INS_FILE) -> dict[str, tuple[str, str]]:
    """Log platforms priced as a catalog profile (report/data/platforms.toml): platform -> (profile, why)."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise PriceError(f"{path}: cannot read ({exc})") from exc
    stand_ins = {}
    for platform, entry in data.items():
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in ("profile", "why")):
            raise PriceError(f"{path}: platform {platform!r}: fields 'profile' and 'why' must be strings")
        stand_ins[platform] = (entry["profile"], entry["why"])
    return stand_ins


def load_catalog_profiles() -> tuple[dict[str, Profile], str | None]:
    """The catalog's profiles by name, or no profiles and the reason (so cost can say why it is missing)."""
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
        owned: Mapping[str, Owned] | None = None,
        stand_ins: Mapping[str, tuple[str, str]] | None = None,
    ) -> None:
        if billing not in BILLING_RULES:
            raise PriceError(f"--billing {billing!r}: expected one of {', '.join(BILLING_RULES)}")
        self.overrides = dict(overrides)
        self.billing = billing
        self.profiles = dict(profiles)
        self.catalog_problem = catalog_problem
        self.owned = {m.platform: m for m in (owned or {}).values() if m.platform}
        self.stand_ins = dict(stand_ins or {})  # platform -> (catalog profile, why it stands in)

    def pricing(self, platform: str) -> Pricing | Unpriced:
        if platform not in self.profiles and platform not in self.overrides and platform in self.stand_ins:
            name, why = self.stand_ins[platform]
            priced = self.pricing(name)
            if isinstance(priced, Pricing):
                return replace(priced, source=f"{priced.source}; standing in for {platform}: {why}")
            return priced
        profile = self.profiles.get(platform)
        billing = self.billing if profile is not None else TRAINING_TIME
        if platform in self.overrides:
            return Pricing(self.overrides[platform], "--price on the command line", billing, profile)
        if platform in self.owned:
            return _owned_pricing(self.owned[platform])
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

    def profile_of(self, platform: str) -> Profile | None:
        """A platform's catalog profile, or the one standing in for it (report/data/platforms.toml)."""
        name = platform if platform in self.profiles else self.stand_ins.get(platform, ("", ""))[0]
        return self.profiles.get(name)

    def market_prices(self, platform: str) -> tuple[float | None, float | None]:
        """The catalog's on-demand and spot USD/h of a platform's profile (or its stand-in); None where unpriced."""
        profile = self.profile_of(platform)
        if profile is None:
            return None, None
        on_demand = profile.on_demand.usd_per_hour if profile.on_demand is not None else None
        spot = profile.spot.usd_per_hour if profile.spot is not None else None
        return on_demand, spot

    def unused_overrides(self, platforms: set[str]) -> list[str]:
        return sorted(set(self.overrides) - platforms)


def _owned_pricing(machine: Owned) -> Pricing | Unpriced:
    """An owned machine costs its effective price per hour of use (purchase over its useful hours, plus power)."""
    hourly = machine.effective_cost_per_hour
    if hourly is None:
        return Unpriced(
            f"no price: owned machine {machine.name!r} lacks a purchase price, useful life or hours per day"
        )
    if machine.currency != "USD":
        return Unpriced(f"no price: owned machine {machine.name!r} is priced in {machine.currency}, costs here are USD")
    source = f"owned {machine.name}: purchase over its useful hours of use, plus electricity ({machine.source})"
    return Pricing(hourly, source, TRAINING_TIME)
