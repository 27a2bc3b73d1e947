"""The CLI's read-only commands and the dry-run plan: what a user sees before anything is launched."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from records.ledger import InstanceRecord, Ledger, RunRecord
from tests.orchestrate.orchestrate_helpers import orchestrate


def test_dry_run_prints_machines_image_matrix_and_cost(tmp_path: Path) -> None:
    done = orchestrate(
        "run", "--profile", "gce-t4", "--suite", "quick", "--backends", "jax,torch",
        "--workloads", "mnist_mlp,imdb_fasttext", "--dry-run", "--ledger", str(tmp_path / "ledger.jsonl"),
        "--max-lifetime", "120", "--run-id", "20260101T000000Z-dry0",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("Plan (dry run: nothing is launched) for run 20260101T000000Z-dry0\n")
    assert "gce-t4: 1x NVIDIA T4 on n1-standard-4" in out
    assert "gce n1-standard-4, zones us-central1-a, us-central1-b, us-central1-f" in out
    assert "keras-cloud-bench:gpu (--gpus all, source: auto)" in out
    assert "quick: 2 workloads x 2 backends = 4 runs" in out
    assert "$0.5400/h on-demand (as of 2025-06-01" in out
    assert "at most $1.08 (the max lifetime at this price); billed per 1 s, minimum 60 s" in out
    assert "credentials" in out  # ok, or why not (no Google credentials in CI): reported, never fatal in a dry run
    assert not (tmp_path / "ledger.jsonl").exists() and not Path("logs/gce-t4/20260101T000000Z-dry0").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["--profile", "gce-a2-highgpu-2g", "--gpus", "2", "--backends", "jax,tensorflow"],
        ["--profile", "gce-a2-highgpu-2g", "--gpus", "1"],  # torch too: one device of the two
        # an SSH profile's GPU count is the catalog's guess at the user's box, so a larger count is the box's to judge
        ["--profile", "ssh-gpu", "--host", "me@box", "--gpus", "4", "--backends", "jax"],
    ],
)
def test_several_gpus_that_the_machine_and_backends_can_honour_are_planned(tmp_path: Path, args: list[str]) -> None:
    done = orchestrate("run", *args, "--dry-run", "--ledger", str(tmp_path / "ledger.jsonl"))
    assert done.returncode == 0, done.stderr
    assert f"--gpus {args[args.index('--gpus') + 1]}" in done.stdout


@pytest.mark.parametrize(
    ("profile", "bucket"),
    [
        ("gce-t4", "gs://keras-cloud-bench-account-id/"),
        ("aws-g4dn.xlarge", "s3://keras-cloud-bench-account-id/"),
    ],
)
def test_a_detached_dry_run_names_the_projects_bucket_without_asking_the_cloud(
    tmp_path: Path, profile: str, bucket: str
) -> None:
    done = orchestrate(
        "run", "--profile", profile, "--detach", "--dry-run", "--ledger", str(tmp_path / "ledger.jsonl"),
        "--run-id", "20260101T000000Z-dry2",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"logs to {bucket}runs/20260101T000000Z-dry2/ (created if missing)" in done.stdout
    assert not (tmp_path / "ledger.jsonl").exists()


def test_dry_run_estimates_from_earlier_runs_and_flags_old_prices(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    for n, seconds in enumerate((1800, 2400, 3000)):
        record = RunRecord(f"r{n}", "gce-n1-highcpu-16", "gce", "p", "quick", "me@box", 1, 0.0, status="complete")
        record.billed_seconds = seconds
        ledger.append(record)
    done = orchestrate("run", "--profile", "gce-n1-highcpu-16", "--dry-run", "--ledger", str(ledger.path))
    assert done.returncode == 0, done.stderr
    assert re.search(
        r"\$0\.1200/h spot/preemptible \(as of 2017-11-28 -- \d+ years old, check current prices\)", done.stdout
    )
    assert "about $0.08: median of 3 earlier complete quick runs" in done.stdout  # 2400 s at $0.12/h


def test_profiles_lists_prices_and_retirement() -> None:
    done = orchestrate("profiles")
    assert done.returncode == 0
    line = next(x for x in done.stdout.splitlines() if x.startswith("gce-k80 "))
    assert "$0.4975/h (2017-11-28)" in line and "RETIRED 2024-05-01, use gce-t4" in line
    assert orchestrate("profiles", "--names").stdout.split()[:3] == ["local", "ssh", "ssh-gpu"]


def test_cost_sums_per_run_and_per_profile(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    for run_id, cost in (("r1", 0.25), ("r2", 0.5)):
        record = RunRecord(run_id, "aws-g4dn.xlarge", "aws", "p", "quick", "me@box", 1, 0.0, status="complete")
        record.instances.append(InstanceRecord("aws", f"i-{run_id}", "us-east-1a", False, 0.0, 10.0, 60, cost))
        record.billed_seconds, record.estimated_cost_usd = 60, cost
        ledger.append(record)
    done = orchestrate("cost", "--ledger", str(ledger.path))
    assert done.returncode == 0
    assert "aws-g4dn.xlarge          2     0.7500" in done.stdout
    assert orchestrate("cost", "--ledger", str(tmp_path / "none.jsonl")).stdout.startswith("no runs in")


@pytest.mark.parametrize("provider", ["aws", "gce"])
def test_sweep_without_credentials_skips_that_cloud_and_says_why(provider: str, tmp_path: Path) -> None:
    # A user with no cloud credentials at all (empty home, no AWS_*/GOOGLE_* variables): the sweep says so.
    bare = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = orchestrate("sweep", "--dry-run", "--provider", provider, "--ledger", str(tmp_path / "l.jsonl"), env=bare)
    assert done.returncode == 0, done.stderr
    assert f"skipped      {provider}: " in done.stdout


def test_image_source_load_is_for_detached_runs_only(tmp_path: Path) -> None:
    done = orchestrate("run", "--profile", "local", "--image-source", "load", "--dry-run")
    assert done.returncode == 2 and "--image-source load applies to detached runs (--detach)" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # the make reproduce recipe's fan-out, detached: the same check before any machine or bucket is touched
        (
            ["run", "--profiles", "gce-t4,gce-l4", "--detach", "--bucket", "gs://my-bucket/x", "--max-cost", "10"],
            "error: --max-cost 10: the catalog has no spot price for gce-t4, gce-l4, so the fan-out's cost is unknown",
        ),
        (["run", "--profile", "gce-t4", "--max-cost", "10"], "error: --max-cost applies to a fan-out"),
        (
            ["schedule", "create", "--profile", "gce-t4", "--cron", "0 4 * * 1", "--image", "r/n:t"],
            "error: profile gce-t4 has no spot price: its monthly cost cannot be estimated",
        ),
    ],
)
def test_an_unknown_spot_price_never_passes_as_zero(tmp_path: Path, args: list[str], message: str) -> None:
    done = orchestrate(*args, "--spot", "--dry-run", "--ledger", str(tmp_path / "ledger.jsonl"))
    assert done.returncode == 2 and done.stderr.startswith(message) and done.stderr.count("\n") == 1, done.stderr
    assert "$0.00" not in done.stdout
    assert not (tmp_path / "ledger.jsonl").exists()
