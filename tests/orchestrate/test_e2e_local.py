"""`make bench-local`'s lifecycle on this machine: the same stages as a remote run, commands run here instead of
over SSH, with the real Docker engine and the CPU image built from this checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.logs import read_epoch_log
from tests.orchestrate.orchestrate_helpers import TINY, Workspace, orchestrate
from tests.support.docker import build_cpu_image, containers_of_run, remove_containers_of_run

pytestmark = [pytest.mark.slow, pytest.mark.docker]


def test_local_run_completes_and_cleans_up(tmp_path: Path) -> None:
    image = build_cpu_image(tmp_path / "image-cpu.log")
    ws = Workspace(tmp_path)
    ws.prefill()
    run_id = "20260101T000000Z-loc0"
    try:
        done = orchestrate(
            "run", "--profile", "local", "--workloads", "lstm_text_generation", "--backends", "torch",
            "--image", image, "--logs", str(ws.logs), "--ledger", str(ws.ledger),
            "--remote-dir", str(ws.remote_dir), "--run-id", run_id, "--plain", *TINY,
        )  # fmt: skip
    finally:
        remove_containers_of_run(run_id)
    assert done.returncode == 0, done.stdout + done.stderr
    log = read_epoch_log(ws.run_logs("local", run_id) / "lstm_text_generation_torch.csv")
    assert log.status == "complete" and len(log.epochs) == 2
    record = ws.run_record(run_id)
    assert [s.name for s in record.stages if s.name != "pull_logs"] == [
        "validate", "launch", "connect", "prepare", "image", "workload", "teardown",
    ]  # fmt: skip
    assert record.stages[2].detail == "this machine"
    assert containers_of_run(run_id) == [] and not (ws.remote_dir / "runs" / run_id).exists()
