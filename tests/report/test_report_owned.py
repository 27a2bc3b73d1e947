"""Own or rent: the break-even arithmetic against the two 2018 posts' published inputs and figures."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest
from report_helpers import write_run

from estimator.owned import Owned, OwnedDataError, Rival
from report.cli import main
from report.owned import break_even_table, load_owned, machines_table, published_method_days


@pytest.fixture(scope="module")
def owned() -> dict[str, Owned]:
    return load_owned()


def _rival(machine: Owned, market: str) -> Rival:
    return next(r for r in machine.rivals if r.market == market)


def test_home_server_published_break_even_does_not_follow_from_its_inputs(owned: dict[str, Owned]) -> None:
    home = owned["home-server-2018"]
    spot, on_demand = _rival(home, "spot"), _rival(home, "on-demand")
    # 903.34 GBP at 0.27 GBP/h is 3,345.7 hours = 139.4 days around the clock; the post printed 127.
    assert published_method_days(903.34, 0.27) == pytest.approx(139.40, abs=0.01)
    assert published_method_days(903.34, 0.70) == pytest.approx(53.77, abs=0.01)
    assert spot.published["published_days"] == 127 and on_demand.published["published_days"] == 49
    # The GTX 1070 Ti's 23m02.315s against the K80's 43m15.608s: 1.88x (the post's "1.9x").
    assert spot.speedup == pytest.approx(2595.608 / 1382.315)
    # Speed-adjusted: one owned hour does 1.88 rented hours, so the purchase is paid back sooner.
    assert home.break_even_days(spot) == pytest.approx(903.34 / (24 * 0.27 * 2595.608 / 1382.315))
    assert home.break_even_days(spot) == pytest.approx(74.2, abs=0.05)
    assert home.break_even_days(on_demand) == pytest.approx(28.6, abs=0.05)
    table = break_even_table(owned)
    home_rows = table[table["owned machine"] == home.title]
    spot_check = home_rows[home_rows["rented"].str.contains("spot")].iloc[0]["check"]
    assert "139.4 days: the published 127 does not follow" in spot_check
    assert "822.96 GBP" in spot_check  # 127 days x 24 h x 0.27 GBP/h: what 127 does follow from
    assert "53.8 days: the published 49 does not follow" in home_rows.iloc[1]["check"]


def test_canadian_build_speed_adjusted_cost(owned: dict[str, Owned]) -> None:
    canada = owned["canadian-build-2018"]
    rival = canada.rivals[0]
    assert rival.price_per_hour * (rival.speedup or 0) == pytest.approx(0.90)  # "$0.45/h, half as fast"
    check = break_even_table(owned).iloc[-1]["check"]
    assert "21.60 USD a day: the published 20 holds, rounded" in check  # the post: "roughly $20/day"
    assert "657.00 USD a month" in check and "7,884.00 USD a year" in check
    assert "1,971.00 USD a year at a quarter of the time" in check
    assert canada.break_even_days(rival) is None  # the quoted inputs have no purchase price: said in words
    assert "unknown: no purchase price" in break_even_table(owned).iloc[-1]["break-even (days of use)"]


def test_effective_cost_and_electricity() -> None:
    rival = Rival("cloud", "gce-t4", "on-demand", 0.54, "test", 2.0, "test", {})
    box = Owned(
        name="box",
        title="box",
        source="test",
        currency="USD",
        purchase_price=2000.0,
        useful_life_years=3.0,
        hours_per_day=8.0,
        idle_watts=30.0,
        load_watts=300.0,
        electricity_per_kwh=0.25,
    )
    running, idle_per_day = 0.3 * 0.25, 0.03 * 16 * 0.25
    assert box.effective_cost_per_hour == pytest.approx(2000 / (3 * 365 * 8) + running + idle_per_day / 8)
    assert box.break_even_days(rival) == pytest.approx(2000 / (8 * (0.54 * 2 - running) - idle_per_day))
    expensive_power = Owned(**{**box.__dict__, "electricity_per_kwh": 10.0})
    assert math.isinf(expensive_power.break_even_days(rival) or 0.0)
    row = machines_table({"box": box}).iloc[0]
    assert row["effective cost per hour of use"] == f"{box.effective_cost_per_hour:,.2f} USD"


def test_bad_owned_file_names_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "owned.toml"
    bad.write_text('[box]\ntitle = "b"\nsource = "s"\ncurrency = "USD"\npurchase_price = "lots"\n')
    with pytest.raises(OwnedDataError, match=r"owned machine 'box': field 'purchase_price' must be a finite number"):
        load_owned(bad)
    machine = '[box]\ntitle = "b"\nsource = "s"\ncurrency = "USD"\n'
    rival = '[[box.rivals]]\nname = "r"\nprofile = "gce-t4"\nmarket = "spot"\nprice_source = "s"\n'
    for field, value, why in (
        ("purchase_price", "nan", "'purchase_price' must be a finite number > 0, got nan"),
        ("purchase_price", "1e308", "'purchase_price' 1e\\+308 is not plausible \\(at most 1e\\+06\\)"),
        ("electricity_per_kwh", "-0.2", "'electricity_per_kwh' must be a finite number > 0, got -0.2"),
        ("price_per_hour", "inf", "rival 0: field 'price_per_hour' must be a finite number > 0, got inf"),
        ("price_per_hour", "5000", "rival 0: field 'price_per_hour' 5000 is not plausible \\(at most 1000\\)"),
    ):
        text = (
            machine + rival + f"{field} = {value}\n" if field == "price_per_hour" else machine + f"{field} = {value}\n"
        )
        bad.write_text(text)
        with pytest.raises(OwnedDataError, match=f"^{re.escape(str(bad))}: owned machine 'box'.*{why}$"):
            load_owned(bad)
    bad.write_text('[box]\ntitle = "b"\nsource = "s"\ncurrency = "USD"\nhours_per_day = 30\n')
    with pytest.raises(OwnedDataError, match=r"'hours_per_day' must be in \(0, 24\]"):
        load_owned(bad)


def test_an_owned_machine_is_a_platform_weighed_against_the_rented_ones_beside_it(logs: Path, tmp_path: Path) -> None:
    """Your box, measured next to a rented g4dn.xlarge: it gets a cost per run at its effective price, and a
    break-even against the catalog's on-demand and spot prices at the measured speed-up."""
    owned = tmp_path / "owned.toml"
    owned.write_text(
        '[my-box]\ntitle = "my box"\nsource = "my invoice"\ncurrency = "USD"\nplatform = "my-box"\n'
        "purchase_price = 1500\nuseful_life_years = 3\nhours_per_day = 8\nidle_watts = 40\nload_watts = 250\n"
        "electricity_per_kwh = 0.30\n"
    )
    write_run(logs, platform="my-box", elapsed=(3.0, 1.0, 1.0))
    write_run(logs, platform="aws-g4dn.xlarge", elapsed=(5.0, 2.0, 2.0))
    out = tmp_path / "out"
    assert main([str(logs), "--owned", str(owned), "--out", str(out), "--base", "aws-g4dn.xlarge"]) == 0
    effective = 1500 / (3 * 365 * 8) + 0.25 * 0.30 + 0.04 * 16 * 0.30 / 8
    results = pd.read_csv(out / "results.csv").set_index("platform")
    assert results.loc["my-box", "usd_per_hour"] == pytest.approx(effective)
    assert results.loc["my-box", "cost_usd"] == pytest.approx(5.0 * effective / 3600)
    page = (out / "index.html").read_text()
    on_demand = 1500 / (8 * (0.526 * 2 - 0.075) - 0.192)  # speed-up 2: 2.0 s against 1.0 s steady epochs
    spot = 1500 / (8 * (0.24 * 2 - 0.075) - 0.192)
    assert f"{on_demand:,.1f} (8 h a day)" in page and f"{spot:,.1f} (8 h a day)" in page
    assert "measured: median over 1 shared workload(s)" in page


def test_an_owned_machine_measured_on_a_slice_is_compared_per_training_sample(tmp_path: Path, logs: Path) -> None:
    """The box ran 500 samples an epoch, the rented machine the full 60,000: 1.0 s against 2.0 s per steady epoch
    is 60x less work in half the time, so the rented machine is 60x faster per sample, not half as fast."""
    owned = tmp_path / "owned.toml"
    owned.write_text(
        '[my-box]\ntitle = "my box"\nsource = "my invoice"\ncurrency = "USD"\nplatform = "my-box"\n'
        "purchase_price = 1500\nuseful_life_years = 3\nhours_per_day = 8\nidle_watts = 40\nload_watts = 250\n"
        "electricity_per_kwh = 0.30\n"
    )
    write_run(logs, platform="my-box", elapsed=(3.0, 1.0, 1.0), train_samples=500)
    write_run(logs, platform="aws-g4dn.xlarge", elapsed=(5.0, 2.0, 2.0), train_samples=60000)
    out = tmp_path / "out"
    assert main([str(logs), "--owned", str(owned), "--out", str(out), "--base", "aws-g4dn.xlarge"]) == 0
    page = (out / "index.html").read_text()
    assert "seconds-per-training-sample ratio" in page
    # Speed-up 1/60: an hour of the box's use is a minute of renting, cheaper than the box's electricity.
    assert "never: renting costs less per hour of use than the electricity" in page
    epoch_ratio_days = 1500 / (8 * (0.526 * 2 - 0.075) - 0.192)  # what the epoch-against-epoch ratio gave
    assert f"{epoch_ratio_days:,.1f} (8 h a day)" not in page
