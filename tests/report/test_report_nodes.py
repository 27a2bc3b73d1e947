"""Runs across nodes (`orchestrate run --nodes N`) in the records and the report: the job's record beside a run's
logs (its all-reduce check and set-up) read as the run's cluster, and the table of speed-up and cost per epoch
against one node, from synthetic log folders laid out as a Slurm job writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from records.catalog import Price, Profile
from records.loading import load_runs, read_cluster
from report.scaling import node_price, node_table, scaling_table
from tests.report.report_helpers import write_run

REPEATS = 4
PROFILE = Profile(
    name="hpc-cpu",
    provider="slurm",
    machine_type=None,
    on_demand=Price(0.36, "2026-11-01", "centre rate sheet"),
    extra={"login": "me@login", "partition": "cpu", "shared_dir": "/scratch"},
)


def _write(root: Path, steady: float, nodes: int = 1, source: str = "real") -> None:
    """REPEATS repeats on `nodes` nodes (one process each); several nodes with the job's record beside each."""
    for i in range(REPEATS):
        jitter = 1 + (i - (REPEATS - 1) / 2) / 100
        path = write_run(
            root, platform="hpc-cpu", run_id=f"20260101T00000{nodes}Z-n{nodes}{i:02d}", elapsed=(9.0, steady * jitter,
            steady * jitter), source=source, repeat=1,
        )  # fmt: skip
        if nodes > 1:
            _job_record(path.parent / "orchestrate", "mnist_mlp_jax.r01", nodes)
            meta = json.loads(path.with_suffix(".json").read_text())  # rank 0 gathered every process's epochs
            late = [steady * jitter * 1.1] * 2
            meta["distribution"] = {"process_epoch_s": [[9.0, *[steady * jitter] * 2], [9.5, *late]]}
            path.with_suffix(".json").write_text(json.dumps(meta))


def _job_record(folder: Path, stem: str, nodes: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    hosts = [f"n{index}" for index in range(1, nodes + 1)]
    check = {
        "processes": nodes, "nodes": nodes, "processes_per_node": 1, "hosts": hosts, "backend": "gloo",
        "bytes": 2**26, "bus_gbps": 1.17, "interconnect": {"interface": "eth0", "link_mbps": 25000,
        "infiniband": [], "nccl_network": None},
    }  # fmt: skip
    (folder / f"{stem}.allreduce.json").write_text(json.dumps(check))
    setup = {"nodes": nodes, "attempt": 1, "image": [100.0, 103.5], "check": [103.5, 110.0]}
    (folder / f"{stem}.setup.json").write_text(json.dumps(setup))


def test_a_runs_job_record_is_its_cluster_whatever_its_data(tmp_path: Path) -> None:
    _write(tmp_path, 2.0, nodes=2, source="synthetic")  # the runner's `_synthetic` file name, the job's item stem
    runs = load_runs(tmp_path).runs
    cluster = runs[0].cluster
    assert cluster is not None and (cluster.nodes, cluster.processes, cluster.per_node) == (2, 2, 1)
    assert cluster.hosts == ("n1", "n2") and cluster.interconnect == "eth0 (25 Gb/s)"
    assert (cluster.setup_s, cluster.check_s) == (3.5, 6.5)
    assert "2 nodes x 1 process" in (runs[0].compile_settings or "")  # never pooled with one node's runs
    assert read_cluster(tmp_path / "elsewhere.csv") is None


def test_speedup_and_cost_per_epoch_against_one_node(tmp_path: Path) -> None:
    _write(tmp_path, 2.0)
    _write(tmp_path, 1.25, nodes=2)
    table = node_table(load_runs(tmp_path).runs, {"hpc-cpu": PROFILE}).set_index("nodes")
    one, two = table.loc[1], table.loc[2]
    assert one["speed-up vs 1 node"] == "1.00x (base)" and one["processes"] == 1
    assert one["cost per epoch"] == f"${0.36 * 2.0 / 3600:.5f}"
    assert two["speed-up vs 1 node"] == "1.60x" and two["efficiency"] == "80%" and two["processes"] == 2
    assert two["verdict"].startswith("the 2-node run is 1.60x faster than the 1-node run (95% CI")
    assert two["cost per epoch"] == f"${0.36 * 2 * 1.25 / 3600:.5f}"
    assert two["cost per epoch vs 1 node"] == "1.25x"  # two nodes' price for 1/1.6 of the time
    assert (two["all-reduce bus GB/s"], two["interconnect"], two["set-up s"]) == ("1.17", "eth0 (25 Gb/s)", "3.5")
    assert two["each process's steady epoch s"] == "1.250–1.375" and one["each process's steady epoch s"] == ""
    # the one-machine scaling table leaves the runs across nodes out (one process each: no one-device repeats)
    assert set(scaling_table(load_runs(tmp_path).runs)["devices"]) <= {1}


def test_no_one_node_run_and_no_price_say_so(tmp_path: Path) -> None:
    _write(tmp_path, 1.25, nodes=2)
    table = node_table(load_runs(tmp_path).runs, {})
    assert list(table["speed-up vs 1 node"]) == ["no 1-node run"] and list(table["cost per epoch"]) == ["n/a"]
    assert node_table(load_runs(tmp_path / "none").runs).empty
    assert isinstance(table, pd.DataFrame)


def test_a_gpu_hour_price_is_a_nodes_gpus() -> None:
    gpus = Profile(
        name="hpc-a100", provider="slurm", machine_type=None, accelerator="a100", accelerator_count=4,
        on_demand=Price(1.5, "2026-11-01", "x"), extra={"price_unit": "gpu-hour"},
    )  # fmt: skip
    assert node_price(gpus) == 6.0 and node_price(PROFILE) == 0.36 and node_price(None) is None
