"""Issue 11's report side and issue 12's defects: verdicts by the stated test, steady-epoch comparisons, the base
chosen from full default runs, unstable and host-bound marks, energy from metadata schema 2, machine fingerprints,
the reproducibility table, repeat file names and the committed reference runs kept apart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from report_helpers import write_run

from benchmarks.harness.energy import integrate_power, watt_hours
from benchmarks.stats import compare
from records.loading import load_runs
from report.cli import main

FAST = [(5.0, 1.00, 1.02), (5.1, 1.01, 1.00), (4.9, 0.99, 1.01), (5.2, 1.02, 0.98), (5.0, 1.00, 1.00)]
SLOW = [(9.0, 2.00, 2.04), (9.2, 2.02, 2.00), (8.8, 1.98, 2.02), (9.1, 2.04, 1.96), (9.0, 2.00, 2.00)]


def _schema2(gpu_wh: float, host: str, label: str = "stable", host_bound: bool = False) -> dict[str, Any]:
    return {
        "stability": {
            "steady_cv": 0.01,
            "steady_epochs": 2,
            "outlier_epochs": [],
            "label": label,
            "host_bound": host_bound,
            "host_share": 0.8 if host_bound else 0.05,
        },
        "energy": {
            "gpu_joules": gpu_wh * 3600,
            "gpu_wh": gpu_wh,
            "gpu_joules_per_epoch": [gpu_wh * 1200] * 3,
            "gpu_method": "nvml-energy-counter",
            "host_joules": None,
            "host_wh": None,
            "host_method": None,
        },
        "fingerprint": {
            "seconds": 4.2,
            "host_single_thread_score": 812.0 if host == "box-a" else 655.0,
            "host_single_thread_unit": "Mop/s",
            "gemm_tflops": 410.0,
            "device_memory_gbps": 3900.0,
            "host_to_device_gbps": 48.0,
            "device": "gpu",
            "backend": "jax",
        },
        "repeat": {"group": "g1", "index": 1, "planned": 5, "target_ci_pct": None},
    }


def _write_repeats(logs: Path) -> None:
    """Five repeats of two configurations, named as the runner names repeats, spread over two machines."""
    for i, (fast, slow) in enumerate(zip(FAST, SLOW, strict=True)):
        host = "box-a" if i < 3 else "box-b"
        common = {"platform": "gpu-box", "run_id": "20260101T000000Z-00aa", "repeat": i + 1, "host_id": host}
        write_run(logs, backend="jax", elapsed=fast, schema2=_schema2(1.5, host), **common)
        unstable = "unstable" if i == 0 else "stable"
        write_run(logs, backend="torch", elapsed=slow, schema2=_schema2(3.0, host, unstable, True), **common)


def _report(logs: Path, out: Path, *args: str) -> pd.DataFrame:
    assert main([str(logs), "--out", str(out), "--price", "gpu-box=3.60", *args]) == 0
    return pd.read_csv(out / "results.csv").set_index("config")


def test_verdicts_intervals_marks_and_energy(logs: Path, tmp_path: Path) -> None:
    _write_repeats(logs)
    results = _report(logs, tmp_path / "out", "--base", "gpu-box-jax", "--electricity-price", "0.20")
    jax, torch = results.loc["gpu-box-jax"], results.loc["gpu-box-torch"]
    assert (jax["n_runs"], torch["n_runs"]) == (5, 5)  # the .rNN files are five repeats, not one run
    hosts = ["box-a"] * 3 + ["box-b"] * 2  # two machines: the interval resamples machines, then runs
    expected = compare([sum(e) for e in SLOW], [sum(e) for e in FAST], candidate_machines=hosts, base_machines=hosts)
    assert expected.ratio.method == "machine bootstrap"
    assert torch["verdict"] == expected.text("it", "the base") and expected.verdict == "slower"
    assert torch["verdict"].startswith("it is 1.8") and "95% CI" in torch["verdict"] and "p=0.008" in torch["verdict"]
    assert torch["rel_time_low"] < torch["rel_time"] < torch["rel_time_high"]
    # One price on both sides, billed exactly the training time: the cost ratio's interval is the time ratio's.
    assert (torch["rel_cost_low"], torch["rel_cost_high"]) == (torch["rel_time_low"], torch["rel_time_high"])
    assert torch["stability"] == "unstable (1 of 5 repeats)" and torch["host_bound"]
    assert torch["gpu_wh"] == 3.0 and torch["energy_usd"] == pytest.approx(3.0 / 1000 * 0.20)
    assert jax["cost_per_epoch_usd"] == pytest.approx(1.00 * 3.60 / 3600)
    runs = pd.read_csv(tmp_path / "out" / "runs.csv")
    assert set(runs["repeat_group"]) == {"g1"} and sorted(set(runs["machine"])) == ["box-a", "box-b"]
    assert list(runs["stability"]).count("unstable") == 1 and set(runs["steady_cv"]) == {0.01}
    page = (tmp_path / "out" / "index.html").read_text()
    assert "⚠ unstable (1 of 5 repeats); ⚠ host-bound (GPU idle 80% of steady epochs)" in page
    assert "3.00 Wh GPU = $0.0006" in page and "nvml-energy-counter" in page
    assert "it is 1.8" in page and "x faster than the runner-up gpu-box-torch (95% CI" in page  # the summary


def test_fingerprints_and_reproducibility_across_machines(logs: Path, tmp_path: Path) -> None:
    _write_repeats(logs)
    out = tmp_path / "out"
    assert main([str(logs), "--markdown", str(out / "results.md")]) == 0
    text = (out / "results.md").read_text()
    assert "| box-a | gpu-box |" in text and "812 Mop/s" in text and "655 Mop/s" in text
    # jax: box-a's repeats have steady medians 1.01, 1.005, 1.0; box-b's 1.0, 1.0: medians 1.005 vs 1.000.
    row = next(line for line in text.splitlines() if line.startswith("| mnist_mlp | gpu-box-jax | box-a"))
    assert "| -0.5% | yes | unknown: fewer than 3 repeats on a machine |" in row


def test_reference_runs_are_left_out_unless_named(logs: Path, tmp_path: Path) -> None:
    write_run(logs, backend="jax")
    write_run(logs / "reference" / "NVIDIA-H200", platform="NVIDIA-H200", backend="jax", elapsed=(2.0, 0.5, 0.5))
    assert list(_report(logs, tmp_path / "mine").index) == ["local-jax"]
    both = _report(logs, tmp_path / "both", "--reference", "NVIDIA-H200")
    assert sorted(both.index) == ["NVIDIA-H200-jax (reference)", "local-jax"]
    assert both.loc["local-jax", "is_base"]  # the user's runs are the base, not the reference
    assert both.loc["NVIDIA-H200-jax (reference)", "rel_time"] == pytest.approx(3.0 / 9.2)
    assert main([str(logs), "--reference", "A100"]) == 2  # one-line error naming the references there


def test_base_is_the_full_default_run_not_a_sweep(logs: Path, tmp_path: Path) -> None:
    """The committed H200 logs' defect: a 3-epoch sweep became the base and 7 of 9 workloads lost their figures."""
    # Another image makes the sweep its own configuration of platform h and JAX, as settings do in the real logs.
    write_run(logs, platform="h", run_id="gpu-sweep-jax", elapsed=(3.0, 1.0, 1.0), cut_down=True, image="x:sweep")
    for workload in ("mnist_mlp", "mnist_cnn"):
        write_run(logs, platform="h", run_id="gpu-suite-jax-default", workload=workload, elapsed=(3.0,) + (1.1,) * 5)
        write_run(logs, platform="h", run_id="gpu-suite-torch-default", workload=workload, backend="torch")
    results = _report(logs, tmp_path / "out", "--price", "h=1.0").reset_index()
    bases = results[results["is_base"]]
    assert sorted(bases["workload"]) == ["mnist_cnn", "mnist_mlp"]  # every workload keeps a base
    assert set(bases["epochs"]) == {6}  # the full default runs, not the 3-epoch sweep
    torch = results[results["config"] == "h-torch"].iloc[0]
    assert "no base run" not in torch["notes"] and "no price" not in torch["notes"]


def test_energy_of_a_known_power_trace(logs: Path, tmp_path: Path) -> None:
    """A GPU drawing 100 W rising by 20 W a second for 10 s, sampled every 0.5 s, over epochs [0, 4], [4, 7],
    [7, 10] s: 2,000 J in all; the steady epochs draw 630 J and 810 J. The harness integrates the trace; the
    report shows what it recorded: Wh per run, Wh per steady epoch (their median), and its price."""
    times = [i * 0.5 for i in range(21)]
    watts = [100 + 20 * t for t in times]
    epochs = [integrate_power(times, watts, start, end) for start, end in ((0, 4), (4, 7), (7, 10))]
    assert epochs == pytest.approx([560.0, 630.0, 810.0])  # trapezoids are exact on a linear trace
    energy = {
        "gpu_joules": sum(epochs),
        "gpu_wh": watt_hours(sum(epochs)),
        "gpu_joules_per_epoch": epochs,
        "gpu_method": "nvml-power-samples",
        "host_joules": None,
        "host_wh": None,
        "host_method": None,
    }
    write_run(logs, platform="gpu-box", elapsed=(4.0, 3.0, 3.0), schema2={"energy": energy})
    results = _report(logs, tmp_path / "out", "--electricity-price", "0.36")
    row = results.loc["gpu-box-jax"]
    assert row["gpu_wh"] == pytest.approx(2000 / 3600)
    assert row["gpu_wh_per_epoch"] == pytest.approx(720 / 3600)
    assert row["energy_usd"] == pytest.approx(2000 / 3600 / 1000 * 0.36)
    page = (tmp_path / "out" / "index.html").read_text()
    assert "0.56 Wh GPU = $0.0002" in page and "0.2000" in page and "nvml-power-samples" in page


def test_a_repeat_file_without_metadata_is_named_by_its_file(logs: Path, tmp_path: Path) -> None:
    folder = logs / "box" / "20260101T000000Z-0001"
    folder.mkdir(parents=True)
    for index in (1, 2):
        (folder / f"mnist_mlp_jax_synthetic.r{index:02d}.csv").write_text("epoch,elapsed\n0,3.0\n1,1.0\n2,1.0\n")
    row = _report(logs, tmp_path / "out").reset_index().iloc[0]
    assert (row["workload"], row["config"], row["n_runs"]) == ("mnist_mlp", "box-jax (synthetic)", 2)


def test_runs_with_the_collector_changed_or_on_fewer_cores_are_not_repeats_of_the_default(logs: Path) -> None:
    def run(run_id: str, host_gc: str = "on", usable: int = 16) -> None:
        path = write_run(logs, run_id=run_id)
        meta = json.loads(path.with_suffix(".json").read_text())
        meta["settings"]["host_gc"] = host_gc
        meta["hardware"].update(cpu_cores_logical=16, cpu_cores_usable=usable)
        path.with_suffix(".json").write_text(json.dumps(meta))

    run("20260101T000000Z-gc00")
    run("20260101T000000Z-gc01", host_gc="off")
    run("20260101T000000Z-gc02", usable=4)
    settings = {r.run_id: r.compile_settings or "" for r in load_runs(logs).runs}
    assert "gc" not in settings["20260101T000000Z-gc00"] and "cores" not in settings["20260101T000000Z-gc00"]
    assert settings["20260101T000000Z-gc01"].endswith("gc off")
    assert settings["20260101T000000Z-gc02"].endswith("4 of 16 cores")
