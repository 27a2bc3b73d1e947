"""Prices from the real catalog or the command line, and the two billing rules."""

from __future__ import annotations

import pytest

from records.catalog import load_catalog
from report.costs import (
    PROFILE_BILLING,
    TRAINING_TIME,
    PriceBook,
    PriceError,
    Pricing,
    Unpriced,
    load_catalog_profiles,
    parse_price_arguments,
)


@pytest.fixture(scope="module")
def book() -> PriceBook:
    profiles, problem = load_catalog_profiles()
    assert problem is None, problem
    return PriceBook({}, PROFILE_BILLING, profiles)


def test_catalog_profiles_are_the_orchestrators() -> None:
    profiles, _ = load_catalog_profiles()
    assert profiles == load_catalog()


def test_profile_billing_rounds_up_and_applies_the_minimum(book: PriceBook) -> None:
    pricing = book.pricing("gce-k80")
    assert isinstance(pricing, Pricing)
    profile = load_catalog()["gce-k80"]
    price = profile.hourly_price()
    assert price is not None and pricing.usd_per_hour == price.usd_per_hour
    assert pricing.billed_seconds(10.0) == profile.billed_seconds(10.0) == profile.billing_minimum_s
    assert pricing.billed_seconds(3600.2) == profile.billed_seconds(3600.2)
    assert pricing.cost_usd(3600.2) == pytest.approx(profile.cost_usd(3600.2))
    assert "minimum" in pricing.rule and price.date in pricing.source


def test_training_time_rule_is_seconds_times_price() -> None:
    profiles, _ = load_catalog_profiles()
    pricing = PriceBook({}, TRAINING_TIME, profiles).pricing("gce-k80")
    assert isinstance(pricing, Pricing)
    assert pricing.billed_seconds(10.0) == 10.0
    assert pricing.cost_usd(10.0) == pytest.approx(10.0 * pricing.usd_per_hour / 3600)


def test_command_line_price_wins_and_keeps_the_profile_rules(book: PriceBook) -> None:
    overridden = PriceBook({"gce-k80": 1.0}, PROFILE_BILLING, book.profiles).pricing("gce-k80")
    assert isinstance(overridden, Pricing)
    assert overridden.usd_per_hour == 1.0 and overridden.source == "--price on the command line"
    assert overridden.billed_seconds(1.0) == load_catalog()["gce-k80"].billing_minimum_s


def test_platform_outside_the_catalog_needs_a_price(book: PriceBook) -> None:
    missing = book.pricing("my-laptop")
    assert isinstance(missing, Unpriced)
    assert "not a catalog profile" in missing.reason and "--price my-laptop=USD_PER_HOUR" in missing.reason
    priced = PriceBook({"my-laptop": 0.2}, PROFILE_BILLING, book.profiles).pricing("my-laptop")
    assert isinstance(priced, Pricing) and priced.billing == TRAINING_TIME  # no billing rules known


def test_local_profile_has_no_price(book: PriceBook) -> None:
    local = book.pricing("local")
    assert isinstance(local, Unpriced) and "has none" in local.reason


def test_catalog_problem_is_the_reason() -> None:
    book = PriceBook({}, PROFILE_BILLING, {}, catalog_problem="the catalog is invalid (bad field)")
    missing = book.pricing("gce-k80")
    assert isinstance(missing, Unpriced) and "the catalog is invalid (bad field)" in missing.reason


def test_price_arguments() -> None:
    assert parse_price_arguments(["local=0.10", "gce-t4 = 0.54"]) == {"local": 0.10, "gce-t4": 0.54}
    for bad, why in (
        ("local", "expected PLATFORM=USD_PER_HOUR"),
        ("=1", "expected"),
        ("local=abc", "is not a number"),
        ("local=-1", "must be a finite number > 0, got -1.0"),
        ("local=nan", "must be a finite number > 0, got nan"),
        ("local=1e308", "1e\\+308 is not plausible \\(at most 1000\\)"),
    ):
        with pytest.raises(PriceError, match=why):
            parse_price_arguments([bad])
    with pytest.raises(PriceError, match="--billing"):
        PriceBook({}, "hourly", {})
