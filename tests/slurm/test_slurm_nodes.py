"""Runs across the two nodes of the real test cluster (tests/slurm/cluster.py: two slurmd on loopback), in the CPU
image with docker: the image made present on each node, the all-reduce check over gloo, the training across both
nodes against one process of the same global batch (native PyTorch, and Keras on JAX), a node set DOWN mid-job
(one shared run), a job wider than its partition refused before sbatch, and kill -9 of the orchestrator then collect
and sweep."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from benchmarks.logs import read_epoch_log
from records.ledger import read_runs
from tests.orchestrate.orchestrate_helpers import ROOT, Workspace, wait_for
from tests.slurm.cluster import NODES
from tests.slurm.conftest import PRICE_PER_NODE_HOUR, PROFILE, SECOND_PROFILE, SlurmSite
from tests.slurm.helpers import orchestrate, run_args, run_folder, slurm_env
from tests.support.datasets import prefill_keras_cache
from tests.support.docker import build_cpu_image, containers_of_run, remove_containers_of_run

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.sshd]


IMAGE = "keras-cloud-bench-nodes-test:cpu"  # its own tag: this checkout's runner, whoever builds the shared one


@pytest.fixture(scope="module")
def image(slurm_site: SlurmSite, tmp_path_factory: pytest.TempPathFactory) -> str:
    prefill_keras_cache(slurm_site.shared_dir / "cache" / "keras")
    return build_cpu_image(tmp_path_factory.mktemp("image") / "image-cpu.log", IMAGE)


TWO_NODES = "20260101T000000Z-sln2"
# A native PyTorch workload of one's own (torch-native: DistributedDataParallel, gloo between CPU processes), on the
# synthetic data of its declared shapes: small enough for two CPU processes in seconds.
NATIVE_FILE = ROOT / "examples" / "workloads" / "tiny_mlp_torch.py"
NATIVE = ("--workload-file", str(NATIVE_FILE), "--backends", "torch-native")
STEM = "tiny_mlp_torch_torch-native"
EPOCHS = "3"
LOSS_TOLERANCE = 1e-4  # relative, per epoch: the same gradient, summed by the processes in another order


def processes_of(site: SlurmSite, run_id: str) -> list[str]:
    """This machine's processes that belong to the run: its job script's steps, srun, a container's client."""
    folder = str(run_folder(site, run_id))
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True, check=True).stdout
    return [line.strip() for line in out.splitlines() if folder in line or f"{run_id}-" in line]


@dataclass
class TwoNodeRun:
    ws: Workspace
    code: int
    out: str
    queued_again: list[str]  # the job's state once its first attempt had stopped on both nodes


@pytest.fixture(scope="module")
def two_node_run(slurm_site: SlurmSite, image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoNodeRun]:
    """One run of two nodes, which the tests share: its second node is set DOWN once a training container runs on
    each node; once the first attempt has stopped on both (its containers and processes gone, the job back in the
    queue), the node is resumed and the requeued task trains again to the end."""
    ws = Workspace(tmp_path_factory.mktemp("two-nodes"))
    cluster, down = slurm_site.cluster, slurm_site.cluster.nodes[-1]
    args = run_args(slurm_site, ws, TWO_NODES, *NATIVE, "--nodes", "2", "--epochs", EPOCHS, "--image", image)
    output = ws.root / "out.txt"
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrate", *args],
        cwd=ROOT, env=slurm_env(slurm_site), stdout=output.open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        training = lambda: len([c for c in containers_of_run(TWO_NODES) if "-train" in c]) == NODES  # noqa: E731
        wait_for(training, 180, "a training container on each node")
        cluster.set_node(down, "DOWN")
        wait_for(lambda: not containers_of_run(TWO_NODES), 60, "the containers of the first attempt to go")
        wait_for(lambda: not processes_of(slurm_site, TWO_NODES), 60, "the processes of the first attempt to go")
        state = lambda: cluster.command("squeue", "-h", "-n", f"kcb-{TWO_NODES}", "-o", "%T").stdout.split()  # noqa: E731
        wait_for(lambda: state() == ["PENDING"], 60, "the job to wait in the queue for two nodes again")
        queued_again = state()
        cluster.set_node(down, "RESUME")
        code = process.wait(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
        cluster.set_node(down, "RESUME", check=False)  # for the next tests, whatever failed
        remove_containers_of_run(TWO_NODES)
    yield TwoNodeRun(ws, code, output.read_text(), queued_again)


def test_a_two_node_run_checks_the_network_then_trains_as_one_process_of_the_same_global_batch(
    slurm_site: SlurmSite, two_node_run: TwoNodeRun, tmp_path
) -> None:
    assert two_node_run.code == 0, two_node_run.out
    run_logs = two_node_run.ws.run_logs(PROFILE, TWO_NODES)
    orchestrator = run_logs / "orchestrate"
    check = json.loads((orchestrator / f"{STEM}.allreduce.json").read_text())
    assert (check["processes"], check["nodes"], check["backend"]) == (2, NODES, "gloo")
    assert sorted(check["hosts"]) == slurm_site.cluster.nodes and check["bus_gbps"] > 0
    assert "all-reduce check: 2 processes on 2 nodes" in (orchestrator / f"{STEM}.console.log").read_text()
    record = read_runs(two_node_run.ws.ledger)[TWO_NODES]
    assert {stage.name for stage in record.stages} >= {"image", "check"} and record.nodes == 2

    two = read_epoch_log(run_logs / f"{STEM}_synthetic.csv")  # rank 0 writes the run's files
    meta = two.metadata
    assert meta is not None and meta.status == "complete" and len(two.epochs) == int(EPOCHS)
    assert (meta.distribution or {})["devices"] == 2
    per_process = (meta.distribution or {})["process_epoch_s"]  # every process's epoch times, as rank 0 gathered
    assert len(per_process) == 2 and all(len(times) == int(EPOCHS) for times in per_process)
    # the same workload, suite and seed as one process here, on the same global batch (the published one)
    one_out = tmp_path / "one"
    one = subprocess.run(
        [sys.executable, "-m", "benchmarks", "run", "--workload-file", str(NATIVE_FILE), "--backend", "torch-native",
         "--suite", "quick", "--epochs", EPOCHS, "--allow-synthetic", "--platform", "one", "--run-id",
         "20260101T000000Z-one1", "--out", str(one_out)],
        cwd=ROOT, env=slurm_env(slurm_site), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert one.returncode == 0, one.stdout + one.stderr
    alone = read_epoch_log(one_out / "one" / "20260101T000000Z-one1" / f"{STEM}_synthetic.csv")
    assert alone.metadata is not None and alone.metadata.data.train_samples == meta.data.train_samples
    for together, single in zip(two.epochs, alone.epochs, strict=True):
        assert together.loss == pytest.approx(single.loss, rel=LOSS_TOLERANCE), (two.epochs, alone.epochs)


def test_a_node_set_down_mid_job_requeues_it_with_nothing_left_behind(
    slurm_site: SlurmSite, two_node_run: TwoNodeRun
) -> None:
    assert two_node_run.code == 0, two_node_run.out
    # the fixture saw the first attempt's containers and processes go from both nodes, and the job queued again
    assert two_node_run.queued_again == ["PENDING"]
    assert "tiny_mlp_torch [torch-native]: requeued by the scheduler (a preemption)" in two_node_run.out
    record = read_runs(two_node_run.ws.ledger)[TWO_NODES]
    assert record.preemptions == 1 and [(i.status, i.attempt) for i in record.latest_items()] == [("complete", 2)]
    for attempt in record.instances:  # each attempt billed as two nodes
        assert attempt.cost_usd == pytest.approx((attempt.billed_seconds or 0) * 2 * PRICE_PER_NODE_HOUR / 3600)
    assert len(record.instances) == 2 and record.instances[0].preempted
    assert slurm_site.queue() == [] and containers_of_run(TWO_NODES) == [] and processes_of(slurm_site, TWO_NODES) == []
    assert not run_folder(slurm_site, TWO_NODES).exists()


KERAS_FILE = ROOT / "examples" / "workloads" / "tiny_mlp.py"  # a Keras model of one's own, on its synthetic data
JAX_NODES = "20260101T000000Z-slnj"


def test_keras_on_jax_trains_across_the_two_nodes_as_one_process_of_the_same_global_batch(
    slurm_site: SlurmSite, image: str, tmp_path
) -> None:
    """Each node's process joins JAX's distributed runtime at the first node's address (gloo between them), and the
    job trains the steps one process takes on the same global batch."""
    ws = Workspace(tmp_path)
    args = run_args(slurm_site, ws, JAX_NODES, "--workload-file", str(KERAS_FILE), "--backends", "jax")
    try:
        done = orchestrate(slurm_site, *args, "--nodes", "2", "--epochs", "2", "--image", image)
    finally:
        remove_containers_of_run(JAX_NODES)
    assert done.returncode == 0, done.stdout + done.stderr
    two = read_epoch_log(ws.run_logs(PROFILE, JAX_NODES) / "tiny_mlp_jax_synthetic.csv")
    job = (two.metadata.distribution or {}) if two.metadata else {}
    assert (job["processes"], job["nodes"], job["collectives"]) == (2, NODES, "gloo")
    assert sorted(job["process_nodes"]) == slurm_site.cluster.nodes
    one = subprocess.run(
        [sys.executable, "-m", "benchmarks", "run", "--workload-file", str(KERAS_FILE), "--backend", "jax",
         "--suite", "quick", "--epochs", "2", "--allow-synthetic", "--platform", "one", "--run-id",
         "20260101T000000Z-onej", "--out", str(tmp_path / "one")],
        cwd=ROOT, env=slurm_env(slurm_site), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert one.returncode == 0, one.stdout + one.stderr
    alone = read_epoch_log(tmp_path / "one" / "one" / "20260101T000000Z-onej" / "tiny_mlp_jax_synthetic.csv")
    assert len(two.epochs) == len(alone.epochs) == 2
    for together, single in zip(two.epochs, alone.epochs, strict=True):
        assert together.loss == pytest.approx(single.loss, rel=LOSS_TOLERANCE), (two.epochs, alone.epochs)
    assert slurm_site.queue() == [] and containers_of_run(JAX_NODES) == []


def test_a_job_wider_than_its_partition_is_refused_before_sbatch(slurm_site: SlurmSite, tmp_path) -> None:
    ws = Workspace(tmp_path)
    args = run_args(slurm_site, ws, "20260101T000000Z-slnw", "--workloads", "resnet50", "--backends", "torch-native")
    args[args.index(PROFILE)] = SECOND_PROFILE  # its partition holds one node
    done = orchestrate(slurm_site, *args, "--nodes", "2", "--image", "kcb-test/none:latest")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == "error: --nodes 2: partition 'debug2' of kcb-sshd has 1 node"
    assert slurm_site.queue() == [] and not ws.ledger.exists()


KILLED_RUN = "20260101T000000Z-slnk"


def test_a_killed_orchestrator_leaves_nothing_on_either_node_after_sweep(
    slurm_site: SlurmSite, image: str, tmp_path
) -> None:
    ws = Workspace(tmp_path)
    args = run_args(slurm_site, ws, KILLED_RUN, *NATIVE, "--nodes", "2")
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrate", *args, "--image", image, "--epochs", "1000"],
        cwd=ROOT, env=slurm_env(slurm_site), stdout=(tmp_path / "out.txt").open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    setting = f"ssh_config={slurm_site.server.config_path}"
    try:
        training = lambda: len([c for c in containers_of_run(KILLED_RUN) if "-train" in c]) == NODES  # noqa: E731
        wait_for(training, 180, "a training container on each node")
        process.kill()
        process.wait(timeout=10)
        collected = orchestrate(
            slurm_site, "collect", KILLED_RUN, "--ledger", str(ws.ledger), "--provider-setting", setting
        )
        assert collected.returncode == 0, collected.stdout + collected.stderr
        assert "still has 1 of 1 tasks queued or running" in collected.stdout  # a running job is left alone
        swept = orchestrate(
            slurm_site, "sweep", "--ledger", str(ws.ledger), "--provider", "slurm", "--provider-setting",
            f"slurm:{setting}",
        )  # fmt: skip
        assert swept.returncode == 0, swept.stdout + swept.stderr
        wait_for(lambda: not containers_of_run(KILLED_RUN), 60, "the containers on both nodes to go")
        wait_for(lambda: not processes_of(slurm_site, KILLED_RUN), 60, "the processes on both nodes to go")
    finally:
        if process.poll() is None:
            process.kill()
        remove_containers_of_run(KILLED_RUN)
    assert slurm_site.queue() == [] and not run_folder(slurm_site, KILLED_RUN).exists()
    record = read_runs(ws.ledger)[KILLED_RUN]
    assert record.final and record.nodes == 2
    job = record.instances[0]  # billed from submission to the sweep's cancel, as two nodes
    assert job.cost_usd == pytest.approx(job.billed_seconds * 2 * PRICE_PER_NODE_HOUR / 3600)
