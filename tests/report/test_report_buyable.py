"""Machines one can buy today: the dated, sourced catalog's validation, and the break-even against renting checked
against figures worked by hand; the dry run and the report set each against renting."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import pytest

from estimator.buyable import FIGURES, Buyable, Figure, load_buyable
from estimator.owned import Owned, OwnedDataError, Rival
from estimator.owning import Rented, owning_lines
from estimator.suite import basis_of, estimate_runs, steady_epoch
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


def _days(machine: Buyable, price: float, speedup: float) -> float | None:
    return machine.as_owned().break_even_days(Rival("rented", "rented", "", price, "", speedup, "", {}))


def test_break_even_days_match_the_hand_worked_figures() -> None:
    # 450 W at 0.20 USD/kWh = 0.09 USD per hour; renting the same work at 2.00 USD/h x 1.5 = 3.00 USD per owned hour.
    assert _days(_machine(3200, 0.20), 2.00, 1.5) == pytest.approx(3200 / (24 * (3.00 - 0.09)))  # 45.82 days
    assert _days(_machine(3200, 0.20), 2.00, 2.0) == pytest.approx(3200 / (24 * (4.00 - 0.09)))  # 34.10 days
    assert _days(_machine(3200, None), 2.00, 1.5) == pytest.approx(3200 / 72)  # 44.44 days: electricity not counted


def test_without_speed_up_or_electricity_it_is_the_seeds_studies_method() -> None:
    """The 2018 home server against a p2.xlarge on demand (903.34 GBP, 0.70 GBP/h): with no speed-up and no
    electricity counted, the same arithmetic is the post's method, 53.8 days around the clock."""
    days = _days(_machine(903.34, None), 0.70, 1.0)
    assert days == pytest.approx(published_method_days(903.34, 0.70)) == pytest.approx(53.77, abs=0.01)


def test_renting_cheaper_than_the_electricity_never_breaks_even() -> None:
    assert math.isinf(_days(_machine(3200, 0.20), 0.05, 1.0) or 0)
    assert _days(_machine(None, 0.2), 2.0, 1.0) is None


def test_the_dry_run_sets_each_machine_against_the_rented_profile(tmp_path: Path) -> None:
    """The planned runs on an H100 and on each machine to buy, each estimated; the RTX 4090 at its tensor-core
    datasheet peak (the physics basis), not its FP32 figure, which is above an H100's."""
    profile = load_catalog()["gce-h100"]
    items = [("resnet50", "jax")]
    (rented,) = estimate_runs("h100", "short", items, tmp_path)
    assert rented.seconds is not None and rented.basis == "measured"
    lines = owning_lines([Rented(profile, 11.06, rented.total)], "short", items, tmp_path)
    assert lines[0].startswith("  own instead  the break-even in days of use") and "gce-h100 $11.0600/h" in lines[0]
    rows = {line.split(" (to buy")[0].strip(): line for line in lines[1:]}
    assert len(rows) == len(load_buyable())
    rtx4090 = rows["Workstation with one GeForce RTX 4090 (24 GB), Ryzen 9 7950X, 64 GB"]
    assert "on its rtx4090 (datasheet); break-even around the clock" in rtx4090
    basis, spec = basis_of(tmp_path), (items[0][0], items[0][1], 256, 5120)
    h100, rtx4090_epoch = steady_epoch(basis, "h100", *spec), steady_epoch(basis, "rtx4090", *spec)
    assert h100 is not None and rtx4090_epoch is not None
    assert rtx4090_epoch[0] > 2 * h100[0]  # 82.6 TF32 TFLOP/s against 494.7, where FP32 figures say 82.6 against 67
    assert re.search(r"gce-h100 [\d,]+ days \([\d,]+ to [\d,]+\)$", rtx4090), rtx4090
    assert rows["Workstation with one GeForce RTX 5090 (32 GB)"].endswith("not weighed: no purchase price")


def test_an_owned_machine_of_the_users_is_weighed_or_says_why_not(tmp_path: Path) -> None:
    mine = Owned("mine", "My box", "my receipt", "USD", purchase_price=2500, hours_per_day=8, gpu="rtx4090")
    elsewhere = replace(mine, currency="GBP")
    profile = load_catalog()["gce-l4"]
    lines = owning_lines([Rented(profile, 0.71, 600.0)], "short", [("mnist_mlp", "jax")], tmp_path, owned={
        "mine": mine, "gbp": elsewhere, "nogpu": replace(mine, gpu=None)})  # fmt: skip
    ours = [line for line in lines if "(yours, --owned)" in line]
    assert "break-even at 8 h a day, electricity not counted (no price): gce-l4 " in ours[0]
    assert ours[1].endswith("priced in GBP, the catalog in USD: no exchange rate is assumed")
    assert ours[2].endswith("speed unknown: its entry names no `gpu` to estimate it from")


def test_the_report_sets_each_machine_against_each_measured_rented_platform(tmp_path: Path) -> None:
    """A 60,000-sample steady epoch of 6 s measured on an H100 at 10 USD/h: the RTX 4090's steady epoch is the
    estimator's (the physics basis at its datasheet peak), the speed-up their ratio, its range the estimate's."""
    import pandas as pd

    results = pd.DataFrame(
        [{"platform": "gce-h100", "workload": "mnist_mlp", "backend": "jax", "steady_epoch_s": 6.0,
          "train_samples": 60_000}]
    )  # fmt: skip
    machine = replace(load_buyable()["rtx4090-workstation"].as_owned(), gpu="rtx4090")
    basis = basis_of(tmp_path)
    owned = estimated_rivals(machine, results, {"gce-h100": ("h100", 10.0, None)}, basis)
    [rival] = owned.rivals
    found = steady_epoch(basis, "rtx4090", "mnist_mlp", "jax", 128, 60_000)
    assert found is not None and found[3] == "datasheet"
    assert (rival.profile, rival.market, rival.price_per_hour) == ("gce-h100", "on-demand", 10.0)
    assert rival.speedup == pytest.approx(6.0 / found[0])
    assert f"range {6.0 / found[2]:.2f}x to {6.0 / found[1]:.2f}x" in rival.speedup_source
    assert owned.break_even_days(rival) == pytest.approx(3200 / (24 * 10.0 * rival.speedup))
