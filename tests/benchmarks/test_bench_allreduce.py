"""`python -m benchmarks check-allreduce`, the check a job of several nodes makes before anything is timed: real
processes of this machine joined over gloo on loopback, as the Slurm job's processes are (tests/slurm runs them
across two nodes); a process that cannot reach the others fails in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from orchestrate.testing.sshd import free_port
from tests.orchestrate.orchestrate_helpers import ROOT


def start(rank: int, world: int, port: int, *args: str, **env: str) -> subprocess.Popen[str]:
    variables = {"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank), "MASTER_ADDR": "127.0.0.1"}
    return subprocess.Popen(
        [sys.executable, "-m", "benchmarks", "check-allreduce", *args],
        cwd=ROOT,
        env={**os.environ, **variables, "MASTER_PORT": str(port), "PYTHONPATH": str(ROOT), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_every_process_sums_and_rank_0_records_the_bandwidth(tmp_path: Path) -> None:
    port = free_port()
    args = ("--out", str(tmp_path), "--record", "run/check.json", "--megabytes", "4", "--repeats", "3")
    processes = [start(rank, 2, port, *args, SLURMD_NODENAME=f"node{rank + 1}") for rank in range(2)]
    outputs = [process.communicate(timeout=120) for process in processes]
    assert [process.returncode for process in processes] == [0, 0], outputs
    record = json.loads((tmp_path / "run" / "check.json").read_text())
    assert (record["processes"], record["nodes"], record["processes_per_node"]) == (2, 2, 1)
    assert record["hosts"] == ["node1", "node2"] and record["backend"] == "gloo"
    assert record["bytes"] == 4 * 2**20 and len(record["seconds"]) == 3
    assert record["bus_gbps"] == record["algorithm_gbps"] > 0  # two processes: bus = algorithm bandwidth
    assert record["interconnect"]["address"] == "127.0.0.1" and record["interconnect"]["interface"] == "lo"
    summary = outputs[0][0].strip()
    assert summary.startswith("all-reduce check: 2 processes on 2 nodes (node1, node2), gloo over lo, 4 MiB: ")
    assert outputs[1][0] == ""  # only rank 0 speaks


def test_a_process_that_cannot_reach_rank_0_fails_in_one_line(tmp_path: Path) -> None:
    port = free_port()  # nobody listens: rank 0 never starts
    process = start(1, 2, port, "--timeout-s", "2")
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 4
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr  # c10d's own connection errors are kept out of the console
    assert lines[0].startswith(
        f"all-reduce check failed: rank 1 on {os.uname().nodename} could not join the process group at "
        f"127.0.0.1:{port} within 2 s ("
    )


def test_no_process_group_in_the_environment_is_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "check-allreduce"],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE", "SLURM_"))},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stderr.startswith("all-reduce check: no process group in the environment")
