"""`python -m benchmarks step-costs`: a workload file's cost per training step, counted on the CPU, checked against
the count worked by hand; and a data folder that does not exist stops every command that reads data."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.step_costs import read_step_costs, record_path, recorded

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "examples" / "workloads" / "tiny_mlp.py"


def _bench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_a_workload_files_step_costs_are_its_matrix_products_counted_by_hand(tmp_path: Path) -> None:
    done = _bench("step-costs", "--workload-file", str(TINY), "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    (costs,) = recorded(tmp_path)
    # Dense 32->64->64->4 on a batch of 64: forward 2 x 64 x (32*64 + 64*64 + 64*4) FLOPs; backward the weights'
    # gradients (as many) and the inputs' of the two upper layers (the first layer's input needs none).
    forward = 2 * 64 * (32 * 64 + 64 * 64 + 64 * 4)
    assert costs.matmul_flops == forward * 2 + 2 * 64 * (64 * 64 + 64 * 4)
    assert costs.conv_flops == 0 and costs.operations > 0 and costs.batch_size == 64
    assert costs.host_data_s > 0 and costs.host_score > 0 and costs.data == "synthetic:tiny_mlp"
    path = record_path(tmp_path, "tiny_mlp", costs.sha256)
    assert read_step_costs(path) == costs and f"-> {path}" in done.stdout


def test_step_costs_needs_a_workload_file() -> None:
    done = _bench("step-costs")
    assert done.returncode == 2 and done.stderr == "error: step-costs: give --workload-file FILE.py\n"


@pytest.mark.parametrize(
    "command",
    [
        ["run", "--workload", "mnist_mlp", "--backend", "jax"],
        ["suite", "--backends", "jax"],
        ["check-workload", "--workload-file", str(TINY)],
        ["step-costs", "--workload-file", str(TINY)],
        ["fetch-data", "--dataset", "mnist"],
    ],
)
def test_a_data_folder_that_does_not_exist_stops_the_command_before_anything_trains(
    command: list[str], tmp_path: Path
) -> None:
    missing = tmp_path / "my_dtaa"
    out = ["--out", str(tmp_path / "logs")] if command[0] in ("run", "suite") else []
    done = _bench(*command, "--data-dir", str(missing), *out)
    assert done.returncode == 2 and done.stderr == f"error: --data-dir {missing}: no such folder\n", done.stderr
    assert not (tmp_path / "logs").exists()
    from_env = _bench(*command, *out, env={"BENCH_DATA_DIR": str(missing)})
    assert from_env.returncode == 2 and from_env.stderr == f"error: BENCH_DATA_DIR {missing}: no such folder\n"


def test_make_bench_refuses_a_mistyped_data_dir(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    done = subprocess.run(
        ["make", "-s", "bench", f"DATA_DIR={missing}", "BACKENDS=jax", "WORKLOADS=mnist_mlp"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode != 0 and f"error: --data-dir {missing}: no such folder" in done.stderr
    assert "suite quick" not in done.stdout  # nothing started
    docker = subprocess.run(
        ["make", "-s", "bench-docker", f"BENCH_DATA_DIR={missing}"], cwd=ROOT, capture_output=True, text=True
    )
    assert docker.returncode != 0 and f"error: BENCH_DATA_DIR {missing}: no such folder" in docker.stderr
