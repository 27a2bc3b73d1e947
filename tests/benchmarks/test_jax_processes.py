"""Keras on JAX across processes: two CPU processes, started as the runner's own launcher starts a job's processes
(torchrun's variables, loopback, a free port), join JAX's distributed runtime, train one model over gloo on their
shares of every global batch (the example workload file on its data folder), and give the one-process losses of the
same global batch; rank 0 alone writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.harness.processes import free_port, local_places
from benchmarks.logs import metadata_path, read_epoch_log
from tests.benchmarks.conftest import REPO, run_benchmarks
from tests.support.datasets import tiny_mlp_data

TINY = str(REPO / "examples" / "workloads" / "tiny_mlp.py")
RUN = ["run", "--workload-file", TINY, "--backend", "jax", "--suite", "quick"]
EPOCHS = 3  # the quick cut's, over 500 samples: 7 batches of 64 and one of 52 (26 a process)
# relative, per epoch: the same steps; the gradients' and the metrics' sums add the two processes' shares in another
# order (seen: the training losses equal to the last bit, a validation loss apart in the 7th digit)
LOSS_TOLERANCE = 1e-5


def _epochs(out: Path, run_id: str) -> tuple[list[tuple[float, float]], dict[str, Any]]:
    [path] = (out / "local" / run_id).glob("*.csv")
    meta = json.loads(metadata_path(path).read_text())
    return [(e.loss, e.val_loss) for e in read_epoch_log(path).epochs], meta


def _two_processes(args: list[str], keras_home: Path) -> list[subprocess.CompletedProcess[str]]:
    """The job's two processes, each told its place as benchmarks.launch tells it; their results in rank order."""
    env = {**os.environ, "KERAS_HOME": str(keras_home), "BENCH_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("BENCH_DATA_DIR", None)
    command = [sys.executable, "-m", "benchmarks", *args]
    children = [
        subprocess.Popen(
            command,
            cwd=REPO,
            env={**env, **place.environment()},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for place in local_places(2, free_port())
    ]
    results = []
    try:
        for child in children:
            stdout, stderr = child.communicate(timeout=180)
            results.append(subprocess.CompletedProcess(command, child.returncode, stdout, stderr))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    return results


def test_two_cpu_processes_train_the_one_process_steps_of_the_same_global_batch(tmp_path: Path) -> None:
    keras_home, args = tmp_path / "keras", [*RUN, "--data-dir", str(tiny_mlp_data(tmp_path / "data"))]
    one = run_benchmarks([*args, "--out", str(tmp_path), "--run-id", "one"], keras_home, timeout=180)
    assert one.returncode == 0, one.stderr[-3000:]
    rank0, rank1 = _two_processes([*args, "--gpus", "2", "--out", str(tmp_path), "--run-id", "two"], keras_home)
    assert rank0.returncode == rank1.returncode == 0, rank0.stderr[-3000:] + rank1.stderr[-3000:]
    assert rank0.stdout.count("wrote ") == 1 and "wrote " not in rank1.stdout  # rank 0 alone writes
    alone, _ = _epochs(tmp_path, "one")
    job, meta = _epochs(tmp_path, "two")
    assert len(alone) == len(job) == EPOCHS
    for (loss, val_loss), (job_loss, job_val_loss) in zip(alone, job, strict=True):
        assert job_loss == pytest.approx(loss, rel=LOSS_TOLERANCE)
        assert job_val_loss == pytest.approx(val_loss, rel=LOSS_TOLERANCE)
    dist = meta["distribution"]
    assert (dist["devices"], dist["processes"], dist["replicas"]) == (2, 2, 2)  # the weights on both processes' CPUs
    assert (dist["global_batch_size"], dist["per_device_batch_size"]) == (64, 32)
    assert dist["strategy"] == "keras.distribution.DataParallel across 2 processes (jax.distributed)"
    assert (dist["collectives"], dist["nodes"], len(dist["process_nodes"])) == ("gloo", 1, 2)
    assert [len(times) for times in dist["process_epoch_s"]] == [EPOCHS, EPOCHS]  # every process's, on rank 0's log


def test_under_torchrun_jax_is_refused_in_one_line_before_joining(tmp_path: Path) -> None:
    """torchrun's agent listens on MASTER_PORT itself: JAX's coordinator could not (it crashed the process)."""
    [place, _] = local_places(2, free_port())
    env = {**place.environment(), "TORCHELASTIC_USE_AGENT_STORE": "True"}
    args = [*RUN, "--allow-synthetic", "--gpus", "2", "--out", str(tmp_path)]
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", *args], cwd=REPO, env={**os.environ, **env}, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[-1].startswith("error: --backend jax under torchrun: its agent holds")
    assert not list(tmp_path.rglob("*.csv"))
