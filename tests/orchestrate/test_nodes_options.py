"""`run --nodes N`: what is refused before anything starts, in one line (the cluster's own limits, a partition too
small, are asked of a real cluster in tests/slurm/test_slurm_nodes.py), and the plan and estimate of a job of N
nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.orchestrate.orchestrate_helpers import Workspace, orchestrate

SLURM = """
[profiles.hpc-a100]
provider = "slurm"
accelerator = "a100"
accelerator_count = 2
docker_image = "gpu"
billing_minimum_s = 0
on_demand = {{ usd_per_hour = 1.5, date = "2026-11-01", source = "centre rate sheet" }}
[profiles.hpc-a100.extra]
login = "me@hpc-login.invalid"
partition = "a100"
shared_dir = "/scratch/me/kcb"
price_unit = "gpu-hour"

[profiles.hpc-cpu]
provider = "slurm"
docker_image = "cpu"
billing_minimum_s = 0
on_demand = {{ usd_per_hour = 0.5, date = "2026-11-01", source = "centre rate sheet" }}
[profiles.hpc-cpu.extra]
login = "me@hpc-login.invalid"
partition = "cpu"
shared_dir = "/scratch/me/kcb"
"""


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    path = tmp_path / "hpc.toml"
    path.write_text(SLURM.replace("{{", "{").replace("}}", "}"))
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--profile", "local", "--nodes", "2"], "error: --nodes applies to batch schedulers (slurm); local is local"),
        (["--profile", "hpc-cpu", "--nodes", "0"], "error: argument --nodes: expected a positive integer, got 0"),
        (["--profile", "hpc-cpu", "--nodes", "2", "--backends", "tensorflow,jax", "--workloads", "mnist_mlp"],
         "error: --nodes 2: backend tensorflow cannot train across processes; choose --backends jax,torch-native"),
        (["--profile", "hpc-a100", "--nodes", "2", "--gpus", "4", "--backends", "torch-native"],
         "error: --gpus 4: hpc-a100 has 2 GPU(s) per node"),
        (["--profile", "hpc-cpu", "--batch-policy", "per-device"],
         "error: --batch-policy applies to GPU profiles and --nodes N; hpc-cpu has no accelerator"),
    ],
)  # fmt: skip
def test_bad_node_requests_fail_before_anything_starts(
    tmp_path: Path, catalog: Path, args: list[str], message: str
) -> None:
    ws = Workspace(tmp_path)
    done = orchestrate("run", *args, "--catalog", str(catalog), "--ledger", str(ws.ledger), "--logs", str(ws.logs))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(message) and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not ws.ledger.exists() and not ws.logs.exists()


def test_the_plan_of_a_job_of_nodes_prices_every_node_and_says_what_it_cannot_estimate(
    tmp_path: Path, catalog: Path
) -> None:
    ws = Workspace(tmp_path)
    done = orchestrate(
        "run", "--profile", "hpc-a100", "--nodes", "3", "--backends", "torch-native", "--workloads", "resnet50",
        "--batch-policy", "per-device", "--catalog", str(catalog), "--ledger", str(ws.ledger), "--logs",
        str(ws.logs), "--dry-run",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "$9.0000/h on-demand" in done.stdout  # $1.50 per GPU-hour x 2 GPUs x 3 nodes
    assert "centre rate sheet (x2 GPUs x 3 nodes)" in done.stdout
    assert "  nodes        3 nodes x 2 process(es) per run (one per GPU); before the clock: the image" in done.stdout
    limits = next(line for line in done.stdout.splitlines() if line.startswith("  limits"))
    assert limits.endswith("runner --gpus 6 --batch-policy per-device")  # the job's processes, one GPU each
    # nothing measured across nodes here: the estimate says so instead of guessing from one machine's GPUs
    assert "no run measured on several nodes (per-device) to scale by" in done.stdout


def test_keras_on_jax_plans_across_nodes_as_torch_native_does(tmp_path: Path, catalog: Path) -> None:
    """One process per GPU of every node, the runner told the job's devices; the batch policy over all of them."""
    ws = Workspace(tmp_path)
    done = orchestrate(
        "run", "--profile", "hpc-a100", "--nodes", "2", "--backends", "jax", "--workloads", "mnist_mlp",
        "--batch-policy", "per-device", "--catalog", str(catalog), "--ledger", str(ws.ledger), "--logs",
        str(ws.logs), "--dry-run",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "  nodes        2 nodes x 2 process(es) per run (one per GPU)" in done.stdout
    limits = next(line for line in done.stdout.splitlines() if line.startswith("  limits"))
    assert limits.endswith("runner --gpus 4 --batch-policy per-device")
