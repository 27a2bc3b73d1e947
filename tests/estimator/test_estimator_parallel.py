"""The estimate on N GPUs or N nodes that nothing measured at that scale: a one-device estimate sped up by the
nearest workload kind's measured speed-up, and saying so; from hand-made observations, and from runs across two
nodes laid out as a Slurm job writes them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from estimator.model import Observation, Target, shaped
from estimator.parallel import Scale, measured_speedups, nearest, scaled
from estimator.suite import Shape, estimate_runs
from tests.report.report_helpers import write_run


def observation(workload: str, steady: float, devices: int = 1, nodes: int = 1, batch: int = 128) -> Observation:
    machine = shaped("h200", devices, nodes)
    return Observation(
        workload=workload, backend="jax", machine=machine, batch=batch, origin="measured",
        group=f"{workload}|{machine}|{batch}", variant="", where=f"measured {machine}", samples=6000, epochs=3,
        first_s=steady + 5, steady_s=steady, total_s=steady * 3 + 5, devices=devices, nodes=nodes,
        base_machine="h200",
    )  # fmt: skip


POOL = [
    observation("mnist_cnn", 2.0),
    observation("mnist_cnn", 1.25, devices=2, batch=256),  # per-device: x1.6
    observation("cifar10_cnn", 4.0),
    observation("cifar10_cnn", 2.0, devices=2, batch=256),  # per-device: x2.0
    observation("imdb_bidirectional_lstm", 3.0),
    observation("imdb_bidirectional_lstm", 3.0, devices=2, batch=256),  # per-device: x1.0
    observation("mnist_mlp", 1.0),
    observation("mnist_mlp", 0.8, devices=1, nodes=2),  # same global batch across 2 nodes: x1.25
]


def test_each_multi_device_run_against_its_one_device_base() -> None:
    found = {(s.workload, s.scale, s.per_device): round(s.value, 3) for s in measured_speedups(POOL)}
    assert found == {
        ("mnist_cnn", Scale(2), True): 1.6,
        ("cifar10_cnn", Scale(2), True): 2.0,
        ("imdb_bidirectional_lstm", Scale(2), True): 1.0,
        ("mnist_mlp", Scale(1, 2), False): 1.25,
    }


def test_the_nearest_kind_at_that_scale_and_what_it_says() -> None:
    speedups = measured_speedups(POOL)
    chosen = nearest("resnet50", "h200", Scale(2), True, speedups)
    assert chosen is not None and (chosen.value, chosen.low, chosen.high) == (pytest.approx(1.8), 1.6, 2.0)
    assert chosen.where.startswith("x1.80, the median measured speed-up of convolutional workloads at 2 devices")
    assert "(x1.60 to x2.00: mnist_cnn [jax] on h200, cifar10_cnn [jax] on h200)" in chosen.where
    recurrent = nearest("lstm_text_generation", "h200", Scale(2), True, speedups)
    assert recurrent is not None and recurrent.value == pytest.approx(1.0)
    # 4 devices never measured: the efficiency measured at 2 (0.9 for convolutional) assumed at 4
    four = nearest("resnet50", "h200", Scale(4), True, speedups)
    assert four is not None and four.value == pytest.approx(3.6)
    assert four.where.endswith("nothing measured at 4 devices: the efficiency measured at 2 devices assumed")
    # no transformer measured: every kind's, said so
    every = nearest("gpt_nietzsche", "h200", Scale(2), True, speedups)
    assert every is not None and "every kind measured (no transformer measured so)" in every.where


def test_nodes_are_scaled_only_from_runs_across_nodes() -> None:
    speedups = measured_speedups(POOL)
    assert nearest("mnist_cnn", "h200", Scale(1, 4), True, speedups) is None  # no per-device run across nodes
    across = nearest("mnist_cnn", "h200", Scale(1, 2), False, speedups)
    assert across is not None and across.value == pytest.approx(1.25)
    assert nearest("mnist_cnn", "cpu:c2", Scale(1, 2), False, speedups) is None  # a GPU's scaling is no CPU's


class Estimate:
    """The suite's one-device estimate, as `scaled` calls it: steady epochs at 2 s each over `target.speedup`."""

    def __init__(self) -> None:
        self.asked: list[Target] = []

    def __call__(self, target: Target) -> object:
        self.asked.append(target)
        seconds = 10 + 3 * 2.0 / target.speedup
        return type("Item", (), {"seconds": seconds, "low": seconds * 0.8, "high": seconds * 1.5,
                                 "basis": "measured", "where": "measured local-jax"})()  # fmt: skip


def test_a_scaled_estimate_speeds_up_the_steady_epochs_of_one_device() -> None:
    estimate = Estimate()
    target = Target("resnet50", "jax", "h200x2", 256, 6000, 3)
    found = scaled(target, "h200", Scale(2), True, POOL, estimate)
    assert not isinstance(found, str)
    assert [(t.machine, t.batch) for t in estimate.asked] == [("h200", 128)] * 3  # one device, its own batch
    assert found.seconds == pytest.approx(10 + 6 / 1.8)
    assert (found.low, found.high) == (pytest.approx((10 + 6 / 2.0) * 0.8), pytest.approx((10 + 6 / 1.6) * 1.5))
    assert found.basis == "measured, scaled for 2 devices" and found.where.startswith("measured local-jax; x1.80")
    assert scaled(replace(target, batch=128), "h200", Scale(2), False, POOL, Estimate()) == (
        "no run measured on several devices (same-global) to scale by"
    )


def test_a_dry_runs_estimate_on_two_nodes_from_runs_across_two_nodes(tmp_path: Path) -> None:
    """mnist_mlp measured on one node and on two; mnist_cnn on one node only: its two-node estimate is scaled by
    mnist_mlp's speed-up (the only kind measured across nodes) and says so."""
    for i in range(3):
        for workload in ("mnist_mlp", "mnist_cnn"):
            write_run(tmp_path, platform="hpc-cpu", run_id=f"20260101T00000{i}Z-one{i}", workload=workload,
                      elapsed=(9.0, 2.0, 2.0))  # fmt: skip
        path = write_run(tmp_path, platform="hpc-cpu", run_id=f"20260101T00001{i}Z-two{i}", elapsed=(9.0, 1.6, 1.6))
        _job_record(path.parent / "orchestrate", "mnist_mlp_jax")
    items = [("mnist_mlp", "jax"), ("mnist_cnn", "jax")]
    shape = Shape(nodes=2)
    mlp, cnn = estimate_runs(shape.machine("cpu"), "quick", items, tmp_path, shape, base_machine="cpu")
    assert mlp.basis == "measured" and "2 nodes x 1 process" in mlp.where  # measured at that scale itself
    assert cnn.basis == "measured, scaled for 2 nodes x 1 device"
    assert "x1.25, the median measured speed-up of every kind measured (no convolutional measured so)" in cnn.where


def _job_record(folder: Path, stem: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    check = {"processes": 2, "nodes": 2, "processes_per_node": 1, "hosts": ["n1", "n2"], "backend": "gloo",
             "bus_gbps": 1.0, "interconnect": {}}  # fmt: skip
    (folder / f"{stem}.allreduce.json").write_text(json.dumps(check))
