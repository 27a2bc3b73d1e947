"""Process designs: start-up outside the runs, and runs of a shared process kept apart from fresh ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from report import designs, loading, today
from tests.report.report_helpers import write_run

LOGS = Path(__file__).resolve().parents[2] / "logs" / "reference"


def _repeat(root: Path, run_id: str, workload: str, index: int, span_s: int, steady: float, **kw: Any) -> None:
    """A complete repeat whose metadata spans `span_s` seconds, trained in a process of `workloads` workloads."""
    workloads = kw.pop("workloads", 1)
    write_run(
        root,
        platform="NVIDIA-H100",
        run_id=run_id,
        workload=workload,
        repeat=index,
        elapsed=(5.0, steady, steady),
        host_id=kw.pop("host", "host-a"),
        schema2={
            "started_at": "2026-01-01T00:00:00+00:00",
            "ended_at": f"2026-01-01T00:{span_s // 60:02d}:{span_s % 60:02d}+00:00",
            "repeat": {"group": run_id, "index": index},
            "process": {"position": 1, "workloads": workloads},
        },
    )


def _manifest(root: Path, name: str, entries: list[dict]) -> None:
    consoles = root / "NVIDIA-H100" / "console"
    consoles.mkdir(parents=True, exist_ok=True)
    (consoles / name).write_text(json.dumps(entries))


def _process(run_id: str, workloads: list[str], repeat: int, wall_s: float, returncode: int = 0) -> dict:
    one = {"workload": workloads[0]} if len(workloads) == 1 else {"workloads": workloads}
    return {"phase": "repeats", "run_id": run_id, "backend": "jax", "repeat": repeat, **one,
            "returncode": returncode, "wall_s": wall_s}  # fmt: skip


def test_start_up_is_the_process_wall_time_outside_its_runs_per_design(tmp_path: Path) -> None:
    _repeat(tmp_path, "gpu-repeats-a", "mnist_mlp", 1, 15, 0.5)
    _repeat(tmp_path, "gpu-repeats-a", "mnist_cnn", 1, 20, 0.7)
    _repeat(tmp_path, "gpu-repeats-a-round", "mnist_mlp", 1, 9, 0.6, workloads=2)
    _repeat(tmp_path, "gpu-repeats-a-round", "mnist_cnn", 1, 16, 0.8, workloads=2)
    _manifest(
        tmp_path,
        "x-part1-manifest.json",
        [
            _process("gpu-repeats-a", ["mnist_mlp"], 1, 21.5),
            _process("gpu-repeats-a", ["mnist_cnn"], 1, 26.0),
            _process("gpu-repeats-a-round", ["mnist_mlp", "mnist_cnn"], 1, 33.0),
        ],
    )
    result = designs.designs(tmp_path / "NVIDIA-H100")
    assert result["start_up"]["repeat"]["jax"] == {
        "processes": 2,
        "median_s": 6.2,
        "min_s": 6.0,
        "max_s": 6.5,
        "workloads_per_process": 1,
    }
    assert result["start_up"]["round"]["jax"]["median_s"] == 8.0
    assert result["start_up"]["round"]["jax"]["workloads_per_process"] == 2


def test_a_repeat_number_claimed_twice_or_a_run_longer_than_its_process_matches_no_process(tmp_path: Path) -> None:
    """Two calls on one machine between collections number their repeats alike, and collect renumbers the later
    runs: neither process can be told its run, so neither is measured; a stopped process is never measured."""
    _repeat(tmp_path, "gpu-repeats-c", "mnist_mlp", 5, 71, 0.5)
    _repeat(tmp_path, "gpu-repeats-c", "mnist_mlp", 6, 49, 0.5)
    _repeat(tmp_path, "gpu-repeats-c", "mnist_cnn", 5, 99, 0.7)
    _repeat(tmp_path, "gpu-repeats-c", "cifar10_cnn", 5, 20, 0.7)
    _manifest(
        tmp_path,
        "c-part1-manifest.json",
        [_process("gpu-repeats-c", ["mnist_mlp"], 5, 90.0), _process("gpu-repeats-c", ["mnist_cnn"], 5, 75.0)],
    )
    _manifest(
        tmp_path,
        "c-part2-manifest.json",
        [_process("gpu-repeats-c", ["mnist_mlp"], 5, 69.0), _process("gpu-repeats-c", ["cifar10_cnn"], 5, 30.0, -1)],
    )
    assert designs.designs(tmp_path / "NVIDIA-H100")["start_up"] == {}


def test_runs_of_a_shared_process_stand_apart_from_fresh_ones_everywhere(tmp_path: Path) -> None:
    for index, steady in enumerate((0.40, 0.45, 0.50), start=1):
        _repeat(tmp_path, "gpu-repeats-a", "mnist_mlp", index, 15, steady, host="host-a")
    _repeat(tmp_path, "gpu-repeats-b", "mnist_mlp", 1, 15, 0.48, host="host-b")
    _repeat(tmp_path, "gpu-repeats-b-round", "mnist_mlp", 1, 10, 0.60, host="host-b", workloads=9)
    [row] = designs.designs(tmp_path / "NVIDIA-H100")["shared_against_fresh"]
    assert row["shared_s"] == [0.6] and row["fresh_n"] == 4 and row["fresh_range_s"] == [0.4, 0.5]
    assert row["fresh_same_host_s"] == [0.48]
    assert row["inside_fresh_range"] is False and row["shared_over_fresh_median"] == 1.29
    # The GPU sections pool only the fresh processes' runs; the report's tables name the shared ones apart.
    measured, _ = today.measured_runs(tmp_path)
    assert sorted(measured["H100", "mnist_mlp", "jax"].steady) == [0.4, 0.45, 0.48, 0.5]
    # A suite trains its workloads in one process by design: its runs are not a round's and keep their name.
    write_run(tmp_path, run_id="20260101T000000Z-0001", schema2={"process": {"position": 2, "workloads": 3}})
    runs = loading.load_runs(tmp_path).runs
    labels = {r.config.name for r in runs}
    assert labels == {"NVIDIA-H100-jax", f"NVIDIA-H100-jax [{loading.SHARED_PROCESS_VARIANT}]", "local-jax"}


def test_the_committed_h100_runs_of_one_process_per_round_are_compared_not_pooled() -> None:
    result = designs.designs(LOGS / "NVIDIA-H100")
    assert result["defaults_compared"] >= 1
    assert result["start_up"]["repeat"]["jax"]["processes"] >= 10
    measured, _ = today.measured_runs(LOGS)
    for row in result["shared_against_fresh"]:
        assert len(measured["H100", row["workload"], row["backend"]].steady) == row["fresh_n"]


def test_a_missing_folder_is_a_bad_input(tmp_path: Path, capsys) -> None:
    assert designs.main([str(tmp_path / "nowhere")]) == 2
    assert "platform:" in capsys.readouterr().err
