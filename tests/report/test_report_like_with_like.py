"""Reports that compare like with like: runs of other sample counts compared per sample, a summary over every priced
run (the reference runs included), one note for repeated verdicts, a price hint where there is no price, and
intervals that predict the next machine (checked by leaving each committed machine out)."""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd
import pytest
from report_helpers import REPO, write_run

from benchmarks.stats import next_machine_interval
from records.loading import load_runs
from report.cli import main
from report.format import FOLD_NOTE
from report.html import PRICE_HINT
from report.reproducibility import TARGET_COVERAGE, machine_check, machine_spread_table
from report.tables import PER_SAMPLE, group_runs

H200 = "NVIDIA-H200-torch (reference)"


def _laptop_and_h200(logs: Path) -> None:
    """A laptop's 500-sample slice (1.0 s steady epochs) and an H200 run of 20,000 samples (2.0 s steady epochs):
    the H200 takes twice as long an epoch for 40 times the samples (20 times the throughput)."""
    write_run(logs, workload="cifar10_cnn", backend="tensorflow", train_samples=500, elapsed=(3.0, 1.0, 1.0))
    write_run(
        logs / "reference" / "NVIDIA-H200",
        platform="NVIDIA-H200",
        workload="cifar10_cnn",
        backend="torch",
        train_samples=20_000,
        elapsed=(5.0, 2.0, 2.0, 2.0, 2.0),
    )


def test_runs_of_other_sample_counts_are_compared_per_sample(logs: Path, tmp_path: Path) -> None:
    _laptop_and_h200(logs)
    out = tmp_path / "out"
    assert main([str(logs), "--reference", "NVIDIA-H200", "--out", str(out)]) == 0
    h200 = pd.read_csv(out / "results.csv").set_index("config").loc[H200]
    assert h200["rel_steady"] == pytest.approx((2.0 / 20_000) / (1.0 / 500))  # 0.05: 20x the throughput
    assert h200["steady_basis"] == PER_SAMPLE and h200["samples_per_s"] == pytest.approx(10_000)
    assert pd.isna(h200["rel_time"]) and "20,000 samples" in h200["notes"]
    assert "0.05x [no interval] per sample" in (out / "index.html").read_text()
    assert f"{H200} (per sample)" in (out / "charts" / "cifar10_cnn_time.svg").read_text()


def test_the_summary_ranks_every_priced_run_and_names_its_price(logs: Path, tmp_path: Path) -> None:
    _laptop_and_h200(logs)
    out = tmp_path / "out"
    assert main([str(logs), "--reference", "NVIDIA-H200", "--price", "local=0.10", "--out", str(out)]) == 0
    summary = pd.read_csv(out / "summary.csv").set_index("workload").loc["cifar10_cnn"]
    # 10,000 samples/s on the H200 against 500 on the laptop; per million samples $0.056 at $0.10/h on the laptop.
    assert summary["fastest"] == H200 and summary["speed"].startswith("10,000 samples/s")
    assert summary["cheapest"] == "local-tensorflow" and summary["price"] == "$0.1/h"
    assert summary["cost"] == "$0.0556 per 1M training samples"
    assert summary["compared on"].startswith("throughput")
    # Whole runs do not compare, so neither do their costs: a sample's cost does (the steady ratio x the prices).
    h200 = pd.read_csv(out / "results.csv").set_index("config").loc[H200]
    assert h200["rel_cost"] == pytest.approx(0.05 * h200["usd_per_hour"] / 0.10)
    assert f"{h200['rel_cost']:.2f}x [no interval] per sample" in (out / "index.html").read_text()
    assert f"{H200} (per sample)" in (out / "charts" / "cifar10_cnn_cost.svg").read_text()
    glance = (out / "index.html").read_text().split('id="glance"')[1].split("</ul>")[0]
    assert f"fastest {H200} (10,000 samples/s; 1 run, no interval)" in glance
    assert "cheapest local-tensorflow at $0.1/h ($0.0556 per 1M training samples; 1 run, no interval)" in glance


def _sweep_variant(steps_per_execution: int) -> dict[str, object]:
    settings = {"jit_compile": True, "jit_compile_requested": "auto", "steps_per_execution": steps_per_execution}
    return {"settings": settings | {"dtype_policy": "float32", "lstm_kernel": None, "use_cudnn": None}}


def test_the_summary_crowns_the_default_with_repeats_and_says_what_a_lead_rests_on(logs: Path, tmp_path: Path) -> None:
    """A one-off sweep variant that ran faster once is named beside the leader, not crowned; a machine that is the
    only one priced is said to be so; with no run on a rented machine the page says how to compare clouds first."""
    for i in range(3):
        write_run(logs, run_id=f"20260101T00000{i}Z-000{i}", backend="tensorflow", elapsed=(5.0, 2.0, 2.0))
    write_run(logs, run_id="20260102T000000Z-0009", backend="tensorflow", elapsed=(5.0, 1.0, 1.0),
              schema2=_sweep_variant(8))  # fmt: skip
    out = tmp_path / "out"
    assert main([str(logs), "--price", "local=0.10", "--out", str(out)]) == 0
    assert main([str(logs), "--price", "local=0.10", "--markdown", str(tmp_path / "r.md")]) == 0
    summary = pd.read_csv(out / "summary.csv").set_index("workload").loc["mnist_mlp"]
    default, variant = "local-tensorflow [jit on]", "local-tensorflow [jit on, 8 steps/execution]"
    assert summary["fastest"] == summary["cheapest"] == default
    assert summary["fastest: rests on"] == (
        f"3 runs; ranked among configurations of the default settings with repeats; {variant} ran faster in 1 run"
    )
    assert summary["cheapest: rests on"].endswith("one machine priced (local): the cheapest is its fastest")
    page = html.unescape((out / "index.html").read_text())
    glance = page.split('id="glance"')[1].split("</ul>")[0]
    # One machine priced: nothing to be cheaper than, so only "fastest" is crowned, and the line says why.
    assert f"fastest {default} (" in glance and f"{variant} ran faster in 1 run" in glance
    assert "cheapest" not in glance and glance.count("the only machine priced") == 1
    for text in (page, (tmp_path / "r.md").read_text()):
        assert "No run here was on a rented cloud machine" in text
        assert "python -m orchestrate run --profiles gce-t4,aws-g4dn.xlarge --dry-run" in text


def test_a_report_with_a_rented_run_does_not_say_how_to_compare_clouds(logs: Path, tmp_path: Path) -> None:
    write_run(logs, platform="gce-t4", backend="tensorflow")
    out = tmp_path / "out"
    assert main([str(logs), "--out", str(out)]) == 0
    assert "No run here was on a rented cloud machine" not in (out / "index.html").read_text()


def test_a_report_without_prices_says_how_to_add_one(logs: Path, tmp_path: Path) -> None:
    write_run(logs, backend="tensorflow")
    write_run(logs, backend="jax")
    out = tmp_path / "out"
    assert main([str(logs), "--out", str(out)]) == 0
    assert main([str(logs), "--markdown", str(tmp_path / "results.md")]) == 0
    page = html.unescape((out / "index.html").read_text())
    assert "Cost rule" not in page and PRICE_HINT in page
    assert 'make report PRICES="PLATFORM=USD_PER_HOUR"' in page
    assert "Cost rule" not in (tmp_path / "results.md").read_text()
    assert PRICE_HINT in (tmp_path / "results.md").read_text()


def test_too_few_repeats_is_said_once(logs: Path, tmp_path: Path) -> None:
    for backend in ("tensorflow", "jax", "torch"):
        write_run(logs, backend=backend)
    out = tmp_path / "out"
    assert main([str(logs), "--out", str(out)]) == 0
    page = html.unescape((out / "index.html").read_text())
    assert "too few repeats to tell (1 on the smaller side)" not in page
    assert page.count("too few repeats †") == 2 + 1  # two rows against the base; the fastest (no price: no cheapest)
    assert page.count(FOLD_NOTE) == 2  # under the workload's table and under the summary


def test_host_bound_epochs_against_the_host_score(logs: Path) -> None:
    """Two machines, a host-bound configuration whose steady epoch halves as the host score doubles."""
    for i, (host, score) in enumerate([("box-a", 10.0), ("box-a", 20.0), ("box-b", 10.0), ("box-b", 20.0)]):
        steady = 2.0 * 10.0 / score
        write_run(
            logs,
            run_id=f"20260101T00000{i}Z-000{i}",
            host_id=host,
            elapsed=(5.0, steady, steady),
            schema2={
                "stability": {"label": "stable", "host_bound": True, "host_share": 0.8},
                "fingerprint": {
                    "device": "cpu",
                    "backend": "jax",
                    "host_single_thread_score": score,
                    "host_single_thread_unit": "million loop iterations/s",
                    "seconds": 1.0,
                },
            },
        )
    check = machine_check(group_runs(load_runs(logs).runs))
    row = machine_spread_table(check).iloc[0]
    assert row["kind"] == "host-bound" and row["machines"] == 2
    assert row["host single-thread score"] == (
        "10.0–20.0; Spearman ρ = -1.00 (n=4); fitted 2.000 s at 10.0, 1.000 s at 20.0"
    )
    assert row["within one machine (runs' range)"] == "66.7%" and row["between machines (medians' range)"] == "0.0%"


@pytest.fixture(scope="module")
def committed_check():
    # Every committed machine, as docs/results.md is made from logs/reference.
    machines = sorted(p.name for p in (REPO / "logs" / "reference").iterdir() if p.is_dir())
    runs = [r for name in machines for r in load_runs(REPO / "logs", name).runs]
    return machine_check(group_runs(runs))


def test_the_next_machine_interval_holds_the_committed_machines(committed_check) -> None:
    """Each committed GPU machine held out in turn: its median lies in the interval the other machines give for
    the next machine at least 90 % of the time; and docs/results.md prints what the report computes."""
    assert committed_check.held_out >= 80
    assert committed_check.share >= TARGET_COVERAGE
    assert committed_check.text() in (REPO / "docs" / "results.md").read_text()
    # The other machines' runs alone, without the spread between machines, predict far worse.
    naive = [
        next_machine_interval({m: v for m, v in kind.by_machine[h.configuration].items() if m != h.machine}, 0.0)
        for kind in committed_check.kinds
        for h in kind.held_out
    ]
    medians = [h.median for kind in committed_check.kinds for h in kind.held_out]
    inside = sum(n.low <= m <= n.high for n, m in zip(naive, medians, strict=True))
    assert inside / len(medians) < 0.7


def test_a_bullet_never_crowns_a_tie_or_a_lead_too_few_repeats_can_tell() -> None:
    """The H100's 2 runs of the GPT on JAX led the H200's 5 by 2 %: too few repeats to tell, and the bullet says so."""
    from report.summary import bullet, leaders

    row = {
        "workload": "gpt_nietzsche", "fastest": "NVIDIA-H100-jax", "speed": "1,240 samples/s (steady epoch 2.58 s)",
        "fastest: rests on": "", "fastest: verdict": "too few repeats †", "price": "$4.59/h",
        "cheapest": "NVIDIA-H200-jax", "cost": "$1.05 per 1M training samples", "cheapest: rests on": "",
        "cheapest: verdict": "it vs the runner-up X: no difference beyond noise (p=0.3): a tie, not a lead",
    }  # fmt: skip
    [(fastest, cheapest)] = leaders(pd.DataFrame([row]))
    text = bullet(fastest, cheapest)
    assert "1,240 samples/s; too few repeats to tell it from the runner-up" in text
    assert "($1.05 per 1M training samples; a tie with the runner-up, not a lead)" in text
