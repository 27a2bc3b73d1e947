"""The physics basis (estimator.physics, estimator.throughput): its backtest on the committed runs, an estimate with
a range and a named basis for every GPU profile of the catalog, and a workload file the estimator has never seen
estimated on several GPUs, held against committed runs of the same file where there are any."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.step_costs import recorded
from benchmarks.suites import get_suite
from benchmarks.workload_set import workloads_of
from estimator import physics
from estimator.backtest import committed_bands, committed_physics, physics_lines, physics_summaries
from estimator.basis import COMMITTED_REFERENCE, folder_observations, reference_basis
from estimator.model import Target
from estimator.suite import estimate_suite, physics_rates, profile_machine
from estimator.throughput import Work, fit
from records.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "workloads"
FILES = (EXAMPLES / "small_transformer.py", EXAMPLES / "small_cnn.py")
STEMS = tuple(file.stem for file in FILES)
MAX_MEDIAN_ABS_PCT = 35.0
MIN_COVERAGE = 0.80
BASES = {"measured", "published", "physics", "datasheet", "hardware", "scaled"}
# docs/slurm.md's example profile: an A100 partition of a Slurm cluster, priced per GPU-hour.
SLURM_A100 = re.search(r"```toml\n(.*?)```", (ROOT / "docs" / "slurm.md").read_text(), flags=re.S)


def test_the_physics_backtest_meets_its_goal_on_every_gpu_with_runs() -> None:
    """Each workload predicted from its step costs and the other workloads' runs: median error at most 35 %, at
    least 80 % of the runs inside the range made without their workload, on each measured GPU."""
    outcomes = committed_physics()
    rows = {s.label: s for s in physics_summaries(outcomes)}
    gpus = {o.observation.machine for o in outcomes}
    assert gpus >= {"h100", "h200"}
    for gpu in gpus:
        row = rows[f"physics {gpu}"]
        assert row.median_abs_pct <= MAX_MEDIAN_ABS_PCT, row
        assert row.coverage is not None and row.coverage >= MIN_COVERAGE, row
        assert f"datasheet {gpu}" in rows  # the same runs predicted from the other GPUs' rates
    # Left out means left out: no workload's own runs fitted the rates it was predicted at.
    for o in outcomes:
        assert o.prediction is not None and o.observation.workload in physics.builtin_costs()
    assert committed_bands()["physics"] == rows["physics"].band


def test_the_shipped_rates_and_ranges_are_what_the_reference_runs_give() -> None:
    """data/gpu_rates.json, written with the reference basis, holds the rates fitted on the committed runs and the
    physics basis's ranges from its backtest: a dry run reads them instead of fitting them."""
    derived = physics.rates_text(folder_observations(COMMITTED_REFERENCE))
    assert physics.RATES_TABLE.read_text() == derived, "stale: run `python -m estimator.basis write`"
    shipped = physics.read_rates()
    rows = {s.label: s for s in physics_summaries(committed_physics())}
    assert shipped.bands == {basis: rows[basis].band for basis in ("physics", "datasheet")}
    assert physics_rates(reference_basis()) == shipped.fitted  # no run of the user's: the shipped rates


def test_the_command_prints_the_physics_rows() -> None:
    done = subprocess.run([sys.executable, "-m", "report", "backtest"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.endswith("\n".join(physics_lines(committed_physics())) + "\n")


MEDIAN_QUOTE = re.compile(r"(\d+(?:\.\d+)?) % median error on the (h\d+)")
COVERAGE_QUOTE = re.compile(r"(\d+) % of its runs inside the range on the (h\d+)")


def test_the_figures_the_docs_quote_are_the_commands() -> None:
    """docs/report.md's physics block is what `python -m report backtest` prints, and every figure quoted in the
    README or the docs ("25.8 % median error on the h100", "80 % of its runs inside the range on the h100") is its."""
    outcomes = committed_physics()
    rows = {s.label: s for s in physics_summaries(outcomes)}
    printed = "\n".join(physics_lines(outcomes)) + "\n"
    blocks = re.findall(r"^```\n(physics: .*?)^```", (ROOT / "docs" / "report.md").read_text(), flags=re.M | re.S)
    assert blocks == [printed], "docs/report.md's physics block is not what `python -m report backtest` prints"
    quoted = 0
    for page in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))):
        text = re.sub(r"\s+", " ", page.read_text())
        for found in MEDIAN_QUOTE.finditer(text):
            assert float(found.group(1)) == round(rows[f"physics {found.group(2)}"].median_abs_pct, 1), found.group(0)
            quoted += 1
        for found in COVERAGE_QUOTE.finditer(text):
            coverage = rows[f"physics {found.group(2)}"].coverage
            assert coverage is not None and int(found.group(1)) == round(coverage * 100), found.group(0)
            quoted += 1
    assert quoted >= 4


def test_fitted_shares_are_recovered_and_never_above_the_datasheet_peak() -> None:
    """Step times made from known rates give those rates back; no share of a peak fitted on the committed runs
    exceeds the whole peak."""
    peak = 494.7e12
    known = dict(step_s=0.8e-3, operation_s=0.5e-6, conv=0.30, matmul=0.12)
    works = [
        Work(f"w{i}", 0.0, ops, conv, matmul, peak,
             known["step_s"] + known["operation_s"] * ops + (conv / known["conv"] + matmul / known["matmul"]) / peak)
        for i, (ops, conv, matmul) in enumerate(
            [(300, 0, 4e8), (400, 9e9, 1e9), (12_000, 0, 2e9), (3_000, 0, 7e9), (6_500, 6e12, 3e9), (3_400, 0, 1e12)]
        )
    ]  # fmt: skip
    rates = fit("gpu", "jax", works, 10.0)
    assert rates is not None and not rates.shared and rates.informed
    assert rates.step_s == pytest.approx(known["step_s"], rel=0.05)
    assert rates.operation_s == pytest.approx(known["operation_s"], rel=0.05)
    assert rates.conv_share == pytest.approx(known["conv"], rel=0.15)
    assert rates.matmul_share == pytest.approx(known["matmul"], rel=0.15)
    for fitted in physics_rates(reference_basis()).values():
        assert 0 < fitted.rates.conv_share <= 1 and 0 < fitted.rates.matmul_share <= 1


def test_a_step_runs_at_the_peak_of_its_precision() -> None:
    """bfloat16 at an H100's BF16 peak, float32 at its TF32 one; a T4 has neither: its float32 units."""
    assert physics.peak("h100", "bf16") == (989.4e12, "BF16") and physics.peak("h100", "tf32") == (494.7e12, "TF32")
    assert physics.peak("t4", "bf16") == (8.1e12, "FP32") and physics.peak("t4", "fp16") == (65e12, "FP16")
    assert physics.peak("nvidia", "tf32") is None
    assert (
        physics.target_precision("resnet50", "jax") == "bf16" and physics.target_precision("mnist_cnn", "jax") == "tf32"
    )


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log root with the two example files' step costs, as a dry run measures them before it estimates."""
    root = tmp_path_factory.mktemp("logs")
    files = [word for file in FILES for word in ("--workload-file", str(file))]
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "step-costs", *files, "--out", str(root)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert {c.workload for c in recorded(root)} == {"small_transformer", "small_cnn"}
    return root


WORKLOADS = workloads_of(FILES)


def test_every_gpu_profile_gets_an_estimate_with_a_range_and_its_basis(logs: Path, tmp_path: Path) -> None:
    """The quick suite's workloads and the two example files, on every backend, on each GPU profile of the catalog
    (T4, L4, A10G, A100, H100, H200, B200, the retired K80, P100 and V100) and on the Slurm A100 partition of
    docs/slurm.md: each run a figure, a range around it, and the basis it rests on."""
    assert SLURM_A100 is not None
    slurm = tmp_path / "slurm.toml"
    slurm.write_text(SLURM_A100.group(1))
    profiles = {**{n: p for n, p in load_catalog().items() if p.has_gpu and p.accelerator != "nvidia"},
                **load_catalog(slurm)}  # fmt: skip
    assert {"t4", "l4", "a10g", "a100", "h100", "h200"} <= {profile_machine(p) for p in profiles.values()}
    items = [(w, b) for b in ("tensorflow", "jax", "torch") for w in (*get_suite("quick").workloads, *STEMS)]
    for name, profile in profiles.items():
        found = estimate_suite(profile, "quick", items, logs, workloads=WORKLOADS)
        for item in found.items:
            assert item.seconds is not None, (name, item)
            assert item.low is not None and item.high is not None and item.low < item.seconds < item.high
            assert item.basis in BASES and item.where, (name, item)


def test_a_gpu_profile_without_a_known_gpu_says_why_it_is_not_estimated(logs: Path) -> None:
    (item,) = estimate_suite(
        load_catalog()["ssh-gpu"], "quick", [("small_cnn", "jax")], logs, workloads=WORKLOADS
    ).items
    assert item.seconds is None and "nvidia has no datasheet peak in report/data/gpu_peaks.toml" in item.basis


@pytest.mark.parametrize("stem", STEMS)
def test_a_workload_file_never_seen_is_estimated_on_several_gpus(logs: Path, stem: str) -> None:
    """No run of the file on the GPU: on a measured GPU the physics basis, elsewhere the datasheet's, each with its
    backtested range; where the file ran (the committed H200 runs of it), those runs; a GPU of more tensor-core
    throughput never slower for a compute-bound model."""
    catalog = load_catalog()
    ran = {o.machine for o in reference_basis() if o.workload == stem}  # the committed runs of the same file
    seconds = {}
    for name in ("gce-t4", "gce-l4", "aws-g5.xlarge", "gce-a100", "gce-h100", "runpod-h200"):
        (item,) = estimate_suite(catalog[name], "full", [(stem, "jax")], logs, workloads=WORKLOADS).items
        assert item.seconds is not None and item.low is not None and item.high is not None
        band = committed_bands()[item.basis]
        outside = item.seconds - (item.high - item.seconds) / (band.high - 1)  # the part the range does not scale
        assert item.low == pytest.approx(outside + (item.seconds - outside) * band.low)
        gpu = profile_machine(catalog[name])
        expected = "measured" if gpu in ran else "physics" if gpu in ("h100", "h200") else "datasheet"
        assert item.basis == expected, (name, item)
        assert expected == "measured" or "operations a step (measured on the CPU)" in item.where
        seconds[name] = item.seconds
    assert seconds["gce-t4"] > seconds["gce-l4"] > seconds["gce-a100"]  # 8.1, 60 and 156 TFLOP/s at float32


@pytest.mark.parametrize("stem", STEMS)
def test_the_h200_estimate_of_a_workload_file_holds_against_its_committed_runs(logs: Path, stem: str) -> None:
    """The physics estimate of the file on an H200, from its step costs and the rates fitted on the built-in
    workloads' runs, against the committed H200 runs of the same file content: inside the backtested range."""
    (costs,) = [c for c in recorded(logs) if c.workload == stem]
    runs = [
        o
        for o in reference_basis()
        if o.workload == stem and o.code == costs.sha256 and o.machine == "h200" and o.defaults and not o.cached_first
    ]
    if not runs:
        pytest.skip(f"no committed H200 run of {stem}.py (sha256 {costs.sha256[:12]}) in logs/reference yet")
    rates = physics_rates(reference_basis())
    band = committed_bands()["physics"]
    inside = []
    for o in runs:
        found = physics.predict(Target(o.workload, o.backend, "h200", o.batch, o.samples, o.epochs), costs, rates)
        assert found is not None and found.basis == "physics"
        inside.append(band.low <= o.total_s / found.seconds <= band.high)
    assert sum(inside) / len(inside) >= MIN_COVERAGE, (len(inside), sum(inside))
    assert not math.isnan(band.low)
