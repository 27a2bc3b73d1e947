"""`make bench-<profile>`: a pattern rule for any profile of any catalog; every knob reaches the CLI as data."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FRAGMENTS = ["-f", "mk/orchestrate.mk"]


def make_dry(*args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("make") is None:
        pytest.fail("GNU make is missing (apt-get install -y make)")
    return subprocess.run(["make", "-s", "-n", *FRAGMENTS, *args], cwd=ROOT, capture_output=True, text=True)


def test_any_profile_has_a_target_without_a_generated_file(tmp_path: Path) -> None:
    """A user or plug-in catalog's profile runs through the pattern rule: no tracked file lists the profiles."""
    catalog = tmp_path / "catalog.toml"
    catalog.write_text('[profiles.mycloud-a10]\nprovider = "ssh"\n')
    assert not (ROOT / "mk" / "profiles.mk").exists()
    done = make_dry("bench-mycloud-a10", f"CATALOG={catalog}")
    assert done.returncode == 0, done.stderr
    assert shlex.split(done.stdout)[3:8] == ["run", "--profile", "mycloud-a10", "--catalog", str(catalog)]
    dry = subprocess.run(
        ["make", "-s", "bench-mycloud-a10", f"CATALOG={catalog}", "HOST=me@box", "DRY_RUN=1"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert "Plan (dry run: nothing is launched)" in dry.stdout and "mycloud-a10: me@box" in dry.stdout


@pytest.mark.parametrize(
    "variable",
    [
        "HOST",
        "PORT",
        "IDENTITY",
        "BACKENDS",
        "WORKLOADS",
        "RUN_PLATFORM",
        "SUITE",
        "REPEATS",
        "PROVIDER_SETTINGS",
        "BUCKET",
    ],
)
def test_make_variables_never_reach_the_shell_as_syntax(tmp_path: Path, variable: str) -> None:
    """`make bench-ssh 'HOST=x;touch /tmp/p;true' DRY_RUN=1` once ran `touch` here, then a real run, and exit 0."""
    marker = tmp_path / "pwned"
    host = [] if variable == "HOST" else ["HOST=me@box"]
    done = subprocess.run(
        ["make", "-s", "bench-ssh", *host, f"{variable}=x --ssh-timeout 1;touch {marker};true", "DRY_RUN=1"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert not marker.exists()
    if variable == "IDENTITY":  # a key path is only read at connect time: the dry run names it, whole, as data
        assert f"the SSH key x --ssh-timeout 1;touch {marker};true does not exist" in done.stdout
    else:  # the CLI refused the value in one line, and make failed with it
        assert done.returncode != 0 and done.stderr.startswith("error: ") and "Plan" not in done.stdout


def test_cloud_target_passes_the_knobs() -> None:
    done = make_dry("bench-gce-t4", "SUITE=full", "BACKENDS=jax,torch", "WORKLOADS=mnist_mlp", "DRY_RUN=1", "SPOT=1")
    assert done.returncode == 0, done.stderr
    assert shlex.split(done.stdout) == [
        ".venv/bin/python", "-m", "orchestrate", "run", "--profile", "gce-t4", "--suite", "full",
        "--backends", "jax,torch", "--workloads", "mnist_mlp", "--dry-run", "--spot",
    ]  # fmt: skip


def test_repeats_gpus_and_batch_policy_reach_the_cli() -> None:
    done = make_dry("bench-ssh-gpu", "HOST=me@box", "REPEATS=3", "GPUS=all", "BATCH_POLICY=per-device")
    words = shlex.split(done.stdout)
    assert words[words.index("--repeats") + 1] == "3" and words[words.index("--gpus") + 1] == "all"
    assert words[words.index("--batch-policy") + 1] == "per-device"


def test_ssh_target_passes_host_and_port() -> None:
    done = make_dry("bench-ssh", "HOST=bench@gpu-box", "PORT=2222", "VENV=/opt/venv")
    words = shlex.split(done.stdout)
    assert words[:6] + words[words.index("--host") : words.index("--host") + 4] == [
        "/opt/venv/bin/python", "-m", "orchestrate", "run", "--profile", "ssh",
        "--host", "bench@gpu-box", "--port", "2222",
    ]  # fmt: skip


def test_the_top_level_makefile_passes_no_stray_platform() -> None:
    """The top-level Makefile's PLATFORM (for `make bench`) must not leak into orchestrated runs."""
    done = subprocess.run(["make", "-s", "-n", "bench-gce-t4"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert shlex.split(done.stdout)[3:6] == ["run", "--profile", "gce-t4"] and "--platform" not in done.stdout
    named = subprocess.run(
        ["make", "-s", "-n", "bench-ssh", "HOST=me@box", "RUN_PLATFORM=home-1080ti"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert "--platform home-1080ti" in " ".join(shlex.split(named.stdout))
