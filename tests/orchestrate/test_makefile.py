"""`make bench-<profile>`: generated from the catalog, never stale, and the flags reach the CLI."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrate import makefile
from orchestrate.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[2]
FRAGMENTS = ["-f", "mk/orchestrate.mk", "-f", "mk/profiles.mk"]


def make_dry(*args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("make") is None:
        pytest.fail("GNU make is missing (apt-get install -y make)")
    return subprocess.run(["make", "-s", "-n", *FRAGMENTS, *args], cwd=ROOT, capture_output=True, text=True)


def test_generated_targets_match_the_catalog() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "orchestrate", "make-targets", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr  # stale: run `python -m orchestrate make-targets`
    text = (ROOT / "mk" / "profiles.mk").read_text()
    assert text == makefile.render(load_catalog())
    for name in load_catalog():
        assert f"\nbench-{name}:" in text


def test_check_detects_a_stale_file(tmp_path: Path) -> None:
    stale = tmp_path / "profiles.mk"
    stale.write_text("bench-gce-k80:\n")
    done = subprocess.run(
        [sys.executable, "-m", "orchestrate", "make-targets", "--check", "--output", str(stale)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "out of date" in done.stderr


def test_cloud_target_passes_the_knobs() -> None:
    done = make_dry("bench-gce-t4", "SUITE=full", "BACKENDS=jax,torch", "WORKLOADS=mnist_mlp", "DRY_RUN=1", "SPOT=1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        ".venv/bin/python", "-m", "orchestrate", "run", "--profile", "gce-t4", "--suite", "full",
        "--backends", "jax,torch", "--workloads", "mnist_mlp", "--dry-run", "--spot",
    ]  # fmt: skip


def test_ssh_target_needs_host_and_passes_port() -> None:
    missing = make_dry("bench-ssh")
    assert missing.returncode != 0 and "HOST is required: make bench-ssh HOST=user@box" in missing.stderr
    done = make_dry("bench-ssh", "HOST=bench@gpu-box", "PORT=2222", "VENV=/opt/venv")
    assert done.stdout.split()[:10] == [
        "/opt/venv/bin/python", "-m", "orchestrate", "run", "--profile", "ssh",
        "--host", "bench@gpu-box", "--port", "2222",
    ]  # fmt: skip


def test_the_top_level_makefile_passes_no_stray_platform() -> None:
    """The top-level Makefile's PLATFORM (for `make bench`) must not leak into orchestrated runs."""
    done = subprocess.run(["make", "-s", "-n", "bench-gce-t4"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[3:6] == ["run", "--profile", "gce-t4"] and "--platform" not in done.stdout
    named = subprocess.run(
        ["make", "-s", "-n", "bench-ssh", "HOST=me@box", "RUN_PLATFORM=home-1080ti"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert "--platform home-1080ti" in named.stdout
