"""The CLI's read-only commands and the dry-run plan: what a user sees before anything is launched."""

from __future__ import annotations

import os
import re
import time
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


BINARY = b"\xff\xfe\x00\x01 not text \x89PNG\r\n"
LATIN_1 = '[profiles.box]\nprovider = "ssh"\ndescription = "caf\xe9"\n'.encode("latin-1")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--run-id", "a" * 5000], "error: --run-id 'aaaa"),  # once OSError: File name too long
        (["--platform", "p" * 100_000], "error: --platform 'pppp"),
        (["--run-id", "rün-1"], "error: --run-id 'rün-1': use letters, digits"),  # once failed at `docker run`
        (["--run-id", "_x"], "error: --run-id '_x': use letters, digits"),  # docker: a letter or digit first
        (["--profiles", "local,gce-t4", "--run-id", "b" * 5000], "error: --run-id 'bbbb"),
        (["--ledger", "/dev/full"], "error: --ledger /dev/full: not a regular file"),  # once read 21 GB
        (["--catalog", "{binary}"], "error: {binary}: not a TOML catalog (byte 0 is not UTF-8)"),
        (["--catalog", "{latin_1}"], "error: {latin_1}: not a TOML catalog (byte 50 is not UTF-8)"),
    ],
)
def test_bad_input_is_one_short_line_before_anything_starts(tmp_path: Path, args: list[str], message: str) -> None:
    """Each of these once ended in a traceback (or a run that failed after its ledger line was written)."""
    files = {"binary": tmp_path / "binary.toml", "latin_1": tmp_path / "latin-1.toml"}
    files["binary"].write_bytes(BINARY)
    files["latin_1"].write_bytes(LATIN_1)
    args = [a.format(**files) for a in args]
    profile = [] if "--profiles" in args else ["--profile", "local"]
    ledger = [] if "--ledger" in args else ["--ledger", str(tmp_path / "ledger.jsonl")]
    done = orchestrate("run", *profile, *args, *ledger, "--logs", str(tmp_path / "logs"), "--dry-run", timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(message.format(**files)), done.stderr
    assert len(done.stderr.splitlines()) == 1 and len(done.stderr) < 300  # not the 100 KB it was given
    assert done.stdout == "" and not (tmp_path / "ledger.jsonl").exists() and not (tmp_path / "logs").exists()


def test_a_user_catalog_that_is_not_text_is_one_line(tmp_path: Path) -> None:
    user = tmp_path / "config" / "keras-cloud-bench" / "catalog.toml"
    user.parent.mkdir(parents=True)
    user.write_bytes(BINARY)
    done = orchestrate("profiles", env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")}, timeout=120)
    assert done.returncode == 2 and done.stderr == f"error: {user}: not a TOML catalog (byte 0 is not UTF-8)\n"


def test_the_ledger_from_the_environment_is_checked_too(tmp_path: Path) -> None:
    done = orchestrate("cost", env={**os.environ, "KCB_LEDGER": "/dev/zero"}, timeout=60)
    assert done.returncode == 2 and done.stderr.startswith("error: $KCB_LEDGER /dev/zero: not a regular file")


def test_an_ssh_host_name_that_does_not_resolve_stops_the_run_before_it_starts(tmp_path: Path) -> None:
    """It once waited --ssh-timeout (300 s) on `make bench-ssh HOST=me@gpu-box`, the run recorded as failed."""
    args = ["--ledger", str(tmp_path / "ledger.jsonl"), "--logs", str(tmp_path / "logs"), "--ssh-timeout", "60"]
    started = time.monotonic()
    done = orchestrate("run", "--profile", "ssh", "--host", "me@gpu-box.invalid", *args, timeout=120)
    assert done.returncode == 2 and time.monotonic() - started < 50, done.stdout + done.stderr
    assert done.stderr.startswith("error: the host name gpu-box.invalid of me@gpu-box.invalid does not resolve (")
    assert len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "ledger.jsonl").exists() and not (tmp_path / "logs").exists()
    dry = orchestrate("run", "--profile", "ssh", "--host", "me@gpu-box.invalid", *args, "--dry-run", timeout=120)
    assert dry.returncode == 0 and "credentials  the host name gpu-box.invalid of me@gpu-box.invalid" in dry.stdout


def test_an_ssh_config_alias_is_resolved_by_its_host_name(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host gpu-box\n    HostName 127.0.0.1\n    User me\n")
    args = ["--ledger", str(tmp_path / "ledger.jsonl"), "--ssh-config", str(config), "--dry-run"]
    done = orchestrate("run", "--profile", "ssh", "--host", "gpu-box", *args, timeout=120)
    assert done.returncode == 0 and "  credentials  ok\n" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("command", ["status", "collect"])
def test_a_run_id_no_run_can_have_is_one_line(tmp_path: Path, command: str) -> None:
    """`collect` of a 5,000-character id once ended in `OSError: File name too long`."""
    done = orchestrate(command, "c" * 5000, "--ledger", str(tmp_path / "ledger.jsonl"), timeout=60)
    assert done.returncode == 2 and done.stderr.startswith("error: argument RUN_ID: 5,000 characters; no run id")
    assert len(done.stderr.splitlines()) == 1
