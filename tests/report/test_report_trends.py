"""The report's price-performance over time: one profile's runs on several dates (what `orchestrate schedule`
produces), written in the documented log format, become a table and a chart against date, with intervals."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from report_helpers import write_run

from benchmarks.stats import median_estimate
from records.catalog import load_catalogs
from report.cli import main

# gce-t4's catalog price prices every date; mnist_mlp trains 60000 samples an epoch in report_helpers' runs.
WEEKS = {
    "20260105T040012Z-a1b2": (9.0, 2.0, 2.1, 2.2, 1.9, 2.0),  # five steady epochs: an interval over the epochs
    "20260112T040007Z-c3d4": (9.5, 1.6, 1.7, 1.5, 1.6, 1.8),
}
REPEATS = ("20260119T040003Z-e5f6", "20260119T041503Z-e5f7", "20260119T043003Z-e5f8")  # one date, three repeats


def scheduled_logs(logs: Path) -> None:
    for run_id, elapsed in WEEKS.items():
        _write(logs, run_id, elapsed)
    for index, run_id in enumerate(REPEATS):
        _write(logs, run_id, (9.0, 1.2 + index / 10, 1.2 + index / 10))
    write_run(logs, platform="local", run_id="20260105T040012Z-0001")  # one date only: no trend


def _write(logs: Path, run_id: str, elapsed: tuple[float, ...]) -> None:
    path = write_run(logs, platform="gce-t4", run_id=run_id, elapsed=elapsed)
    metadata_path = path.with_suffix(".json")
    metadata = json.loads(metadata_path.read_text())
    day = run_id[:8]
    metadata["started_at"] = f"{day[:4]}-{day[4:6]}-{day[6:]}T04:00:12+00:00"
    metadata_path.write_text(json.dumps(metadata))


def test_a_profiles_runs_on_several_dates_become_a_trend_with_intervals(
    logs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scheduled_logs(logs)
    out = tmp_path / "out"
    assert main([str(logs), "--out", str(out)]) == 0, capsys.readouterr().err
    table = pd.read_csv(out / "trends.csv")
    assert list(table["platform"].unique()) == ["gce-t4"]  # "local" ran on one date only
    assert list(table["date"]) == ["2026-01-05", "2026-01-12", "2026-01-19"]
    first, _, third = (row for _, row in table.iterrows())
    steady = median_estimate([2.0, 2.1, 2.2, 1.9, 2.0])
    assert first["steady epoch s"] == pytest.approx(steady.value) and first["basis"] == "5 steady epochs of one run"
    assert first["interval"] == steady.interval_text("{:.3f}")
    assert third["basis"] == "3 repeats" and third["run ids"] == ", ".join(REPEATS)
    assert third["steady epoch s"] == pytest.approx(1.3)  # median of the repeats' medians 1.2, 1.3, 1.4
    price = load_catalogs([])["gce-t4"].on_demand.usd_per_hour
    assert first["$ per epoch"] == pytest.approx(steady.value * price / 3600, rel=1e-4)
    assert first["$ per 1000 samples"] == pytest.approx(steady.value * price / 3600 / 60000 * 1000, rel=1e-4)
    assert (out / "charts" / "trend_gce-t4.png").stat().st_size > 0 and (out / "charts" / "trend_gce-t4.svg").exists()
    html = (out / "index.html").read_text()
    assert "Over time: one profile's runs on several dates" in html and "charts/trend_gce-t4.png" in html
    markdown = tmp_path / "doc" / "report.md"
    assert main([str(logs), "--markdown", str(markdown)]) == 0
    text = markdown.read_text()
    assert "## Over time" in text and "report_charts/trend_gce-t4.png" in text


def test_no_trend_without_two_dates(logs: Path, tmp_path: Path) -> None:
    write_run(logs, platform="gce-t4", run_id="20260105T040012Z-a1b2")
    write_run(logs, platform="gce-t4", run_id="20260105T050012Z-a1b3")
    out = tmp_path / "out"
    assert main([str(logs), "--out", str(out)]) == 0
    assert not (out / "trends.csv").exists() and "Over time" not in (out / "index.html").read_text()


def test_runs_of_another_data_shape_are_not_the_same_trend(logs: Path, tmp_path: Path) -> None:
    _write(logs, "20260105T040012Z-a1b2", (9.0, 2.0, 2.1))
    path = write_run(logs, platform="gce-t4", run_id="20260112T040007Z-c3d4", elapsed=(9.0, 0.2, 0.2))
    metadata = json.loads(path.with_suffix(".json").read_text())
    metadata["data"]["train_samples"] = 6000  # a slice: a tenth of the epoch, not a faster machine
    path.with_suffix(".json").write_text(json.dumps(metadata))
    out = tmp_path / "out"
    assert main([str(logs), "--out", str(out)]) == 0
    assert not (out / "trends.csv").exists()
