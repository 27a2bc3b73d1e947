"""Measured runs next to a published study, and the markdown output for docs/results.md."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from report_helpers import write_run

from benchmarks.suites import SUITES
from estimator.published import load_studies
from report.cli import main
from report.studies import published_results

K80_MNIST_MLP_TOTAL = 64.546  # benchmark-gpus-2017-11, k80-tensorflow, mnist_mlp (20 epochs)


STUDIES = (
    "cpu-or-gpu-2017-07",
    "benchmark-gpus-2017-11",
    "keras-cntk-2017-06",
    "gpu-providers-2018",
    "home-server-2018",
)


def test_studies_match_their_suites() -> None:
    """Same names (docs/architecture.md), workloads and published epochs as benchmarks.suites runs."""
    from benchmarks.workloads import spec

    studies = load_studies()
    assert sorted(studies) == sorted(STUDIES)
    for name, study in studies.items():
        suite = SUITES[name]
        assert suite.cut is None, name  # a study's suite runs the published epochs on the full data
        assert set(study.workloads) == set(suite.workloads), name
        for workload, epochs in study.workloads.items():
            assert spec(workload).epochs == epochs, (name, workload)


def test_matching_profiles_exist_in_the_catalog() -> None:
    from records.catalog import load_catalog

    catalog = load_catalog()
    for study in load_studies().values():
        profiles = [p for c in study.configs for p in c.matches]
        profiles += [p for names in study.raw.get("matches", {}).values() for p in names]
        assert set(profiles) <= set(catalog), study.name


def _comparison(out: Path, study: str) -> pd.DataFrame:
    return pd.read_csv(out / f"study_{study}_comparison.csv")


def test_measured_next_to_published(logs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A K80 reproduction with the published epochs, and a local CPU run cut to 3 epochs.
    full = (4.0, *([3.0] * 19))
    write_run(logs, platform="gce-k80", backend="tensorflow", elapsed=full, gpu_util=64.0)
    write_run(logs, platform="local", backend="jax", elapsed=(5.0, 2.0, 2.2))
    write_run(logs, platform="local", backend="torch", elapsed=(5.0, 2.0, 2.2), cut_down=True)
    out = tmp_path / "out"
    assert main([str(logs), "--out", str(out), "--study", "benchmark-gpus-2017-11"]) == 0
    capsys.readouterr()
    comparison = _comparison(out, "benchmark-gpus-2017-11")
    assert set(comparison["workload"]) == {"mnist_mlp"}  # only workloads with a measured run
    published = comparison[comparison["source"] == "published"].set_index("config")
    assert published.loc["p100-cntk", "rel_time_vs_published_base"] == pytest.approx(0.6476, abs=5e-5)
    measured = comparison[comparison["source"] == "measured"].set_index("config")
    k80 = measured.loc["gce-k80-tensorflow"]
    assert k80["basis"] == "total"
    assert k80["rel_time_vs_published_base"] == pytest.approx(sum(full) / K80_MNIST_MLP_TOTAL, rel=1e-4)
    assert k80["matches"] == "k80-tensorflow"
    assert k80["time_vs_match"] == pytest.approx(sum(full) / K80_MNIST_MLP_TOTAL, rel=1e-4)
    assert k80["gpu_util_pct"] == 64.0
    # gce-k80 is priced in the catalog: cost relative to the published K80 cost.
    published_cost = K80_MNIST_MLP_TOTAL * 0.4975 / 3600
    assert k80["rel_cost_vs_published_base"] == pytest.approx(k80["cost_usd"] / published_cost, rel=1e-4)
    jax = measured.loc["local-jax"]
    assert jax["basis"] == "steady epoch" and "3 epochs vs 20 published" in jax["notes"]
    base_steady = (
        published_results(load_studies()["benchmark-gpus-2017-11"])
        .results.set_index(["workload", "config"])
        .loc[("mnist_mlp", "k80-tensorflow"), "steady_epoch_s"]
    )
    assert jax["rel_time_vs_published_base"] == pytest.approx(2.1 / base_steady)
    torch = measured.loc["local-torch"]
    assert pd.isna(torch["rel_time_vs_published_base"]) and "cut-down run" in torch["notes"]
    page = (out / "index.html").read_text()
    assert "Measured vs published" in page and "TensorFlow 1.4 (CUDA 8, cuDNN 6)" in page
    assert "Tesla K80 + Test CPU 3000 (2 logical cores), tensorflow 9.9.9, Keras 3.15.1" in page
    assert "study_benchmark-gpus-2017-11_mnist_mlp_time.png" in page


def test_study_without_measured_runs_says_so(logs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(logs, backend="tensorflow", workload="mnist_cnn")
    out = tmp_path / "out"
    assert main([str(logs), "--out", str(out), "--study", "home-server-2018"]) == 0
    capsys.readouterr()
    page = (out / "index.html").read_text()
    assert "No measured run of this study's workloads (siamese_lstm) was found." in page


def test_provider_study_comparison(logs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    elapsed = (4000.0, 3000.0, 3000.0, 3000.0)
    write_run(
        logs,
        platform="aws-p2.xlarge",
        backend="tensorflow",
        workload="twitter_sentiment_bilstm",
        elapsed=elapsed,
        gpu_util=80.0,
    )
    out = tmp_path / "out"
    assert main([str(logs), "--out", str(out), "--study", "gpu-providers-2018"]) == 0
    capsys.readouterr()
    measured = _comparison(out, "gpu-providers-2018").query("source == 'measured'").iloc[0]
    assert measured["matches"] == "AWS Tesla K80"
    assert measured["time_vs_match"] == pytest.approx(sum(elapsed) / (3.62 * 3600))


def test_markdown_for_the_results_page(logs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(logs, platform="gce-k80", backend="tensorflow", elapsed=(4.0, *([3.0] * 19)))
    target = tmp_path / "docs" / "results.md"
    assert main([str(logs), "--markdown", str(target), "--study", "benchmark-gpus-2017-11"]) == 0
    assert capsys.readouterr().out.strip() == f"markdown: {target.resolve()}"
    text = target.read_text()
    assert text.startswith("# Benchmark results\n")
    assert "| gce-k80-tensorflow (base) | real | 1 | 20 |" in text
    assert "## Measured vs published: Benchmarking Modern GPUs" in text
    assert "| published | k80-tensorflow |" in text and "| measured | gce-k80-tensorflow |" in text
    images = re.findall(r"\]\((results_charts/[^)]+)\)", text)  # each PNG shown and the SVG it links to
    assert images and all((target.parent / image).is_file() for image in images)
    drawn = {f"results_charts/{p.name}" for p in (target.parent / "results_charts").iterdir()}
    assert drawn == set(images)  # no chart drawn that the page does not show or link


def test_markdown_preamble_comes_first(logs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(logs, platform="gce-k80", backend="tensorflow", elapsed=(4.0, *([3.0] * 19)))
    preamble = tmp_path / "preamble.md"
    preamble.write_text("# GPU results\n\nHow they were measured.\n")
    target = tmp_path / "results.md"
    assert main([str(logs), "--markdown", str(target), "--preamble", str(preamble)]) == 0
    text = target.read_text()
    assert text.startswith("# GPU results\n\nHow they were measured.\n\n# Benchmark results\n")
    capsys.readouterr()
    assert main([str(logs), "--preamble", str(preamble)]) == 2
    assert "needs --markdown" in capsys.readouterr().err
