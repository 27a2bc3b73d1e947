"""The scaling table: multi-device runs against the one-device runs, from synthetic log folders, and the 2018
provider study's multi_gpu_model rows beside it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from records.catalog import Price, Profile
from records.loading import load_runs
from report import cli
from report.markdown import markdown_table
from report.scaling import (
    measured_bars,
    measured_speedups,
    price_table,
    published_pairs,
    published_scaling,
    scaling_table,
)
from report.studies import get_study
from tests.report.report_helpers import write_run

REPEATS = 4  # the fewest per side with which the rank-sum test can reach p < 0.05


def _write(root: Path, n: int, steady: float, *, devices: int = 1, policy: str = "same-global", **fields: Any) -> None:
    """`n` repeats of one configuration; each run's steady epochs are `steady` seconds (+- 1%)."""
    for i in range(n):
        run_id = f"20260101T0000{devices}{i}Z-{policy[:2]}{devices}{i}"
        jitter = 1 + (i - (n - 1) / 2) / 100  # symmetric: the median is `steady` itself
        path = write_run(root, run_id=run_id, elapsed=(9.0, steady * jitter, steady * jitter), **fields)
        meta_path = path.with_suffix(".json")
        meta = json.loads(meta_path.read_text())
        batch = 128 * devices if policy == "per-device" else 128
        meta["distribution"] = {"devices": devices, "batch_policy": policy, "global_batch_size": batch}
        meta_path.write_text(json.dumps(meta))


def _table(root: Path) -> pd.DataFrame:
    return scaling_table(load_runs(root).runs).set_index(["devices", "batch policy"])


def test_speedup_efficiency_and_accuracy_against_one_device(tmp_path: Path) -> None:
    _write(tmp_path, REPEATS, 2.0, val_acc=0.97)
    _write(tmp_path, REPEATS, 1.25, devices=2, policy="per-device", val_acc=0.95)
    _write(tmp_path, REPEATS, 2.5, devices=2, policy="same-global", val_acc=0.97)
    table = _table(tmp_path)
    assert list(table.index) == [(1, "one device"), (2, "per-device"), (2, "same-global")]
    base, per_device, same_global = (table.loc[key] for key in table.index)
    assert base["speed-up vs 1 device"] == "1.00x (base)" and base["global batch"] == 128
    assert per_device["speed-up vs 1 device"] == "1.60x" and per_device["efficiency"] == "80%"
    assert per_device["global batch"] == 256 and per_device["steady epoch s"] == "1.250"
    assert per_device["verdict"].startswith("the 2-device run is 1.60x faster than the 1-device run (95% CI")
    assert per_device["speed-up interval"].endswith("(95% bootstrap, n=4)")
    assert (per_device["final"], per_device["final, 1 device"]) == ("0.9500 (val_acc)", "0.9700 (val_acc)")
    assert same_global["speed-up vs 1 device"] == "0.80x" and same_global["efficiency"] == "40%"
    assert same_global["verdict"].startswith("the 2-device run is 1.25x slower than the 1-device run")
    assert per_device["samples/s"] == f"{60000 / 1.25:,.0f}"
    bars = {b.label: b for b in measured_bars(load_runs(tmp_path).runs)}
    per_device_bar = bars["mnist_mlp [jax] on local: 2 devices, per-device"]
    assert per_device_bar.value == pytest.approx(1.25 / 2.0) and per_device_bar.low < 0.625 < per_device_bar.high
    assert bars["mnist_mlp [jax] on local: 2 devices, same-global"].value == pytest.approx(2.5 / 2.0)


def test_few_repeats_say_so_instead_of_a_verdict(tmp_path: Path) -> None:
    _write(tmp_path, 1, 2.0)
    _write(tmp_path, 1, 1.0, devices=2, policy="per-device")
    row = _table(tmp_path).loc[(2, "per-device")]
    assert row["speed-up vs 1 device"] == "2.00x" and row["speed-up interval"] == "n=1, no interval"
    assert "too few repeats" in row["verdict"]


def test_a_multi_device_run_without_a_one_device_base_says_so(tmp_path: Path) -> None:
    _write(tmp_path, 2, 2.0, platform="other-box")
    _write(tmp_path, 2, 1.0, devices=2, policy="per-device")
    table = scaling_table(load_runs(tmp_path).runs)
    assert list(zip(table["platform"], table["devices"], strict=True)) == [("local", 2)]
    assert table.iloc[0]["speed-up vs 1 device"] == "no 1-device run" and table.iloc[0]["final, 1 device"] == "n/a"


def test_one_and_several_devices_are_separate_configurations(tmp_path: Path) -> None:
    _write(tmp_path, 1, 2.0)
    _write(tmp_path, 1, 1.0, devices=2, policy="per-device")
    settings = sorted(r.compile_settings or "" for r in load_runs(tmp_path).runs)
    assert settings == ["jit on", "jit on, 2 devices per-device"]


def test_the_studys_machines_on_all_their_gpus_and_on_one() -> None:
    study = get_study("gpu-providers-2018")
    table = published_scaling(published_pairs(study), study).set_index("machine")
    assert list(table.index) == ["LeaderGPU 2x GTX 1080", "LeaderGPU 2x Tesla P100"]  # IBM ran no one-GPU row
    assert table.loc["LeaderGPU 2x Tesla P100", "speed-up vs 1 GPU"] == f"{1.86 / 2.42:.2f}x"
    assert table.loc["LeaderGPU 2x GTX 1080", "speed-up vs 1 GPU"] == f"{2.49 / 2.12:.2f}x"
    assert table.loc["LeaderGPU 2x Tesla P100", "final accuracy, 1 GPU"] == "82.32%"


@pytest.mark.parametrize("multi", [True, False])
def test_the_markdown_report_has_the_section_only_with_several_devices(tmp_path: Path, multi: bool) -> None:
    logs = tmp_path / "logs"
    _write(logs, 2, 2.0)
    if multi:
        _write(logs, 2, 1.0, devices=2, policy="per-device")
    out = tmp_path / "results.md"
    assert cli.main([str(logs), "--markdown", str(out), "--ledger", str(tmp_path / "none.jsonl")]) == 0
    text = out.read_text()
    assert ("## Several devices: data-parallel scaling" in text) == multi
    assert ("LeaderGPU 2x Tesla P100" in text) == multi
    chart = "results_charts/scaling_devices.png"
    assert (f"]({chart})" in text) == multi and (tmp_path / chart).is_file() == multi


def _profile(name: str, gpus: int, usd: float, provider: str = "gce", accelerator: str = "a100") -> Profile:
    price = Price(usd, "2026-01-01", "test")
    return Profile(name, provider, name, accelerator=accelerator, accelerator_count=gpus, on_demand=price)


def test_the_extra_gpu_is_worth_its_price_only_beyond_the_price_ratio(tmp_path: Path) -> None:
    _write(tmp_path, REPEATS, 2.0)
    _write(tmp_path, REPEATS, 1.25, devices=2, policy="per-device")  # 1.60x
    _write(tmp_path, REPEATS, 2.5, devices=2, policy="same-global")
    profiles = {
        p.name: p
        for p in (
            _profile("one", 1, 3.0),
            _profile("one-dearer", 1, 4.0),
            _profile("two", 2, 4.5),  # 1.5x the cheapest single: 1.60x pays for it
            _profile("two-dear", 2, 6.0),  # 2.0x: it does not
            _profile("two-close", 2, 4.8, provider="aws"),  # 1.60x: inside the measured interval
            _profile("one-aws", 1, 3.0, provider="aws"),
            _profile("four", 4, 12.0),
            _profile("other-kind", 2, 1.0, accelerator="t4"),  # no single T4 profile: no pair
        )
    }
    measured = measured_speedups(load_runs(tmp_path).runs)
    assert set(measured) == {2} and len(measured[2]) == 2
    best = max(measured[2], key=lambda s: s.value)
    assert best.value == pytest.approx(1.6) and "per-device" in best.where and best.low < 1.6 < best.high
    table = price_table(profiles, measured).set_index("profile")
    assert list(table.index) == ["four", "two", "two-close", "two-dear"]
    assert table.loc["two", "one GPU"] == "one" and table.loc["two", "break-even speed-up"] == "1.50x"
    assert table.loc["two", "worth it"].startswith("yes for mnist_mlp [jax], per-device")
    assert "6% less per sample" in table.loc["two", "worth it"]
    assert table.loc["two-dear", "worth it"].startswith("no: every interval lies below the break-even")
    assert "the best workload costs 25% more per sample" in table.loc["two-dear", "worth it"]
    assert table.loc["four", "worth it"] == "unknown: no run on this many devices"
    assert table.loc["two-close", "worth it"] == "not beyond noise: 1 workload interval(s) span the break-even"


def test_a_speed_up_without_an_interval_decides_nothing_about_the_price(tmp_path: Path) -> None:
    _write(tmp_path, 1, 2.0)
    _write(tmp_path, 1, 0.5, devices=2, policy="per-device")  # 4x, but one run a side
    measured = measured_speedups(load_runs(tmp_path).runs)
    assert measured[2][0].value == pytest.approx(4.0) and measured[2][0].low is None
    table = price_table({p.name: p for p in (_profile("one", 1, 3.0), _profile("two", 2, 6.0))}, measured)
    assert table.set_index("profile").loc["two", "worth it"] == "unknown: too few repeats for an interval"


def test_the_committed_scaling_table_is_what_the_report_makes_of_the_committed_logs() -> None:
    """docs/results.md carries the 2x H200 scaling table; regenerating it from logs/reference must give it back."""
    repo = Path(__file__).resolve().parents[2]
    runs = load_runs(repo / "logs" / "reference" / "NVIDIA-H200-x2").complete_runs
    table = scaling_table(runs)
    assert set(table["devices"]) == {1, 2} and len(table) == 3 * len(set(table["workload"])) == 27
    assert markdown_table(table) in (repo / "docs" / "results.md").read_text()
