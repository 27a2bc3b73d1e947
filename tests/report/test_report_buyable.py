"""Machines one can buy today: the dated, sourced catalog's validation, and the break-even against renting checked
against figures worked by hand; the dry run and the report set each against renting."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from estimator.buyable import FIGURES, BreakEven, Buyable, Figure, break_even, days_text, load_buyable
from estimator.owned import OwnedDataError
from estimator.suite import estimate_lines
from records.catalog import load_catalog
from report.buyable import estimated_rivals
from report.owned import published_method_days

SOURCE = 'source = "a shop page"'


def test_the_committed_catalog_dates_and_sources_every_figure_or_says_why_not() -> None:
    machines = load_buyable()
    assert {"rtx4090-workstation", "rtx5090-workstation", "rtx6000ada-workstation", "used-rtx3090-box"} <= set(machines)
    assert "rtxpro6000-workstation" in machines
    for machine in machines.values():
        assert set(machine.figures) == set(FIGURES)
        for figure in machine.figures.values():
            assert figure.source.strip()
            assert (figure.value is None) == (figure.date is None)
    assert machines["rtx4090-workstation"].value("purchase_usd") == 3200
    assert machines["used-rtx3090-box"].figures["useful_life_years"].source.startswith("assumed here, not sourced")
    assert machines["rtx5090-workstation"].value("purchase_usd") is None  # no sourced workstation price: unknown


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "buyable.toml"
    path.write_text(body)
    return path


GOOD = f"""
[box]
title = "A box"
gpu = "rtx4090"
purchase_usd = {{ value = 3000, date = "2026-05", {SOURCE} }}
gpu_watts = {{ value = 450, date = "2022", {SOURCE} }}
useful_life_years = {{ value = 5, date = "2020-03-01", {SOURCE} }}
electricity_usd_per_kwh = {{ unknown = "no price found" }}
"""


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('date = "2026-05"', 'date = "May 2026"'), r"field 'purchase_usd': date must be YYYY, YYYY-MM or YYYY-MM-DD"),
        (("value = 3000", "value = -3000"), r"field 'purchase_usd': value must be a finite number > 0, got -3000"),
        (("value = 3000", "value = nan"), r"field 'purchase_usd': value must be a finite number > 0, got nan"),
        (("value = 3000", "value = 1e308"), r"field 'purchase_usd': value 1e\+308 is not plausible \(at most 1e\+06\)"),
        (("value = 450", "value = 4.5e6"), r"field 'gpu_watts': value 4.5e\+06 is not plausible \(at most 10000\)"),
        ((', date = "2022", source = "a shop page" }', ', date = "2022" }'),
         r"field 'gpu_watts': expected exactly value, date and source, got date, value"),
        (('gpu = "rtx4090"', 'gpu = "rtx9999"'), r"field 'gpu': 'rtx9999' has no speed figure in estimate.toml"),
        (('{ unknown = "no price found" }', '{ unknown = "" }'), r"field 'electricity_usd_per_kwh': expected"),
        (('title = "A box"', 'title = "A box"\nwatts = 3'), r"unknown field 'watts'"),
        (('useful_life_years = { value = 5, date = "2020-03-01", source = "a shop page" }\n', ""),
         r"field 'useful_life_years' is missing"),
    ],
)  # fmt: skip
def test_a_bad_figure_is_one_line_naming_the_machine_and_field(
    tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    assert change[0] in GOOD
    path = _write(tmp_path, GOOD.replace(*change))
    with pytest.raises(OwnedDataError, match=rf"^{path}: machine 'box': .*{message}") as raised:
        load_buyable(path)
    assert "\n" not in str(raised.value)


def test_defaults_fill_the_figures_a_machine_leaves_out(tmp_path: Path) -> None:
    body = GOOD.replace('useful_life_years = { value = 5, date = "2020-03-01", source = "a shop page" }\n', "")
    path = _write(tmp_path, f'[defaults]\nuseful_life_years = {{ value = 4, date = "2019", {SOURCE} }}\n{body}')
    assert load_buyable(path)["box"].value("useful_life_years") == 4


def _machine(purchase: float | None, electricity: float | None) -> Buyable:
    def figure(value: float | None) -> Figure:
        return Figure(value, "2026" if value is not None else None, "hand-worked")

    return Buyable(
        "box",
        "A box",
        "rtx4090",
        {
            "purchase_usd": figure(purchase),
            "gpu_watts": figure(450),
            "useful_life_years": figure(5),
            "electricity_usd_per_kwh": figure(electricity),
        },
    )


def test_break_even_days_match_the_hand_worked_figures() -> None:
    # 450 W at 0.20 USD/kWh = 0.09 USD per hour; renting the same work at 2.00 USD/h x 1.5 = 3.00 USD per owned hour.
    result = BreakEven(_machine(3200, 0.20), "rented", 2.00, 1.5, 1.0, 2.0, "hand-worked")
    assert result.days() == pytest.approx(3200 / (24 * (3.00 - 0.09)))  # 45.82 days
    assert result.days() == pytest.approx(45.82, abs=0.01)
    fewest, most = result.days_range
    assert fewest == pytest.approx(3200 / (24 * (4.00 - 0.09)))  # 34.10 days at 2.0x
    assert most == pytest.approx(3200 / (24 * (2.00 - 0.09)))  # 69.81 days at 1.0x
    assert days_text(result) == "46 days around the clock (34 to 70)"
    unpowered = BreakEven(_machine(3200, None), "rented", 2.00, 1.5, 1.0, 2.0, "hand-worked")
    assert unpowered.days() == pytest.approx(3200 / 72)  # 44.44 days: 24 h x 3.00 USD
    assert days_text(unpowered) == "44 days around the clock (33 to 67), electricity not counted"


def test_without_speed_up_or_electricity_it_is_the_seeds_studies_method() -> None:
    """The 2018 home server against a p2.xlarge on demand (903.34 GBP, 0.70 GBP/h): with no speed-up and no
    electricity counted, the same arithmetic is the post's method, 53.8 days around the clock."""
    result = BreakEven(_machine(903.34, None), "p2.xlarge", 0.70, 1.0, 1.0, 1.0, "the post")
    assert result.days() == pytest.approx(published_method_days(903.34, 0.70)) == pytest.approx(53.77, abs=0.01)


def test_speedups_come_from_the_times_and_the_slow_end_from_the_high_estimate() -> None:
    result = break_even(_machine(3200, None), "rented", 2.0, 100.0, (50.0, 40.0, 80.0), "estimated")
    assert (result.speedup, result.speedup_low, result.speedup_high) == (2.0, 1.25, 2.5)


def test_renting_cheaper_than_the_electricity_never_breaks_even() -> None:
    result = BreakEven(_machine(3200, 0.20), "rented", 0.05, 1.0, 1.0, 1.0, "hand-worked")
    assert math.isinf(result.days() or 0) and days_text(result).startswith("never")
    assert days_text(BreakEven(_machine(None, 0.2), "r", 2.0, 1.0, 1.0, 1.0, "x")).startswith("unknown")


def test_the_dry_run_sets_each_buyable_machine_against_the_rented_profile(tmp_path: Path) -> None:
    lines = estimate_lines(load_catalog()["gce-h100"], "short", [("mnist_mlp", "jax")], False, 3600, tmp_path)
    start = next(i for i, line in enumerate(lines) if "own instead" in line)
    assert "break-even against gce-h100 at $" in lines[start]
    rows = {line.split(":")[0].strip(): line for line in lines[start + 1 : start + 1 + len(load_buyable())]}
    rtx4090 = rows["Workstation with one GeForce RTX 4090 (24 GB), Ryzen 9 7950X, 64 GB"]
    assert "days around the clock (" in rtx4090 and "as fast, estimated (hardware)" in rtx4090
    assert "unknown: no sourced purchase price" in rows["Workstation with one GeForce RTX 5090 (32 GB)"]


def test_the_report_sets_each_machine_against_each_measured_rented_platform() -> None:
    """A 60,000-sample steady epoch of 6 s measured on an H100 at 10 USD/h; the RTX 4090's figure (82.6 TFLOP/s)
    over the H100's (67.0) with exponent 1 makes it 82.6 / 67 = 1.233x as fast: the rented epoch's 6 s take
    4.87 s on it; the backtested band [0.8, 1.25] of the estimate gives 0.99x to 1.54x."""
    import pandas as pd

    from estimator.backtest import Band
    from estimator.model import Fit, Observation

    h100 = Observation("mnist_mlp", "jax", "h100", 128, "measured", "g", "", "H100 runs", 60_000, 5, 9.0, 6.0, 33.0)
    results = pd.DataFrame(
        [{"platform": "gce-h100", "workload": "mnist_mlp", "backend": "jax", "steady_epoch_s": 6.0,
          "train_samples": 60_000}]
    )  # fmt: skip
    machine = load_buyable()["rtx4090-workstation"]
    owned = estimated_rivals(
        machine, results, {"gce-h100": ("h100", 10.0, None)}, [h100], {"gpu": Fit(1.0, 3, 2.0)},
        {"hardware": Band(0.8, 1.25, 20)},
    )  # fmt: skip
    [rival] = owned.rivals
    assert (rival.profile, rival.market, rival.price_per_hour) == ("gce-h100", "on-demand", 10.0)
    assert rival.speedup == pytest.approx(82.6 / 67.0)
    assert "range 0.99x to 1.54x" in rival.speedup_source
    # 3,200 USD / (24 h x 10 USD/h x 1.233) = 10.8 days: the report's break-even column.
    assert owned.break_even_days(rival) == pytest.approx(3200 / (24 * 10.0 * 82.6 / 67.0))
