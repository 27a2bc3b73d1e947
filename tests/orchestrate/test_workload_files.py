"""A user's workload file through the orchestrator (`run --workload-file`): checked before anything launches,
carried to the host and into the CPU image's containers without rebuilding it (this machine, and an SSH host on
loopback, there with the user's data folder, `--data-dir`), to a fan-out's children, and in a detached machine's
boot script (its data folder through the bucket); and the estimate for a machine it has not run on, from its own
runs scaled by the built-ins' measured ratio."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest

from benchmarks.logs import read_epoch_log
from benchmarks.metadata import RunMetadata
from benchmarks.workload_set import sha256_of
from estimator.backtest import Band
from estimator.model import Observation, Target
from estimator.plugin_scaling import scaled_by_builtins
from orchestrate.cli import build_parser
from orchestrate.cli.request import AttachedRun, Fanout, request_of
from tests.orchestrate.orchestrate_helpers import ROOT, TINY, Workspace, orchestrate, ssh_run_args
from tests.support.datasets import tiny_mlp_data
from tests.support.docker import build_cpu_image, containers_of_run, image_id, remove_containers_of_run

EXAMPLE = ROOT / "examples" / "workloads" / "tiny_mlp.py"


def _local_args(ws: Workspace, run_id: str, *extra: str) -> list[str]:
    return [
        "run", "--profile", "local", "--logs", str(ws.logs), "--ledger", str(ws.ledger),
        "--remote-dir", str(ws.remote_dir), "--run-id", run_id, "--plain", *extra,
    ]  # fmt: skip


def _metadata(folder: Path, stem: str) -> RunMetadata:
    return RunMetadata.from_dict(json.loads((folder / f"{stem}.json").read_text()))


@pytest.mark.slow
@pytest.mark.docker
def test_a_workload_file_runs_in_the_cpu_image_on_this_machine_without_rebuilding_it(tmp_path: Path) -> None:
    image = build_cpu_image(tmp_path / "image-cpu.log")
    built = image_id(image)
    ws = Workspace(tmp_path)
    mine = tmp_path / "mine" / "tiny_mlp.py"  # outside the checkout the image was built from
    mine.parent.mkdir()
    shutil.copy(EXAMPLE, mine)
    run_id = "20260101T000000Z-plg0"
    try:
        done = orchestrate(
            *_local_args(ws, run_id, "--workload-file", str(mine), "--backends", "torch", "--image", image, *TINY)
        )
    finally:
        remove_containers_of_run(run_id)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tiny_mlp.py: workload tiny_mlp" in done.stdout and "trained on the CPU" in done.stdout  # the check
    prepare = next(stage for stage in ws.run_record(run_id).stages if stage.name == "prepare")
    assert "payload 1 file(s)" in prepare.detail  # carried to the host at the prepare stage
    folder = ws.run_logs("local", run_id)
    log = read_epoch_log(folder / "tiny_mlp_torch_synthetic.csv")
    assert log.status == "complete" and len(log.epochs) == 2
    meta = _metadata(folder, "tiny_mlp_torch_synthetic")
    assert meta.plugin is not None and (meta.plugin.file, meta.plugin.sha256) == ("tiny_mlp.py", sha256_of(mine))
    assert meta.container is not None and meta.container.image == image and meta.data.source == "synthetic"
    spec = meta.run_spec  # what the run carried, as its ledger entry names it
    assert spec is not None and spec.sha256 == ws.run_record(run_id).spec and spec.payload_files == 1
    assert image_id(image) == built  # the image it ran in is the one built before: nothing was rebuilt for it
    assert containers_of_run(run_id) == [] and not (ws.remote_dir / "runs" / run_id).exists()


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.sshd
def test_a_workload_file_and_its_data_folder_reach_an_ssh_host(tmp_path: Path) -> None:
    from orchestrate.testing.sshd import start_sshd

    image = build_cpu_image(tmp_path / "image-cpu.log")
    server = start_sshd(tmp_path / "sshd")
    ws = Workspace(tmp_path / "ws")
    data = tiny_mlp_data(tmp_path / "mydata")
    run_id = "20260101T000000Z-plg1"
    try:
        extra = ["--workload-file", str(EXAMPLE), "--data-dir", str(data), "--backends", "jax", "--image", image, *TINY]
        done = orchestrate(*ssh_run_args(server, ws, run_id, *extra))
    finally:
        server.stop()
        remove_containers_of_run(run_id)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"data         {data}: 2 file(s)" in done.stdout  # the plan says what is carried
    prepare = next(stage for stage in ws.run_record(run_id).stages if stage.name == "prepare")
    assert "payload 3 file(s)" in prepare.detail  # the workload file and the data folder's two, in one archive
    meta = _metadata(ws.run_logs("ssh", run_id), "tiny_mlp_jax")  # no _synthetic: it trained on the carried file
    assert meta.status == "complete" and meta.plugin is not None and meta.plugin.sha256 == sha256_of(EXAMPLE)
    assert (meta.data.source, meta.data.files, meta.data.train_samples) == ("real", [{"name": "tiny_mlp.npz"}], 500)
    carried = EXAMPLE.stat().st_size + sum(f.stat().st_size for f in data.rglob("*") if f.is_file())
    assert meta.run_spec is not None and (meta.run_spec.payload_files, meta.run_spec.payload_bytes) == (3, carried)
    assert not (ws.remote_dir / "runs" / run_id).exists()  # the carried folder went with the run's other files


def test_a_bad_workload_file_stops_the_run_before_anything_launches(tmp_path: Path) -> None:
    bad = tmp_path / "broken_model.py"
    bad.write_text(EXAMPLE.read_text().replace("keras.Input(shape=(32,))", "keras.Input(shape=(33,))"))
    ws = Workspace(tmp_path)
    done = orchestrate(*_local_args(ws, "20260101T000000Z-plg2", "--workload-file", str(bad), "--backends", "jax"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert (
        done.stderr.strip().splitlines() == [done.stderr.strip().splitlines()[0]]
        and "broken_model.py: one training step failed" in done.stderr
    )
    assert not ws.ledger.exists() and not ws.remote_dir.exists() and not ws.logs.exists()


def test_a_workload_file_that_is_not_one_is_refused_without_importing_anything(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    bad = tmp_path / "mine.py"
    bad.write_text("import keras\nSPEC = make_spec()\n")
    done = orchestrate(*_local_args(ws, "20260101T000000Z-plg3", "--workload-file", str(bad), "--dry-run"))
    assert done.returncode == 2 and "mine.py: SPEC = WorkloadSpec(...) has no name=" in done.stderr, done.stderr


def test_fanout_children_get_the_workload_file_by_its_absolute_path(tmp_path: Path) -> None:
    os.chdir(ROOT)  # the relative path the user typed, from the checkout
    args = build_parser().parse_args(
        ["run", "--profiles", "local,ssh", "--workload-file", "examples/workloads/tiny_mlp.py"]
    )
    request = request_of(args)
    assert isinstance(request, Fanout)
    child = request.child("local", request.options)
    argv = child.argv()
    assert argv[argv.index("--workload-file") + 1] == str(EXAMPLE)
    assert request_of(build_parser().parse_args(["run", *argv])) == AttachedRun("local", request.options)


def _observation(workload: str, machine: str, throughput: float, code: str = "", samples: int = 1000) -> Observation:
    steady = samples / throughput
    return Observation(
        workload, "jax", machine, 64, "measured", f"{workload}|{machine}", "", f"measured {machine}-jax", samples,
        3, steady + 2.0, steady, 3 * steady + 2.0, code=code,
    )  # fmt: skip


def test_the_estimate_scales_a_plugins_own_runs_by_the_builtins_measured_ratio() -> None:
    pool = [
        _observation("tiny_mlp", "h100", 5000.0, code="abc"),
        _observation("tiny_mlp", "h100", 5000.0, code="abc"),
        _observation("tiny_mlp", "l4", 100.0, code="old"),  # another version of the file: not its basis
        *(_observation(w, "h100", 1000.0) for w in ("mnist_mlp", "mnist_cnn", "imdb_fasttext")),
        _observation("mnist_mlp", "h200", 1100.0),
        _observation("mnist_cnn", "h200", 1300.0),
        _observation("imdb_fasttext", "h200", 1200.0),
    ]
    target = Target("tiny_mlp", "jax", "h200", 64, 1000, 3)
    found = scaled_by_builtins(target, pool, code="abc")
    assert found is not None
    # 2 s of compilation, then 3 epochs of 1000 samples at 5000/s x the median ratio 1.2 (range 1.1 to 1.3)
    assert math.isclose(found.seconds, 2.0 + 3000 / (5000 * 1.2))
    assert math.isclose(found.low, 2.0 + 3000 / (5000 * 1.3)) and math.isclose(found.high, 2.0 + 3000 / (5000 * 1.1))
    assert "from tiny_mlp's 2 runs of 1,000 samples on h100, scaled x1.20" in found.where
    assert "3 built-in workload x backend pairs measured on both (x1.10 to x1.30: the range)" in found.where
    assert scaled_by_builtins(replace_machine(target, "t4"), pool, code="abc") is None  # no built-in pair with t4
    # one pair has no spread of its own: the backtest's cross-machine range stands in, and the estimate says so
    one_pair = [o for o in pool if o.workload != "mnist_cnn" and o.workload != "imdb_fasttext"]
    band = Band(0.5, 2.0, 40)
    lone = scaled_by_builtins(target, one_pair, code="abc", one_pair_band=band)
    assert lone is not None and math.isclose(lone.seconds, 2.0 + 3000 / (5000 * 1.1))
    assert math.isclose(lone.low, lone.seconds * 0.5) and math.isclose(lone.high, lone.seconds * 2.0)
    assert "one pair, no spread of its own: the range is the backtest's for scaling between machines" in lone.where
    unbanded = scaled_by_builtins(target, one_pair, code="abc")
    assert unbanded is not None and unbanded.low == unbanded.high and "no range" in unbanded.where


def replace_machine(target: Target, machine: str) -> Target:
    return Target(target.workload, target.backend, machine, target.batch, target.samples, target.epochs)
