"""The package as a user installs it: the wheel built from this checkout, installed with its `orchestrate` extras (which
bring the report's) into a fresh virtual environment with no Keras backend (no TensorFlow, JAX or PyTorch), and the
commands an orchestrating laptop runs, from a folder outside the checkout: the project's own environment, which has
every framework and the checkout beside the source, would hide what such an install lacks.

The environment is made once for the module, with the versions of the lock files, by uv (in requirements/dev.lock),
which installs from its cache in seconds where pip takes minutes on two cores."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds and installs the package (about a minute on two cores)

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("benchmarks", "estimator", "orchestrate", "records", "report")  # pyproject's packages.find
FRAMEWORKS = ("tensorflow", "jax", "torch")
# What the providers import when they act (their clouds' clients, imported lazily): a dry run would not notice one
# missing, a real detached run or schedule would.
CLIENTS = ("boto3", "google.cloud.compute_v1", "google.cloud.storage", "google.cloud.scheduler_v1", "fabric", "docker")
LOCKS = ("dev.lock", "bench-cpu.lock")
SLURM_PROFILE = """
[profiles.mycluster-h100]
provider = "slurm"
description = "1x H100 80GB per task, partition h100 of mycluster"
accelerator = "h100"
accelerator_count = 1
docker_image = "gpu"
billing_minimum_s = 0
on_demand = { usd_per_hour = 2.50, date = "2026-11-01", source = "a centre's internal rate sheet" }

[profiles.mycluster-h100.extra]
login = "mycluster.invalid"
partition = "h100"
shared_dir = "/scratch/me/kcb"
runtime = "apptainer"
price_unit = "gpu-hour"
"""


@dataclass(frozen=True)
class Installed:
    python: Path
    work: Path  # a folder outside the checkout, where the commands run
    env: dict[str, str]

    def run(self, *args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
        """`python ARGS` of the installed environment."""
        return subprocess.run(
            [str(self.python), *args],
            cwd=self.work, env=self.env, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip


def _done(command: list[str | Path], cwd: Path) -> None:
    done = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, f"{command[:4]}: {done.stdout[-2000:]}{done.stderr[-2000:]}"


def _constraints(path: Path) -> Path:
    """The lock files' versions, as pip constraints (without their hashes)."""
    pins = []
    for lock in LOCKS:
        pins += re.findall(r"^([A-Za-z0-9_.-]+==[^\s\\;]+)", (ROOT / "requirements" / lock).read_text(), re.M)
    path.write_text("\n".join(pins) + "\n")
    return path


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("installed")
    source = root / "source"  # a copy: an in-tree build would leave build/ in the checkout
    for package in PACKAGES:
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", source)
    _done([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", "dist", source], root)
    (wheel,) = (root / "dist").glob("keras_cloud_bench-*.whl")
    _done([sys.executable, "-m", "venv", "--without-pip", "venv"], root)
    python = root / "venv" / "bin" / "python"
    uv = Path(sys.executable).parent / "uv"
    _done(
        [uv, "pip", "install", "-q", "--python", python, "-c", _constraints(root / "c.txt"), f"{wheel}[orchestrate]"],
        root,
    )
    work, home = root / "work", root / "home"
    work.mkdir()
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("KCB_")}
    return Installed(python, work, {**env, "HOME": str(home), "PATH": f"{python.parent}:{env.get('PATH', '')}"})


def test_the_install_has_no_framework_and_runs_from_its_own_copy(installed: Installed) -> None:
    probe = "import importlib.util as u, orchestrate, estimator.basis as b; "
    probe += f"print([m for m in {FRAMEWORKS!r} if u.find_spec(m)], [m for m in {CLIENTS!r} if not u.find_spec(m)], "
    probe += "orchestrate.__file__, b.TABLE.is_file())"
    done = installed.run("-c", probe)
    assert done.returncode == 0, done.stderr
    frameworks, missing, where, table = done.stdout.split()
    assert frameworks == "[]" and missing == "[]", done.stdout
    assert not Path(where).is_relative_to(ROOT) and table == "True", done.stdout


def test_providers_and_profiles_list(installed: Installed) -> None:
    providers = installed.run("-m", "orchestrate", "providers")
    assert providers.returncode == 0, providers.stderr
    assert all(name in providers.stdout for name in ("aws", "gce", "local", "slurm", "ssh"))
    profiles = installed.run("-m", "orchestrate", "profiles")
    assert profiles.returncode == 0 and "gce-h100" in profiles.stdout, profiles.stderr


def test_a_dry_run_of_a_cloud_profile_estimates_from_the_shipped_reference_basis(installed: Installed) -> None:
    done = installed.run("-m", "orchestrate", "run", "--profile", "gce-h100", "--suite", "short", "--dry-run")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    assert "nothing is launched" in done.stdout
    assert "mnist_mlp [jax]" in done.stdout and "measured: reference NVIDIA-H100-jax" in done.stdout


def test_a_dry_run_of_a_slurm_profile_estimates_from_the_shipped_reference_basis(installed: Installed) -> None:
    catalog = installed.work / "catalog.toml"
    catalog.write_text(SLURM_PROFILE)
    done = installed.run(
        "-m", "orchestrate", "run", "--profile", "mycluster-h100", "--catalog", str(catalog), "--suite", "short",
        "--backends", "jax", "--dry-run",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    assert "resnet50 [jax]" in done.stdout and "measured: reference NVIDIA-H100-jax" in done.stdout


def test_cost_sweep_and_a_schedules_dry_run(installed: Installed) -> None:
    cost = installed.run("-m", "orchestrate", "cost")
    assert cost.returncode == 0 and "no runs in" in cost.stdout, cost.stderr
    sweep = installed.run("-m", "orchestrate", "sweep", "--dry-run")
    assert sweep.returncode == 0 and "nothing of this project is running" in sweep.stdout, sweep.stderr
    schedule = installed.run(
        "-m", "orchestrate", "schedule", "create", "--profile", "gce-t4", "--cron", "0 4 * * 1",
        "--image", "registry.example.com/kcb:gpu", "--dry-run",
    )  # fmt: skip
    assert schedule.returncode == 0 and "estimate" in schedule.stdout, schedule.stdout[-2000:] + schedule.stderr


def test_a_workload_file_needs_a_backend_here_and_says_so_in_one_line(installed: Installed) -> None:
    mine = installed.work / "tiny_mlp.py"
    shutil.copy(ROOT / "examples" / "workloads" / "tiny_mlp.py", mine)
    done = installed.run("-m", "orchestrate", "run", "--profile", "gce-h100", "--workload-file", str(mine), "--dry-run")
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(errors) == 1, done.stdout[-2000:] + done.stderr
    assert "checking a workload needs Keras and one backend here" in errors[0]


def test_the_report_of_a_logs_folder(installed: Installed) -> None:
    run = ROOT / "logs" / "reference" / "NVIDIA-H100" / "gpu-repeats-h100-1c83db"
    shutil.copytree(run, installed.work / "logs" / "NVIDIA-H100" / run.name)
    done = installed.run("-m", "report", "logs", "--out", "report-out", timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (installed.work / "report-out" / "index.html").is_file()
