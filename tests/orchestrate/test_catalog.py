"""The catalog: the shipped file loads; bad entries fail naming profile and field; retirement; billing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestrate.provider import ProviderError
from orchestrate.registry import load_provider_class
from records.catalog import (
    CatalogError,
    RetiredProfileError,
    UnknownProfileError,
    get_profile,
    load_catalog,
)

PUBLISHED = {
    "gce-k80": (0.4975, "2017-11-28"),
    "gce-p100": (1.5075, "2017-11-28"),
    "aws-p2.xlarge": (0.90, "2018-02-08"),
    "aws-p3.2xlarge": (3.06, "2018-02-08"),
}
CURRENT = ["gce-t4", "gce-l4", "gce-a100", "gce-h100", "aws-g4dn.xlarge", "aws-g5.xlarge", "aws-g6.xlarge"]
CURRENT += ["aws-p4d.24xlarge", "aws-p5.48xlarge", "gce-n2-highcpu-16", "aws-c7i.4xlarge"]

VALID = """
[profiles.demo]
provider = "gce"
machine_type = "n1-standard-4"
zones = ["us-central1-a"]
on_demand = { usd_per_hour = 0.19, date = "2025-06-01", source = "https://cloud.google.com/compute/" }
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    return path


def test_shipped_catalog_loads_with_the_published_and_current_configurations() -> None:
    catalog = load_catalog()
    for name, (price, date) in PUBLISHED.items():
        assert catalog[name].on_demand is not None
        assert (catalog[name].on_demand.usd_per_hour, catalog[name].on_demand.date) == (price, date)
    for name in CURRENT:
        assert catalog[name].on_demand is not None, name
        assert not catalog[name].retired
    # the July 2017 preemptible Skylake prices, as the published notebook computed them
    assert catalog["gce-n1-highcpu-8"].spot.usd_per_hour == pytest.approx(0.060 * 1.0607, abs=1e-6)
    assert catalog["gce-n1-highcpu-64"].spot.usd_per_hour == pytest.approx(8 * 0.060 * 1.0607, abs=1e-4)
    history = catalog["gce-k80"].price_history
    assert [p.price.usd_per_hour for p in history] == [0.745, 0.4975]  # 0.700 + 0.045, then 0.450 + 0.0475


def test_every_price_names_its_date_and_source() -> None:
    for profile in load_catalog().values():
        for price in (profile.on_demand, profile.spot, *(p.price for p in profile.price_history)):
            if price is not None:
                assert price.source.strip() and len(price.date) == 10, profile.name


def test_retired_profiles_name_a_live_replacement() -> None:
    catalog = load_catalog()
    retired = {name: p.replacement for name, p in catalog.items() if p.retired}
    assert retired == {
        "gce-k80": "gce-t4",
        "aws-p2.xlarge": "aws-g4dn.xlarge",
        "aws-p3.2xlarge": "aws-g6.xlarge",
    }
    with pytest.raises(RetiredProfileError, match=r"'gce-k80' is retired .*2024-05-01.*use 'gce-t4' instead"):
        get_profile(catalog, "gce-k80")
    assert get_profile(catalog, "gce-k80", allow_retired=True).name == "gce-k80"


def test_unknown_profile_lists_close_names() -> None:
    with pytest.raises(UnknownProfileError, match="unknown profile 'gce-t5'; did you mean gce-t4"):
        get_profile(load_catalog(), "gce-t5")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace('provider = "gce"\n', ""), "profile 'demo': field 'provider': required"),
        (
            lambda t: t + 'acelerator = "x"\n',
            "field 'acelerator': unknown field \\(did you mean 'accelerator'\\?\\)",
        ),
        (lambda t: t.replace("0.19", "-1"), "field 'on_demand': usd_per_hour must be a finite number > 0, got -1"),
        (lambda t: t.replace("0.19", "nan"), "field 'on_demand': usd_per_hour must be a finite number > 0, got nan"),
        (lambda t: t.replace("0.19", "inf"), "field 'on_demand': usd_per_hour must be a finite number > 0, got inf"),
        (lambda t: t.replace("0.19", "1e308"), "usd_per_hour 1e\\+308 is not plausible \\(at most 1000\\)"),
        (lambda t: t.replace("0.19", "19000"), "usd_per_hour 19000 is not plausible \\(at most 1000\\)"),
        (lambda t: t.replace('"2025-06-01"', '"June 2025"'), "field 'on_demand': date must be an ISO date"),
        (
            lambda t: t.replace('source = "https://cloud.google.com/compute/"', 'source = " "'),
            "field 'on_demand': source must name where the price was read",
        ),
        (
            lambda t: t.replace(', source = "https://cloud.google.com/compute/"', ""),
            "field 'on_demand': missing source",
        ),
        (
            lambda t: t + "use_spot = true\n",
            "field 'use_spot': the profile defaults to spot but has no spot price",
        ),
        (
            lambda t: t + 'accelerator = "nvidia-tesla-t4"\naccelerator_count = 1\n',
            "field 'docker_image': GPU profiles run the gpu image",
        ),
        (lambda t: t + "accelerator_count = true\n", "field 'accelerator_count': expected int, got bool"),
        (lambda t: t + "retired = true\n", "field 'retired_on': a retired profile needs the ISO date"),
        (
            lambda t: t + 'retired = true\nretired_on = "2024-05-01"\n',
            "field 'replacement': a retired profile must name the profile to use instead",
        ),
        (
            lambda t: t + 'retired = true\nretired_on = "2024-05-01"\nreplacement = "nope"\n',
            "field 'replacement': no profile named 'nope'",
        ),
        (
            lambda t: t.replace('["us-central1-a"]', '["us-central1-a", "us-central1-a"]'),
            "field 'zones': lists a zone twice",
        ),
        (lambda t: t + 'docker_image = "tpu"\n', "field 'docker_image': must be one of cpu, gpu"),
        (lambda t: t.replace("[profiles.demo]", "[profiles.Demo_1]"), "profile 'Demo_1': name must match"),
        (
            lambda t: t + "[[profiles.demo.price_history]]\nmarket = 'reserved'\n",
            "field 'price_history\\[0\\]': market must be one of on_demand, spot",
        ),
    ],
)
def test_bad_entries_fail_naming_profile_and_field(tmp_path: Path, edit, message: str) -> None:
    with pytest.raises(CatalogError, match=message):
        load_catalog(write(tmp_path, edit(VALID)))


def test_file_level_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="not valid TOML"):
        load_catalog(write(tmp_path, "[profiles.demo\n"))
    with pytest.raises(CatalogError, match=r"no \[profiles\.<name>\] tables"):
        load_catalog(write(tmp_path, ""))
    with pytest.raises(CatalogError, match="cannot read the catalog"):
        load_catalog(tmp_path / "missing.toml")


def test_billing_rounds_up_to_the_increment_with_a_minimum(tmp_path: Path) -> None:
    profile = load_catalog(write(tmp_path, VALID + "billing_increment_s = 60\nbilling_minimum_s = 600\n"))["demo"]
    assert profile.billed_seconds(0) == 0
    assert profile.billed_seconds(1) == 600  # the minimum
    assert profile.billed_seconds(601) == 660  # rounded up to whole minutes
    assert profile.cost_usd(3600) == pytest.approx(0.19)
    assert profile.cost_usd(3600, spot=True) is None  # no spot price in this profile


def test_each_profile_is_accepted_by_its_provider() -> None:
    """The catalog and the providers agree on fields and `extra` settings (lists every disagreement)."""
    problems = []
    for profile in load_catalog().values():
        settings = {"host": "bench@example.invalid"} if profile.provider == "ssh" else {}
        provider = load_provider_class(profile.provider).from_settings(settings)
        try:
            provider.validate_profile(profile)
        except ProviderError as exc:
            problems.append(f"{profile.name}: {exc}")
    assert not problems, "\n".join(problems)


def test_the_estimate_page_says_which_aws_and_gce_profiles_have_a_spot_price() -> None:
    """docs/estimate.md's spot lists name every AWS and GCE profile under what the catalog holds for it."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "estimate.md").read_text()
    section = text[text.index("## Spot prices") :].split("\n\nTo price one")[0]
    listed = {
        bullet.split("**")[1]: set(re.findall(r"`([a-z0-9.-]+)`", bullet)) for bullet in re.split(r"\n- ", section)[1:]
    }
    by_kind: dict[str, set[str]] = {"A recent spot price": set(), "No spot price:": set()}
    by_kind["The 2017/2018 studies' preemptible price"] = set()
    for name, profile in load_catalog().items():
        if profile.provider not in ("aws", "gce"):
            continue
        if profile.spot is None:
            by_kind["No spot price:"].add(name)
        elif profile.spot.date < "2019":
            by_kind["The 2017/2018 studies' preemptible price"].add(name)
        else:
            by_kind["A recent spot price"].add(name)
    assert listed == by_kind
