"""`python -m report` over logs written in the documented format: figures, labels, problems, arguments."""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from report_helpers import REPO, write_run

from records.ledger import InstanceRecord, Ledger, RunRecord
from report.cli import main

TF = [(10.0, 3.0, 3.1), (11.0, 3.2, 3.3), (9.5, 2.9, 3.4)]
JAX = [(6.0, 1.0, 1.1), (5.0, 1.2, 1.0), (7.0, 0.9, 1.3), (5.5, 1.1, 1.0)]


def _run_id(i: int) -> str:
    return f"20260101T0000{i:02d}Z-{i:04x}"


def _repeats(logs: Path) -> None:
    for i, elapsed in enumerate(TF):
        write_run(logs, run_id=_run_id(i), backend="tensorflow", elapsed=elapsed)
    for i, elapsed in enumerate(JAX):
        write_run(logs, run_id=_run_id(i), backend="jax", elapsed=elapsed)


def _report(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_medians_intervals_and_relative_figures(logs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _repeats(logs)
    out = tmp_path / "out"
    args = [str(logs), "--out", str(out), "--price", "local=0.36", "--billing", "profile"]
    code, stdout, _ = _report(args, capsys)
    assert code == 0
    assert stdout.strip() == f"report: {(out / 'index.html').resolve()}"
    results = pd.read_csv(out / "results.csv").set_index("config")
    tf_totals, jax_totals = [sum(e) for e in TF], [sum(e) for e in JAX]
    tf, jax = results.loc["local-tensorflow"], results.loc["local-jax"]
    assert tf["is_base"] and not jax["is_base"]  # default base: the TensorFlow configuration
    assert (tf["n_runs"], jax["n_runs"]) == (3, 4)
    assert tf["total_s"] == pytest.approx(statistics.median(tf_totals))
    assert jax["total_s"] == pytest.approx(statistics.median(jax_totals))
    assert (tf["total_low"], tf["total_high"]) == (min(tf_totals), max(tf_totals))
    assert jax["rel_time"] == pytest.approx(statistics.median(jax_totals) / statistics.median(tf_totals))
    assert jax["rel_time_low"] <= jax["rel_time"] <= jax["rel_time_high"]
    assert jax["first_epoch_s"] == pytest.approx(statistics.median(e[0] for e in JAX))
    steady = [statistics.median(e[1:]) for e in JAX]
    assert jax["steady_epoch_s"] == pytest.approx(statistics.median(steady))
    assert jax["final_acc"] == pytest.approx(0.97) and jax["final_acc_metric"] == "val_acc"
    # The local profile's billing (1 s increments, 60 s minimum) applied to each workload's training time:
    assert jax["billed_s"] == 60 and "billed the profile's minimum" in jax["notes"]
    assert jax["cost_usd"] == pytest.approx(60 * 0.36 / 3600)
    page = (out / "index.html").read_text()
    assert "local-tensorflow (base)" in page and "75% order-statistic, n=3" in page
    assert sorted(p.name for p in (out / "charts").iterdir()) == [
        "mnist_mlp_cost.png",
        "mnist_mlp_cost.svg",
        "mnist_mlp_time.png",
        "mnist_mlp_time.svg",
    ]


def test_training_time_billing_and_base_choice(logs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _repeats(logs)
    out = tmp_path / "out"
    args = [str(logs), "--out", str(out), "--price", "local=0.36", "--billing", "training-time"]
    assert _report([*args, "--base", "local-jax"], capsys)[0] == 0
    results = pd.read_csv(out / "results.csv").set_index("config")
    jax, tf = results.loc["local-jax"], results.loc["local-tensorflow"]
    assert jax["is_base"] and jax["rel_time"] == 1.0
    assert jax["cost_usd"] == pytest.approx(jax["total_s"] * 0.36 / 3600)
    assert tf["rel_cost"] == pytest.approx(tf["total_s"] / jax["total_s"])  # same price: cost ratio = time ratio


def test_a_plain_base_name_spans_its_images(logs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`make bench` logs no image and `make bench-local` runs in one: the platform's plain name still names the
    base, and the base of each workload is its configuration with the most repeats."""
    write_run(logs, run_id=_run_id(0), backend="tensorflow")
    write_run(logs, run_id=_run_id(0), backend="tensorflow", source="synthetic")
    for i in (1, 2):
        write_run(logs, run_id=_run_id(i), backend="tensorflow", image="keras-cloud-bench:cpu")
        write_run(logs, run_id=_run_id(i), backend="jax", image="keras-cloud-bench:cpu")
    tensorflow = {"local-tensorflow [keras-cloud-bench:cpu]", "local-tensorflow [no image] (synthetic)"}
    for base, chosen in (("local-tensorflow", tensorflow), ("local-tensorflow (synthetic)", tensorflow),
                         ("local-jax", {"local-jax"})):  # fmt: skip
        out = tmp_path / base
        assert _report([str(logs), "--out", str(out), "--base", base], capsys)[0] == 0, base
        results = pd.read_csv(out / "results.csv")
        assert set(results.loc[results["is_base"], "config"]) == chosen, base


def test_single_runs_say_no_interval_and_synthetic_is_labelled(
    logs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(logs, backend="tensorflow")
    write_run(logs, backend="torch", source="synthetic")
    out = tmp_path / "out"
    assert _report([str(logs), "--out", str(out)], capsys)[0] == 0
    results = pd.read_csv(out / "results.csv")
    synthetic = results[results["data_source"] == "synthetic"].iloc[0]
    assert synthetic["config"] == "local-torch (synthetic)"
    page = (out / "index.html").read_text()
    assert "n=1, no interval" in page and "local-torch (synthetic)" in page
    assert "no price: catalog profile &#39;local&#39; has none" in page  # cost n/a with the reason
    assert "No cost chart" in page
    # Named without its "(synthetic)": the synthetic runs are the only ones of that name, so they are the base.
    assert _report([str(logs), "--out", str(tmp_path / "named"), "--base", "local-torch"], capsys)[0] == 0
    named = pd.read_csv(tmp_path / "named" / "results.csv").set_index("config")
    assert named.loc["local-torch (synthetic)", "is_base"]


def test_synthetic_runs_never_replace_a_real_data_run_in_the_summary(
    logs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One run on the user's real data, three faster repeats on labelled synthetic data (a mistyped data folder):
    the summary ranks the real-data run and names the synthetic ones it left out."""
    write_run(logs, backend="tensorflow", elapsed=(5.0, 3.0, 3.0))
    for i in (1, 2, 3):
        write_run(logs, run_id=_run_id(i), backend="jax", source="synthetic", elapsed=(4.0, 1.0, 1.0))
    out = tmp_path / "out"
    assert _report([str(logs), "--out", str(out)], capsys)[0] == 0
    (row,) = pd.read_csv(out / "summary.csv").to_dict("records")
    assert row["fastest"] == "local-tensorflow" and "1 run, no interval" in row["fastest: rests on"]
    assert row["compared on"].endswith("real data only, synthetic-data runs left out: local-jax (synthetic)")


def test_partial_and_malformed_logs_are_named_not_fatal(
    logs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(logs, backend="tensorflow")
    write_run(logs, run_id=_run_id(1), backend="tensorflow", status="partial", elapsed=(9.0,), epochs_planned=3)
    bad = logs / "local" / _run_id(2)
    bad.mkdir(parents=True)
    (bad / "empty_jax.csv").write_text("")
    (bad / "header_only_jax.csv").write_text("epoch,elapsed,loss\n")
    (bad / "columns_jax.csv").write_text("step,seconds\n0,1.0\n")
    (bad / "text_jax.csv").write_text("epoch,elapsed\n0,1.5\n1,fast\n")
    broken_json = write_run(logs, run_id=_run_id(3), backend="jax").with_suffix(".json")
    broken_json.write_text('{"workload": "mnist_mlp", ')
    no_workload = write_run(logs, run_id=_run_id(4), backend="torch").with_suffix(".json")
    no_workload.write_text(no_workload.read_text().replace('"workload": "mnist_mlp"', '"workload": 7'))
    out = tmp_path / "out"
    code, _, stderr = _report([str(logs), "--out", str(out)], capsys)
    assert code == 0
    assert "Traceback" not in stderr
    expected = {
        bad / "empty_jax.csv": "empty file",
        bad / "header_only_jax.csv": "no epochs",
        bad / "columns_jax.csv": "missing column(s) epoch, elapsed",
        bad / "text_jax.csv": ":3: bad value",
        broken_json: "not valid JSON",
        no_workload: "field 'workload' is 7",
    }
    lines = [line for line in stderr.splitlines() if line.startswith("skipped: ")]
    assert len(lines) == len(expected)
    for path, why in expected.items():
        assert any(str(path) in line and why in line for line in lines), (path, lines)
    assert "1 partial run(s) left out" in stderr
    results = pd.read_csv(out / "results.csv")
    assert list(results["n_runs"]) == [1]  # the partial run is not a repeat
    partial = pd.read_csv(out / "partial_runs.csv")
    assert list(partial["status"]) == ["partial"] and list(partial["epochs_completed"]) == [1]
    page = (out / "index.html").read_text()
    assert "6 file(s) could not be read" in page and "1 partial run(s)" in page
    assert "Partial, left out: local-tensorflow run" in page
    assert len(pd.read_csv(out / "skipped_files.csv")) == 6


def test_nothing_readable_is_a_one_line_error(logs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _report([str(logs)], capsys)[0:3:2] == (1, f"error: {logs}: no epoch logs (*.csv) found\n")
    (logs / "broken_jax.csv").write_text("nonsense\n")
    code, _, stderr = _report([str(logs)], capsys)
    assert code == 1 and f"{logs / 'broken_jax.csv'}: missing column(s)" in stderr
    write_run(logs, status="partial", elapsed=(3.0,))
    code, _, stderr = _report([str(logs)], capsys)
    assert code == 1 and "no complete runs (1 partial, 1 unreadable)" in stderr


def test_differing_images_and_epochs_are_not_pooled(
    logs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(logs, run_id=_run_id(0), backend="tensorflow", image="ghcr.io/x/keras-cloud-bench:cpu")
    write_run(logs, run_id=_run_id(1), backend="tensorflow", image="ghcr.io/x/keras-cloud-bench:cpu-compiled")
    write_run(logs, run_id=_run_id(2), backend="jax", elapsed=(5.0, 2.0))
    write_run(logs, run_id=_run_id(3), backend="jax", elapsed=(5.0, 2.0))
    write_run(logs, run_id=_run_id(4), backend="jax", elapsed=(5.0, 2.0, 2.0))
    out = tmp_path / "out"
    args = [str(logs), "--out", str(out), "--base", "local-tensorflow [keras-cloud-bench:cpu]"]
    assert _report(args, capsys)[0] == 0
    results = pd.read_csv(out / "results.csv").set_index("config")
    assert {"local-tensorflow [keras-cloud-bench:cpu]", "local-tensorflow [keras-cloud-bench:cpu-compiled]"} < set(
        results.index
    )
    jax = results.loc["local-jax"]
    assert jax["n_runs"] == 2 and jax["epochs"] == 2
    assert f"left out {_run_id(4)}: 3 epochs" in jax["notes"]
    assert "total time not compared: 2 epochs / 60,000 samples vs the base's 3 / 60,000" in jax["notes"]
    # Steady epochs still compare: each repeat's median steady epoch, median over repeats, over the base's.
    assert pd.isna(jax["rel_time"]) and jax["rel_steady"] == pytest.approx(2.0 / 2.1)
    assert jax["verdict_basis"] == "steady epoch" and "too few repeats" in jax["verdict"]


def test_suite_filter(logs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    quick = write_run(logs, run_id=_run_id(0), backend="tensorflow")
    study = write_run(logs, run_id=_run_id(1), backend="jax")
    for path, suite in ((quick, "quick"), (study, "cpu-or-gpu-2017-07")):
        path.with_suffix(".json").write_text(
            path.with_suffix(".json").read_text().replace('"suite": null', f'"suite": "{suite}"')
        )
    out = tmp_path / "out"
    assert _report([str(logs), "--out", str(out), "--suite", "quick"], capsys)[0] == 0
    assert list(pd.read_csv(out / "results.csv")["config"]) == ["local-tensorflow"]
    code, _, stderr = _report([str(logs), "--suite", "full"], capsys)
    assert code == 1 and "no runs of suite 'full'" in stderr


def test_run_id_filter_keeps_matching_runs_and_names_only_their_differences(
    logs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(logs, run_id="gpu-suite-jax-default", backend="jax", image="ghcr.io/x/keras-cloud-bench:gpu")
    write_run(logs, run_id="gpu-suite-torch-default", backend="torch")
    write_run(logs, run_id="gpu-sweep-jax-jit-off", backend="jax", image="ghcr.io/x/keras-cloud-bench:cpu")
    out = tmp_path / "out"
    assert _report([str(logs), "--out", str(out), "--runs", "gpu-suite-*-default"], capsys)[0] == 0
    # Without the sweep run the two images no longer differ among jax runs: no variant label.
    assert sorted(pd.read_csv(out / "results.csv")["config"]) == ["local-jax", "local-torch"]
    code, _, stderr = _report([str(logs), "--runs", "nothing-*"], capsys)
    assert code == 1 and "no run id matches nothing-*" in stderr


def test_machine_time_from_the_ledger_or_estimated(
    logs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(logs, platform="gce-k80", run_id=_run_id(0), backend="tensorflow", elapsed=(40.0, 30.0, 30.0))
    write_run(logs, platform="gce-k80", run_id=_run_id(1), backend="tensorflow", elapsed=(40.0, 30.0, 30.0))
    ledger = Ledger(tmp_path / "ledger.jsonl")
    record = RunRecord(
        run_id=_run_id(0),
        profile="gce-k80",
        provider="gce",
        platform="gce-k80",
        suite="quick",
        owner="test@host",
        pid=1,
        started_at=0.0,
        status="complete",
        spot=False,
        billed_seconds=412,
        estimated_cost_usd=412 * 0.4975 / 3600,
        instances=[InstanceRecord("gce", "i-1", "us-central1-a", False, 0.0, 412.0, 412, 412 * 0.4975 / 3600)],
    )
    ledger.append(record)
    out = tmp_path / "out"
    assert _report([str(logs), "--out", str(out), "--ledger", str(ledger.path)], capsys)[0] == 0
    machines = pd.read_csv(out / "machines.csv").set_index("run_id")
    from_ledger, estimated = machines.loc[_run_id(0)], machines.loc[_run_id(1)]
    assert from_ledger["billed_s"] == 412 and from_ledger["overhead_s"] == pytest.approx(412 - 100)
    assert from_ledger["source"].startswith("ledger (run complete, on-demand)")
    assert estimated["billed_s"] == 100 and estimated["source"].startswith("estimate")
    assert estimated["cost_usd"] == pytest.approx(100 * 0.4975 / 3600)
    assert "Machine time" in (out / "index.html").read_text()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "report", *args], cwd=REPO, capture_output=True, text=True, timeout=300
    )


def test_help_and_bad_arguments_through_the_real_entry_point(logs: Path) -> None:
    shown = _cli("--help")
    assert shown.returncode == 0 and "--price PLATFORM=USD_PER_HOUR" in shown.stdout
    write_run(logs, backend="tensorflow")
    cases = {
        ("--bogus",): "unrecognized arguments: --bogus",
        (): "give a log folder",
        ("no/such/dir",): "log folder 'no/such/dir' does not exist",
        (str(logs), "--price", "local"): "--price 'local': expected PLATFORM=USD_PER_HOUR",
        (str(logs), "--study", "nope"): "--study 'nope' is not a published study",
        (str(logs), "--markdown", "out.html"): "expected a .md file name",
        (str(logs), "--billing", "hourly"): "invalid choice: 'hourly'",
        (str(logs), "--base", "nope", "--out", str(logs.parent / "o")): "--base 'nope' matches no configuration",
        (str(logs), "--reference", "A100"): "--reference 'A100': no folder",
        (str(logs), "--electricity-price", "-1"): "--electricity-price -1.0: expected a number from 0 to 10",
    }
    for args, message in cases.items():
        done = _cli(*args)
        assert done.returncode in (1, 2), (args, done.stderr)
        assert done.stderr.count("\n") == 1 and message in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr


def test_list_studies(capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, _ = _report(["--list-studies"], capsys)
    assert code == 0 and stdout.count("\n") == 5 and "cpu-or-gpu-2017-07:" in stdout


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", *args], cwd=REPO, capture_output=True, text=True, timeout=300
    )


def test_make_targets(logs: Path, tmp_path: Path) -> None:
    _repeats(logs)
    out = tmp_path / "made"
    done = _make("report", f"REPORT_LOGS={logs}", f"REPORT_OUT={out}", "BASE=local-jax", "PRICES=local=0.1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(f"report: {(out / 'index.html').resolve()}")
    results = pd.read_csv(out / "results.csv").set_index("config")
    assert results.loc["local-jax", "is_base"] and results.loc["local-jax", "usd_per_hour"] == 0.1
    missing = _make("reproduce")
    assert missing.returncode == 2 and "error: give STUDY=<name>, one of: cpu-or-gpu-2017-07" in missing.stderr
