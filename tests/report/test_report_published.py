"""The published logs, run through the report, reproduce the published relative figures.

derived_totals.csv (beside the reference logs, not bundled) lists every published total, cost and relative
figure to 3-6 decimals; the report's results.csv must match each row within half a unit of the last digit.
"""

from __future__ import annotations

import filecmp
from pathlib import Path

import pandas as pd
import pytest
from report_helpers import REFERENCE

from estimator.published import PUBLISHED_DIR, load_studies
from report.build import Request, build, multi_gpu_bars
from report.cli import main
from report.costs import PriceBook
from report.studies import get_study, published_results

DERIVED = REFERENCE / "derived_totals.csv"
# column in derived_totals.csv -> (column in results.csv, decimals printed in derived_totals.csv)
COMPARED = {
    "total_time_s": ("total_s", 3),
    "total_cost_usd": ("cost_usd", 6),
    "rel_time_vs_base": ("rel_time", 4),
    "rel_cost_vs_base": ("rel_cost", 4),
}
BUNDLED = [
    "deep-learning-cpu-gpu-benchmark/logs",
    "keras-cntk-benchmark/logs",
    "keras-cntk-benchmark/v2/logs",
    "rare-gpu-providers-2018/table1.csv",
    "home-server-2018/siamese_lstm_epochs.csv",
]


@pytest.fixture(scope="module")
def derived() -> pd.DataFrame:
    assert DERIVED.is_file(), f"reference data missing: {DERIVED} (set REFERENCE_DIR to shared/reference)"
    return pd.read_csv(DERIVED)


@pytest.mark.parametrize("relative", BUNDLED)
def test_bundled_copy_is_identical_to_the_reference(relative: str) -> None:
    bundled, reference = PUBLISHED_DIR / relative, REFERENCE / relative
    if reference.is_file():
        assert filecmp.cmp(bundled, reference, shallow=False)
        return
    comparison = filecmp.dircmp(bundled, reference)
    files = sorted(p.relative_to(reference) for p in reference.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(bundled) for p in bundled.rglob("*") if p.is_file())
    for name in files:
        assert filecmp.cmp(bundled / name, reference / name, shallow=False), name
    assert not comparison.left_only and not comparison.right_only


@pytest.mark.parametrize("study", ["cpu-or-gpu-2017-07", "benchmark-gpus-2017-11", "keras-cntk-2017-06"])
def test_report_reproduces_every_published_figure(
    study: str, derived: pd.DataFrame, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / study
    assert main(["--study", study, "--out", str(out)]) == 0
    assert f"report: {(out / 'index.html').resolve()}" in capsys.readouterr().out
    results = pd.read_csv(out / "results.csv")
    expected = derived[derived["study"] == study]
    assert len(expected) > 0
    merged = expected.assign(config=expected["config"] + "-" + expected["framework"]).merge(
        results, left_on=["model", "config"], right_on=["workload", "config"], how="left", validate="1:1"
    )
    assert merged["total_s"].notna().all(), "a published row is missing from the report"
    assert len(results) == len(expected), "the report has rows the published study does not"
    for published, (ours, decimals) in COMPARED.items():
        error = (merged[ours] - merged[published]).abs()
        worst = merged.loc[error.idxmax()]
        assert error.max() <= 0.5 * 10**-decimals + 1e-12, (
            f"{published}: {worst['model']} {worst['config']}: report {worst[ours]} vs published {worst[published]}"
        )
    base = expected["base_config"].iloc[0]
    base_label = base if "-" in base else f"{base}-tensorflow"
    assert set(results.loc[results["is_base"], "config"]) == {base_label}
    assert (merged["epochs_x"] == merged["epochs_y"]).all()


def test_published_tables_in_the_blog_post_are_reproduced() -> None:
    """Spot checks against the tables printed in the posts (published_numbers.md, tables A1 and C2)."""
    studies = load_studies()
    cpu = published_results(studies["cpu-or-gpu-2017-07"]).results.set_index(["workload", "config"])
    assert round(cpu.loc[("mnist_cnn", "cpu8pip-tensorflow"), "rel_time"], 2) == 6.46
    assert round(cpu.loc[("imdb_bidirectional_lstm", "cpu32pip-tensorflow"), "total_s"]) == 510
    gpus = published_results(studies["benchmark-gpus-2017-11"]).results.set_index(["workload", "config"])
    assert round(gpus.loc[("imdb_bidirectional_lstm", "p100-cntk"), "rel_cost"], 2) == 9.78
    assert round(gpus.loc[("lstm_text_generation", "cpu16-tensorflow"), "cost_usd"], 4) == 0.0281


def test_provider_table_relative_figures() -> None:
    """Table 1 of the 2018 provider study: its totals as published, relative figures against AWS K80."""
    published = published_results(load_studies()["gpu-providers-2018"])
    table = published.results.set_index("config")
    assert table.loc["AWS Tesla K80", "is_base"]
    assert table.loc["AWS Tesla V100", "total_s"] == pytest.approx(1.06 * 3600)
    assert table.loc["AWS Tesla V100", "rel_time"] == pytest.approx(1.06 / 3.62)
    assert table.loc["Hetzner GTX 1080", "rel_cost"] == pytest.approx(0.5 / 3.3)
    assert table.loc["LeaderGPU Tesla P100 x2", "gpu_util_pct"] == 42
    assert table.loc["GCE Tesla P100", "final_acc"] == pytest.approx(0.8230)
    assert len(table) == 13
    assert set(published.setups["config"]) == set(table.index)


def test_provider_study_multi_gpu_figure() -> None:
    """The post's Figure 2, redrawn from Table 1: LeaderGPU's servers trained on both GPUs and on one."""
    bars, alone = multi_gpu_bars(published_results(load_studies()["gpu-providers-2018"]).results)
    assert {b.label: b.value for b in bars} == {
        "LeaderGPU GTX 1080: 2 GPUs": pytest.approx(2.12 / 2.49),
        "LeaderGPU Tesla P100: 2 GPUs": pytest.approx(2.42 / 1.86),
    }
    assert alone == ["IBM Softlayer Tesla M60 x2", "IBM Softlayer Tesla K80 x4"]


def test_home_server_epochs_and_prices() -> None:
    published = published_results(load_studies()["home-server-2018"])
    table = published.results.set_index("config")
    k80, home = table.loc["aws-p2.xlarge-tensorflow"], table.loc["gtx1070ti-home-tensorflow"]
    # Totals are the post's `time` figures, not the whole-second epochs (58 + 19 x 54 = 1,084 s), which left
    # out data loading and understated the cost by about 21%.
    assert home["total_s"] == pytest.approx(1382.315) and k80["total_s"] == pytest.approx(2595.608)
    assert "its epochs sum to 1,084 s" in home["notes"]
    assert k80["first_epoch_s"] == 178
    assert home["rel_time"] == pytest.approx(1382.315 / 2595.608)  # the post's "1.9x faster"
    assert k80["cost_usd"] == pytest.approx(2595.608 * 0.38 / 3600)
    assert pd.isna(home["cost_usd"]) and "no hourly price published" in home["notes"]


def test_every_study_renders_alone(tmp_path: Path) -> None:
    for name in load_studies():
        assert main(["--study", name, "--out", str(tmp_path / name)]) == 0
        page = (tmp_path / name / "index.html").read_text()
        assert "Published:" in page and "charts/" in page


def test_summary_of_a_published_study() -> None:
    """July 2017: the K80 trained mnist_mlp fastest, the compiled 8-vCPU machine cheapest; on the bidirectional
    LSTM (Keras's generic LSTM on the GPU) 32 pip vCPUs were fastest. One run each: no verdict beyond that."""
    request = Request(None, None, PriceBook({}, "training-time", {}), get_study("cpu-or-gpu-2017-07"))
    summary = build(request).summary.set_index("workload")
    mlp = summary.loc["mnist_mlp"]
    assert (mlp["fastest"], mlp["cheapest"], mlp["cost per run"]) == (
        "gpu-tensorflow",
        "cpu8cmp-tensorflow",
        "$0.00155",
    )
    assert "too few repeats to tell" in mlp["fastest: verdict"]
    assert summary.loc["imdb_bidirectional_lstm", "fastest"] == "cpu32pip-tensorflow"
