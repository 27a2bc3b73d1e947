"""End to end: `python -m orchestrate run --profile ssh` against a real sshd on loopback, with the real Docker
engine behind it and the real CPU image (built from this checkout by `make image-cpu`): Fabric connects through
an ~/.ssh/config-style alias, the host is prepared, each workload runs in its own container, its logs are pulled
at once and parse, the ledger records every stage, and nothing is left running or lying around on the host.

The run is a tiny slice of the quick suite (2 epochs of 512 samples). It also measures the seconds the run
spends outside the containers' timed epochs with a warm image: printed, and written to $KCB_OVERHEAD_REPORT
when that is set.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from benchmarks.logs import STATUS_COMPLETE, metadata_path, read_epoch_log
from orchestrate.cli.run_attached import ORCHESTRATION_STAGES, stage_totals
from tests.orchestrate.orchestrate_helpers import TINY, Workspace, orchestrate, ssh_run_args
from tests.support.docker import build_cpu_image, containers_of_run, remove_containers_of_run

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.sshd]

RUN_ID = "20260101T000000Z-e2e0"
WORKLOADS = "mnist_mlp,lstm_text_generation"
STAGE_ORDER = ["validate", "launch", "connect", "prepare", "image"]


@pytest.fixture(scope="module")
def cpu_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_cpu_image(tmp_path_factory.mktemp("image") / "image-cpu.log")


@pytest.fixture(scope="module")
def e2e(tmp_path_factory: pytest.TempPathFactory, cpu_image: str):
    from orchestrate.testing.sshd import start_sshd

    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    ws = Workspace(tmp_path_factory.mktemp("e2e"))
    ws.prefill()
    args = ssh_run_args(server, ws, RUN_ID, "--workloads", WORKLOADS, "--backends", "jax", "--image", cpu_image, *TINY)
    try:
        done = orchestrate(*args)
        yield server, ws, done
    finally:
        server.stop()
        remove_containers_of_run(RUN_ID)


def test_run_completes_and_says_so(e2e) -> None:
    _, _, done = e2e
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Run {RUN_ID}: complete: all 2 container runs complete" in done.stdout
    assert "removed " in done.stdout  # the run's folder on the host


def test_logs_are_pulled_and_parse(e2e) -> None:
    _, ws, _ = e2e
    digest = ws.run_record(RUN_ID).image_digest
    run_logs = ws.run_logs("ssh", RUN_ID)
    csvs = sorted(p.name for p in run_logs.glob("*.csv"))
    # mnist.npz is not in this environment: the runner says so in the file name; nietzsche.txt is real
    assert csvs == ["lstm_text_generation_jax.csv", "mnist_mlp_jax_synthetic.csv"]
    for name in csvs:
        log = read_epoch_log(run_logs / name)
        assert len(log.epochs) == 2 and all(e.elapsed > 0 for e in log.epochs)
        meta = json.loads(metadata_path(run_logs / name).read_text())  # the file as written
        assert meta["status"] == STATUS_COMPLETE
        assert (meta["platform"], meta["run_id"], meta["suite"], meta["backend"]) == ("ssh", RUN_ID, "quick", "jax")
        assert meta["container"]["digest"] == digest  # BENCH_IMAGE_DIGEST, passed by the orchestrator
    console = run_logs / "orchestrate" / "lstm_text_generation_jax.console.log"
    assert "epoch 2/2" in console.read_text()


def test_ledger_records_every_stage_in_order(e2e) -> None:
    _, ws, _ = e2e
    record = ws.run_record(RUN_ID)
    assert record.status == "complete" and record.provider == "ssh" and record.platform == "ssh"
    names = [s.name for s in record.stages if s.name != "pull_logs"]
    assert names == [*STAGE_ORDER, "workload", "workload", "teardown"]
    assert sum(s.name == "pull_logs" for s in record.stages) >= 3  # after each workload, and at teardown
    for stage in record.stages:
        assert stage.ended_at is not None and stage.ended_at >= stage.started_at, stage
    starts = [s.started_at for s in record.stages]
    assert starts == sorted(starts)
    assert [(i.workload, i.status, i.exit_code) for i in record.items] == [
        ("mnist_mlp", "complete", 0),
        ("lstm_text_generation", "complete", 0),
    ]
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", record.image_digest or "")  # the image ID (never pushed)
    assert record.instances[0].instance_id.startswith("ssh:")
    assert record.billed_seconds == 0 and record.estimated_cost_usd is None  # nothing rented
    assert json.loads((ws.run_logs("ssh", RUN_ID) / "orchestrate" / "run.json").read_text())["status"] == "complete"


def test_nothing_is_left_running_or_on_the_host(e2e) -> None:
    _, ws, _ = e2e
    assert containers_of_run(RUN_ID) == []
    assert not (ws.remote_dir / "runs" / RUN_ID).exists()
    assert (ws.remote_dir / "cache" / "keras" / "datasets" / "nietzsche.txt").is_file()  # kept for the next run


def timed_epoch_seconds(paths: list[str]) -> float:
    """Sum of the `elapsed` column of the epoch CSVs among `paths` (the time the benchmark measures)."""
    csvs = [path for path in paths if path.endswith(".csv") and "/preempted/" not in path]
    return sum(read_epoch_log(path, with_metadata=False).total_elapsed for path in csvs)


def test_overhead_outside_the_timed_epochs(e2e) -> None:
    """Orchestration overhead with a warm image: connect, prepare, image check, log pulls, teardown."""
    _, ws, _ = e2e
    record = ws.run_record(RUN_ID)
    totals = stage_totals(record)
    orchestration = sum(totals.get(name, 0.0) for name in ORCHESTRATION_STAGES)
    wall = record.ended_at - record.started_at
    containers = totals["workload"]
    epochs = timed_epoch_seconds([p for item in record.items for p in item.logs])
    report = {
        "wall_s": round(wall, 2),
        "orchestration_s": round(orchestration, 2),
        "stages_s": {name: round(seconds, 2) for name, seconds in totals.items()},
        "container_runs_s": round(containers, 2),
        "timed_epochs_s": round(epochs, 2),
        "outside_timed_epochs_s": round(wall - epochs, 2),
        "container_overhead_s": round(containers - epochs, 2),
        "image": record.stages[4].detail,
    }
    print("\noverhead:", json.dumps(report, indent=2))
    if os.environ.get("KCB_OVERHEAD_REPORT"):
        Path(os.environ["KCB_OVERHEAD_REPORT"]).write_text(json.dumps(report, indent=2))
    assert "already on host" in report["image"]  # warm: the image ID matched, nothing was copied
    assert epochs > 0
    # Fixed costs of a run on a warm host; seconds, whatever the suite's length (2 cores shared with other work).
    assert orchestration < 30, report
