"""Process designs: start-up outside the runs, and runs of a shared process kept apart from fresh ones."""

from __future__ import annotations

import functools
import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from campaign import designs, today
from records import loading
from tests.report.report_helpers import write_run

LOGS = Path(__file__).resolve().parents[2] / "logs" / "reference"


def _repeat(root: Path, run_id: str, workload: str, index: int, span_s: int, steady: float, **kw: Any) -> None:
    """A complete repeat whose metadata spans `span_s` seconds from `start` minutes past the hour, trained in a
    process of `workloads` workloads."""
    workloads = kw.pop("workloads", 1)
    started = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=kw.pop("start", 0))
    preloaded = {"preloaded": True} if kw.pop("preloaded", False) else {}
    if kw.pop("staged", False):
        preloaded = {"preloaded": True, "staged": True}
    score = kw.pop("score", None)
    fingerprint = {"fingerprint": _fingerprint(score)} if score is not None else {}
    write_run(
        root,
        platform="NVIDIA-H100",
        run_id=run_id,
        workload=workload,
        repeat=index,
        elapsed=(5.0, steady, steady),
        host_id=kw.pop("host", "host-a"),
        schema2={
            "started_at": started.isoformat(),
            "ended_at": (started + timedelta(seconds=span_s)).isoformat(),
            "repeat": {"group": run_id, "index": index},
            "process": {"position": 1, "workloads": workloads, **preloaded},
            **fingerprint,
        },
    )


def _fingerprint(score: float) -> dict:
    return {"device": "gpu", "backend": "jax", "host_single_thread_score": score,
            "host_single_thread_unit": "million loop iterations/s", "seconds": 0.5}  # fmt: skip


def _manifest(root: Path, name: str, entries: list[dict]) -> None:
    consoles = root / "NVIDIA-H100" / "console"
    consoles.mkdir(parents=True, exist_ok=True)
    (consoles / name).write_text(json.dumps(entries))


def _process(
    run_id: str,
    workloads: list[str],
    repeat: int,
    wall_s: float,
    returncode: int = 0,
    backend: str = "jax",
    design: str | None = None,
    epochs: int | None = None,
) -> dict:
    """A manifest entry; `design` as gpu_session records it since preloaded parents (earlier entries lack it), and
    `epochs` where the call trained fewer than the suite's."""
    one = {"workload": workloads[0]} if len(workloads) == 1 else {"workloads": workloads}
    named = {"design": design} if design else {}
    trimmed = {"epochs": epochs} if epochs else {}
    return {"phase": "repeats", "run_id": run_id, "backend": backend, "repeat": repeat, **one, **named, **trimmed,
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
    assert labels == {"NVIDIA-H100-jax", f"NVIDIA-H100-jax [{loading.ROUND_VARIANT}]", "local-jax"}


def test_runs_forked_from_a_preloaded_parent_stand_apart_from_fresh_and_round_ones(tmp_path: Path) -> None:
    for index, steady in enumerate((0.40, 0.45, 0.50), start=1):
        _repeat(tmp_path, "gpu-repeats-a", "mnist_mlp", index, 15, steady, host="host-a")
    _repeat(tmp_path, "gpu-repeats-b", "mnist_mlp", 1, 15, 0.48, host="host-b")
    _repeat(tmp_path, "gpu-repeats-b-round", "mnist_mlp", 1, 10, 0.60, host="host-b", workloads=9)
    _repeat(tmp_path, "gpu-repeats-b-pre", "mnist_mlp", 1, 12, 0.47, host="host-b", preloaded=True)
    _repeat(tmp_path, "gpu-repeats-b-pre", "mnist_mlp", 2, 12, 0.52, host="host-b", preloaded=True)
    runs = designs.timed_repeats(tmp_path / "NVIDIA-H100")
    assert Counter(r.design for r in runs) == {"repeat": 4, "round": 1, "preloaded": 2}
    [row] = designs.shared_against_fresh(runs, "preloaded", "preloaded")
    assert row["preloaded_s"] == [0.47, 0.52] and "shared_s" not in row
    assert row["fresh_n"] == 4 and row["fresh_range_s"] == [0.4, 0.5] and row["fresh_same_host_s"] == [0.48]
    assert row["preloaded_over_fresh_median"] == 1.06 and row["inside_fresh_range"] is False  # 0.52 > 0.50
    result = designs.designs(tmp_path / "NVIDIA-H100")
    assert result["preloaded_against_fresh"] == [row]
    assert (result["preloaded_slower_than_fresh_median"], result["preloaded_outside_fresh_range"]) == (1, 1)
    [shared] = result["shared_against_fresh"]  # the round's run meets the same four fresh runs, not the preloaded
    assert shared["shared_s"] == [0.6] and shared["fresh_n"] == 4
    # The GPU sections pool only the fresh processes' runs; the tables name each other design apart.
    measured, _ = today.measured_runs(tmp_path)
    assert sorted(measured["H100", "mnist_mlp", "jax"].steady) == [0.4, 0.45, 0.48, 0.5]
    labels = Counter(r.config.name for r in loading.load_runs(tmp_path).runs)
    assert labels == {
        "NVIDIA-H100-jax": 4,
        "NVIDIA-H100-jax [one process per round]": 1,
        "NVIDIA-H100-jax [forked from a preloaded parent]": 2,
    }


def test_the_committed_h100_runs_of_one_process_per_round_are_compared_not_pooled() -> None:
    result = designs.designs(LOGS / "NVIDIA-H100")
    assert result["defaults_compared"] >= 1
    assert result["start_up"]["repeat"]["jax"]["processes"] >= 10
    measured, _ = today.measured_runs(LOGS)
    for row in result["shared_against_fresh"]:
        assert len(measured["H100", row["workload"], row["backend"]].steady) == row["fresh_n"]


def test_a_shared_run_is_set_beside_fresh_runs_of_hosts_about_as_fast(tmp_path: Path) -> None:
    """A slow host slows the host-bound defaults whatever the design: the fresh runs whose host scored within
    SIMILAR_HOST of the shared run's host are the like-for-like comparison."""
    for index, (steady, score) in enumerate(((0.40, 16.0), (0.42, 15.0), (0.58, 8.5), (0.62, 7.5)), start=1):
        _repeat(tmp_path, "gpu-repeats-a", "mnist_mlp", index, 15, steady, host=f"host-{index}", score=score)
    _repeat(tmp_path, "gpu-repeats-b-round", "mnist_mlp", 1, 10, 0.60, host="host-9", score=8.0, workloads=9)
    [row] = designs.designs(tmp_path / "NVIDIA-H100")["shared_against_fresh"]
    assert row["fresh_alike_host_s"] == [0.58, 0.62]
    assert row["shared_over_alike_host_median"] == 1.0 and row["shared_over_fresh_median"] == 1.2


def _two_fresh_rounds(run_id: str) -> list[dict]:
    """mnist_mlp and mnist_cnn in a fresh process each, twice: 30 and 40 s cold, then 20 and 30 s warm."""
    walls = {("mnist_mlp", 1): 30.0, ("mnist_cnn", 1): 40.0, ("mnist_mlp", 2): 20.0, ("mnist_cnn", 2): 30.0}
    return [_process(run_id, [workload], repeat, wall) for (workload, repeat), wall in walls.items()]


def test_a_round_process_meets_a_warm_cache_only_where_its_workloads_ran_on_that_machine_before(
    tmp_path: Path,
) -> None:
    both = ["mnist_mlp", "mnist_cnn"]
    _manifest(
        tmp_path,
        "m1-part1-manifest.json",
        [*_two_fresh_rounds("gpu-repeats-m1"),
         _process("gpu-repeats-m1-round", both, 1, 36.0), _process("gpu-repeats-m1-round", both, 1, 90.0, 0, "torch")],
    )  # fmt: skip
    _manifest(
        tmp_path,
        "m2-part1-manifest.json",
        [_process("gpu-repeats-m2-round", both, 1, 44.0), _process("gpu-repeats-m2-round", both, 2, 5.0, -1),
         _process("gpu-repeats-m2-round", ["mnist_cnn"], 3, 9.0), _process("gpu-repeats-m2-round", both, 4, 33.0)],
    )  # fmt: skip
    _manifest(
        tmp_path,
        "m3-part1-manifest.json",
        [_process("gpu-repeats-m3", ["mnist_mlp"], 1, 30.0), _process("gpu-repeats-m3-round", both, 1, 38.0)],
    )
    processes = designs.manifest_processes(tmp_path / "NVIDIA-H100" / "console")
    rounds = [(r["machine"], r["backend"], r["wall_s"], r["cache"]) for r in designs.round_processes(processes)]
    assert rounds == [
        ("m1", "jax", 36.0, "warm"),  # both workloads ran fresh on m1 first
        ("m1", "torch", 90.0, "cold"),  # the JAX processes filled another backend's cache
        ("m2", "jax", 44.0, "cold"),
        ("m2", "jax", 33.0, "warm"),  # a stopped round is left out, though what it compiled stays cached
        ("m3", "jax", 38.0, "mixed"),
    ]
    costs = designs.round_costs(tmp_path / "NVIDIA-H100" / "console")
    assert costs["per_backend"]["jax"] == {
        "fresh_cold_s": 70.0,  # each workload's first process per machine: mlp 30 and 30, cnn 40
        "fresh_warm_s": 39.5,  # mlp 20; cnn 30 and 9 (m2's cnn alone, after its first round had finished there)
        "round_cold_s": [44.0],
        "round_warm_s": [36.0, 33.0],
        "round_mixed_s": [38.0],  # listed only where one ran
        "preloaded_cold_s": [],
        "preloaded_warm_s": [],
        "staged_cold_s": [],
        "staged_warm_s": [],
    }
    # Only JAX has fresh processes to stand against: before is their cold round, after the warm rounds' median.
    assert (costs["before_s"], costs["after_s"], costs["after_over_before"]) == (70.0, 34.5, 0.49)
    assert (costs["preloaded_s"], costs["preloaded_over_before"], costs["preloaded_cache"]) == (None, None, None)


def test_a_preloaded_parent_of_a_whole_round_counts_as_preloaded_not_as_a_round(tmp_path: Path) -> None:
    both = ["mnist_mlp", "mnist_cnn"]
    _manifest(
        tmp_path,
        "m1-part1-manifest.json",
        [*_two_fresh_rounds("gpu-repeats-m1"),
         _process("gpu-repeats-m1-round", both, 1, 36.0),  # an earlier manifest's round names no design
         _process("gpu-repeats-m1-pre", both, 1, 28.0, design="preloaded")],
    )  # fmt: skip
    _manifest(
        tmp_path,
        "m2-part1-manifest.json",
        [_process("gpu-repeats-m2-pre", both, 1, 50.0, design="preloaded"),
         _process("gpu-repeats-m2-pre", both, 2, 26.0, design="preloaded"),
         _process("gpu-repeats-m2-pre", ["mnist_mlp"], 3, 9.0, design="preloaded")],  # one child: not a round
    )  # fmt: skip
    processes = designs.manifest_processes(tmp_path / "NVIDIA-H100" / "console")
    assert [p["design"] for p in processes] == ["repeat"] * 4 + ["round"] + ["preloaded"] * 4
    rounds = [(r["machine"], r["wall_s"], r["cache"]) for r in designs.round_processes(processes)]
    assert rounds == [("m1", 36.0, "warm")]
    preloaded = [(r["machine"], r["wall_s"], r["cache"]) for r in designs.round_processes(processes, "preloaded")]
    assert preloaded == [("m1", 28.0, "warm"), ("m2", 50.0, "cold"), ("m2", 26.0, "warm")]
    costs = designs.round_costs(tmp_path / "NVIDIA-H100" / "console")
    assert costs["per_backend"]["jax"] == {
        "fresh_cold_s": 70.0,
        "fresh_warm_s": 50.0,  # m2's lone preloaded child is no fresh process
        "round_cold_s": [],
        "round_warm_s": [36.0],
        "preloaded_cold_s": [50.0],
        "preloaded_warm_s": [28.0, 26.0],
        "staged_cold_s": [],
        "staged_warm_s": [],
    }
    assert (costs["before_s"], costs["after_s"], costs["after_over_before"]) == (70.0, 36.0, 0.51)
    assert (costs["preloaded_s"], costs["preloaded_over_before"]) == (27.0, 0.39)


def test_preloaded_rounds_of_fewer_epochs_are_costed_apart_from_the_suites_own(tmp_path: Path) -> None:
    both = ["mnist_mlp", "mnist_cnn"]
    _manifest(
        tmp_path,
        "m1-part1-manifest.json",
        [*_two_fresh_rounds("gpu-repeats-m1"),
         _process("gpu-repeats-m1-pre", both, 1, 28.0, design="preloaded"),
         _process("gpu-repeats-m1-pre3", both, 1, 21.0, design="preloaded", epochs=3),
         _process("gpu-repeats-m1-pre3", both, 2, 19.0, design="preloaded", epochs=3),
         _process("gpu-repeats-m1-one", ["mnist_mlp"], 3, 7.0, design="repeat", epochs=3)],  # no fresh round
    )  # fmt: skip
    costs = designs.round_costs(tmp_path / "NVIDIA-H100" / "console")
    figures = costs["per_backend"]["jax"]
    assert (figures["fresh_cold_s"], figures["fresh_warm_s"]) == (70.0, 50.0)
    assert (figures["preloaded_warm_s"], figures["preloaded_3_epochs_warm_s"]) == ([28.0], [21.0, 19.0])
    assert (costs["preloaded_s"], costs["preloaded_over_before"]) == (28.0, 0.4)
    assert (costs["preloaded_3_epochs_s"], costs["preloaded_3_epochs_over_before"]) == (20.0, 0.29)
    assert costs["preloaded_3_epochs_cache"] == {"jax": "warm"}


def test_the_cheapest_round_takes_each_backends_cheapest_design_and_staged_runs_stand_apart(tmp_path: Path) -> None:
    """Staged parents serve PyTorch alone, so no single design has a round of both backends; the cheapest round
    takes each backend's own. Their runs overlap in time, so their parent's wall is no start-up plus runs."""
    both = ["mnist_mlp", "mnist_cnn"]
    torch_fresh = [{**p, "backend": "torch"} for p in _two_fresh_rounds("gpu-repeats-m1")]
    _manifest(
        tmp_path,
        "m1-part1-manifest.json",
        [*_two_fresh_rounds("gpu-repeats-m1"), *torch_fresh,
         _process("gpu-repeats-m1-pre3", both, 1, 21.0, design="preloaded", epochs=3),
         _process("gpu-repeats-m1-stg", both, 1, 30.0, backend="torch", design="staged", epochs=3),
         _process("gpu-repeats-m1-stg", both, 2, 26.0, backend="torch", design="staged", epochs=3)],
    )  # fmt: skip
    _repeat(tmp_path, "gpu-repeats-m1-stg", "mnist_mlp", 1, 20, 0.5, staged=True)
    _repeat(tmp_path, "gpu-repeats-m1-stg", "mnist_cnn", 1, 25, 0.7, staged=True)
    costs = designs.round_costs(tmp_path / "NVIDIA-H100" / "console")
    assert costs["per_backend"]["torch"]["staged_3_epochs_warm_s"] == [30.0, 26.0]
    assert (costs["staged_3_epochs_s"], costs["preloaded_3_epochs_s"]) == (None, None)  # each serves one backend
    assert costs["cheapest"] == {
        "by_backend": {
            "jax": {"design": "preloaded_3_epochs", "wall_s": 21.0, "cache": "warm"},
            "torch": {"design": "staged_3_epochs", "wall_s": 28.0, "cache": "warm"},
        },
        "s": 49.0,
        "over_before": 0.35,  # against 70 s cold on each backend
    }
    runs = designs.timed_repeats(tmp_path / "NVIDIA-H100")
    assert {r.design for r in runs} == {"staged"}
    processes = designs.manifest_processes(tmp_path / "NVIDIA-H100" / "console")
    assert not [row for row in designs.start_up(processes, runs) if row["design"] == "staged"]
    labels = Counter(r.config.name for r in loading.load_runs(tmp_path).runs)
    assert labels == {f"NVIDIA-H100-jax [{loading.PROCESS_VARIANTS['staged']}]": 2}


def test_a_design_is_set_beside_fresh_processes_of_the_same_default_on_the_same_machine(tmp_path: Path) -> None:
    """Log ratios of medians per (machine, default): host-a's preloaded runs are 10 % slower than its fresh ones in
    three defaults, host-b's fresh runs meet no preloaded run there, and the round's run has no fresh partner."""
    for workload, fresh in (("mnist_mlp", 0.50), ("mnist_cnn", 0.80), ("imdb_fasttext", 0.30)):
        _repeat(tmp_path, "gpu-repeats-a", workload, 1, 15, fresh, host="host-a")
        _repeat(tmp_path, "gpu-repeats-a-pre", workload, 1, 12, fresh * 1.05, host="host-a", preloaded=True)
        _repeat(tmp_path, "gpu-repeats-a-pre", workload, 2, 12, fresh * 1.15, host="host-a", preloaded=True)
        _repeat(tmp_path, "gpu-repeats-b", workload, 1, 15, fresh / 2, host="host-b")
    _repeat(tmp_path, "gpu-repeats-c-round", "mnist_mlp", 1, 10, 0.6, host="host-c", workloads=9)
    result = designs.same_machine(designs.timed_repeats(tmp_path / "NVIDIA-H100"), "preloaded")
    [(backend, summary)] = result.items()
    assert backend == "jax" and summary["machines"] == 1
    assert [(p["machine"], p["workload"], p["runs"]) for p in summary["pairs"]] == [
        ("host-a", "imdb_fasttext", [2, 1]), ("host-a", "mnist_cnn", [2, 1]), ("host-a", "mnist_mlp", [2, 1]),
    ]  # fmt: skip
    assert [p["log_ratio"] for p in summary["pairs"]] == [0.095, 0.095, 0.095]  # log 1.10
    assert (summary["mean_log_ratio"], summary["ratio"], summary["beyond_noise"]) == (0.095, 1.1, True)
    assert designs.same_machine(designs.timed_repeats(tmp_path / "NVIDIA-H100"), "round") == {}


def test_pairs_whose_fresh_runs_all_came_first_are_told_from_interleaved_ones(tmp_path: Path) -> None:
    """On host-a every fresh run came before the preloaded ones, which ran 20 % slower (the machine drifting, or
    the design); on host-b they alternated and agree. Only host-b's pairs are interleaved, and too few to give an
    interval of their own until a third joins."""
    for workload in ("mnist_mlp", "mnist_cnn"):
        _repeat(tmp_path, "gpu-repeats-a", workload, 1, 15, 1.0, host="host-a", start=0)
        _repeat(tmp_path, "gpu-repeats-a-pre", workload, 1, 12, 1.2, host="host-a", preloaded=True, start=5)
        _repeat(tmp_path, "gpu-repeats-b-pre", workload, 1, 12, 1.0, host="host-b", preloaded=True, start=0)
        _repeat(tmp_path, "gpu-repeats-b", workload, 1, 15, 1.0, host="host-b", start=5)
        _repeat(tmp_path, "gpu-repeats-b-pre", workload, 2, 12, 1.0, host="host-b", preloaded=True, start=10)
    summary = designs.same_machine(designs.timed_repeats(tmp_path / "NVIDIA-H100"), "preloaded")["jax"]
    assert [(p["machine"], p["interleaved"]) for p in summary["pairs"]] == [
        ("host-a", False), ("host-a", False), ("host-b", True), ("host-b", True),
    ]  # fmt: skip
    assert summary["mean_log_ratio"] == pytest.approx(0.091, abs=0.001) and summary["machines"] == 2
    mixed = summary["interleaved_only"]
    assert mixed["pairs"] == 2 and mixed["mean_log_ratio"] == 0.0 and mixed["interval"] is None
    assert not mixed["beyond_noise"]

    _repeat(tmp_path, "gpu-repeats-b-pre", "imdb_fasttext", 1, 12, 0.5, host="host-b", preloaded=True, start=20)
    _repeat(tmp_path, "gpu-repeats-b", "imdb_fasttext", 1, 15, 0.5, host="host-b", start=25)
    _repeat(tmp_path, "gpu-repeats-b-pre", "imdb_fasttext", 2, 12, 0.5, host="host-b", preloaded=True, start=30)
    mixed = designs.same_machine(designs.timed_repeats(tmp_path / "NVIDIA-H100"), "preloaded")["jax"]
    assert mixed["interleaved_only"]["pairs"] == 3 and mixed["interleaved_only"]["interval"] == [0.0, 0.0]


def test_the_committed_h100_rounds_cost_less_than_fresh_processes_with_a_cold_cache() -> None:
    costs = designs.round_costs(LOGS / "NVIDIA-H100" / "console")
    assert set(costs["per_backend"]) == {"jax", "torch"}
    for figures in costs["per_backend"].values():
        assert figures["round_warm_s"] and max(figures["round_warm_s"]) < figures["fresh_cold_s"]
    assert 0 < costs["after_over_before"] < 1


def test_the_verdicts_are_decided_again_with_the_h100_round_process_repeats() -> None:
    result = today.design_verdicts(LOGS)
    fresh_rows = {(r.workload, r.backend): r for r in today.rows(LOGS, today.load_prices())}
    rounds = Counter(
        (meta.workload, meta.backend)
        for gpu, meta, _ in today.complete_runs(LOGS)
        if gpu == "H100" and designs.round_process_repeat(meta)
    )
    assert result["compared"] == len(result["pairs"]) > 0
    for pair in result["pairs"]:
        key = (pair["workload"], pair["backend"])
        assert pair["h100_repeats"] == {"fresh": fresh_rows[key].estimates["H100"].n, "round": rounds[key]}
        assert pair["fresh"]["faster"] == fresh_rows[key].faster
        assert pair["same"] == (pair["fresh"] == pair["round"])


def test_the_verdicts_with_preloaded_repeats_use_only_the_h100_runs_forked_from_a_preloaded_parent(
    capsys,
) -> None:
    assert today.main([str(LOGS), "--designs", "preloaded"]) == 0
    result = json.loads(capsys.readouterr().out)
    preloaded = Counter(
        (meta.workload, meta.backend)
        for gpu, meta, _ in today.complete_runs(LOGS)
        if gpu == "H100" and designs.preloaded_repeat(meta)
    )
    assert result["compared"] == len(result["pairs"]) <= len(preloaded)  # none where no preloaded run was committed
    for pair in result["pairs"]:
        assert pair["h100_repeats"]["preloaded"] == preloaded[pair["workload"], pair["backend"]]
        assert pair["same"] == (pair["fresh"] == pair["preloaded"]) and "round" not in pair


def test_the_verdicts_take_a_design_per_backend_where_no_design_serves_both(capsys) -> None:
    assert today.main([str(LOGS), "--designs", "jax:preloaded,torch:staged"]) == 0
    result = json.loads(capsys.readouterr().out)
    chosen = Counter(
        (meta.workload, meta.backend)
        for gpu, meta, _ in today.complete_runs(LOGS)
        if gpu == "H100" and {"jax": designs.preloaded_repeat, "torch": designs.staged_repeat}[meta.backend](meta)
    )
    assert {p["backend"] for p in result["pairs"]} == {"jax", "torch"}
    for pair in result["pairs"]:
        assert pair["h100_repeats"]["jax:preloaded,torch:staged"] == chosen[pair["workload"], pair["backend"]]


@pytest.mark.parametrize(
    ("spec", "named"),
    [("fresh", "unknown design 'fresh'"), ("jax:preloaded,jax:round", "'jax:round'"), ("torch:", "'torch:'"),
     (":staged", "':staged'")],
)  # fmt: skip
def test_a_bad_design_is_refused_in_one_line(spec: str, named: str, capsys) -> None:
    assert today.main([str(LOGS), "--designs", spec]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --designs: ") and named in err and len(err.splitlines()) == 1


def test_a_missing_folder_is_a_bad_input(tmp_path: Path, capsys) -> None:
    assert designs.main([str(tmp_path / "nowhere")]) == 2
    assert "platform:" in capsys.readouterr().err


def _complete(run_id: str, workload: str, repeat: int, lookups: tuple[int, int] | None = None) -> designs.Timed:
    return designs.Timed(run_id, workload, "jax", repeat, "host", 10.0, 1.0, "preloaded", cache_lookups=lookups)


def test_a_stopped_parent_filled_the_cache_of_the_children_that_finished_and_no_other(tmp_path: Path) -> None:
    both = ["mnist_mlp", "mnist_cnn"]
    _manifest(
        tmp_path,
        "m1-part1-manifest.json",
        [_process("gpu-repeats-m1-pre", both, 1, 50.0, -1, design="preloaded"),
         _process("gpu-repeats-m1-pre", both, 2, 30.0, design="preloaded")],
    )  # fmt: skip
    processes = designs.manifest_processes(tmp_path / "NVIDIA-H100" / "console")
    mlp_only = [_complete("gpu-repeats-m1-pre", "mnist_mlp", 1)]
    states = [state for _, state in designs.cache_states(processes, mlp_only)]
    assert states == ["cold", "unknown"]  # mnist_cnn's child was cut: its cache may or may not have been filled
    both_done = [*mlp_only, _complete("gpu-repeats-m1-pre", "mnist_cnn", 1)]
    assert [state for _, state in designs.cache_states(processes, both_done)] == ["cold", "warm"]
    assert [state for _, state in designs.cache_states(processes)] == ["cold", "unknown"]  # no runs: nothing known
    _manifest(tmp_path, "m0-part1-manifest.json", [_process("gpu-repeats-m0", ["mnist_mlp"], 1, 20.0)])
    costs = designs.round_costs(tmp_path / "NVIDIA-H100" / "console", mlp_only)  # m0: a fresh process to stand by
    assert costs["per_backend"]["jax"]["preloaded_unknown_s"] == [30.0]
    assert costs["preloaded_cache"] == {"jax": "unknown"}  # the only round stands in, and says what it met

    # The second round's own mnist_cnn run settles it: no misses, so the cut child had filled the cache; misses,
    # so it had not (or not all of it); nothing looked up (an eager run), so no cache was involved.
    for lookups, second in (((4, 0), "warm"), ((2, 2), "mixed"), ((0, 0), "warm"), (None, "unknown")):
        cnn_later = _complete("gpu-repeats-m1-pre", "mnist_cnn", 2, lookups)
        assert [state for _, state in designs.cache_states(processes, [*mlp_only, cnn_later])] == ["cold", second]


def test_a_workload_that_looked_nothing_up_needs_no_earlier_run_for_its_round_to_be_warm(tmp_path: Path) -> None:
    """Eager PyTorch workloads compile nothing: a round whose other workloads had compiled on the machine before
    met a warm cache even where an eager one runs there for the first time."""
    both = ["mnist_mlp", "mnist_cnn"]
    _manifest(
        tmp_path,
        "m1-part1-manifest.json",
        [_process("gpu-repeats-m1-pre", ["mnist_mlp"], 1, 50.0, design="preloaded"),
         _process("gpu-repeats-m1-pre", both, 2, 30.0, design="preloaded")],
    )  # fmt: skip
    processes = designs.manifest_processes(tmp_path / "NVIDIA-H100" / "console")
    for lookups, second in (((0, 0), "warm"), ((0, 3), "mixed"), (None, "mixed")):
        runs = [_complete("gpu-repeats-m1-pre", "mnist_cnn", 2, lookups)]
        assert [state for _, state in designs.cache_states(processes, runs)] == ["cold", second]


def _timed(workload: str, design: str, setup: dict[str, float], backend: str = "jax") -> designs.Timed:
    return designs.Timed("gpu-repeats-x", workload, backend, 1, "host-a", 10.0, 1.0, design, setup=setup)


def test_a_rounds_setup_sums_each_workloads_median_step_per_design() -> None:
    runs = [
        _timed("mnist_mlp", "repeat", {"data_s": 1.0, "build_s": 2.0, "describe_s": 3.0}),
        _timed("mnist_mlp", "repeat", {"data_s": 3.0, "build_s": 2.0, "describe_s": 1.0}),
        _timed("mnist_cnn", "repeat", {"data_s": 0.5, "build_s": 0.5, "describe_s": 0.5}),
        _timed("mnist_mlp", "preloaded", {"data_s": 1.0, "build_s": 1.0, "describe_s": 0.25}),
        _timed("mnist_cnn", "repeat", {}),  # written before runs recorded their steps
    ]
    assert designs.setup_per_round(runs) == {
        "repeat": {"jax": {"workloads": 2, "runs": 3, "data_s": 2.5, "build_s": 2.5, "describe_s": 2.5}},
        "preloaded": {"jax": {"workloads": 1, "runs": 1, "data_s": 1.0, "build_s": 1.0, "describe_s": 0.25}},
    }


def test_the_committed_runs_that_recorded_their_steps_give_each_designs_setup() -> None:
    setup = designs.designs(LOGS / "NVIDIA-H100")["setup_per_round"]
    assert setup["preloaded"]["jax"]["workloads"] == setup["preloaded"]["torch"]["workloads"] == 9
    # the preloaded parent describes the CPU once for all its children
    assert setup["preloaded"]["jax"]["describe_s"] < setup["repeat"]["jax"]["describe_s"]


def _fresh(workload: str, backend: str, host: str, steady: float) -> designs.Timed:
    return designs.Timed("gpu-repeats-x", workload, backend, 1, host, 10.0, steady, "repeat")


def test_the_spread_is_split_between_processes_and_machines_per_backend() -> None:
    runs = [
        *(_fresh("mnist_mlp", "jax", host, s) for host, s in (("a", 1.0), ("a", 1.2), ("b", 1.0), ("b", 1.2))),
        *(_fresh("mnist_mlp", "torch", host, s) for host, s in (("a", 1.0), ("a", 1.0), ("b", 2.0), ("b", 2.0))),
        designs.Timed("gpu-repeats-x", "mnist_mlp", "torch", 1, "c", 10.0, 9.0, "preloaded"),  # not a fresh repeat
    ]
    spread = designs.spread_sources(runs)
    assert spread["jax"]["machine_component_sd"] == 0.0 < spread["jax"]["within_machine_sd"]  # processes only
    assert spread["torch"]["within_machine_sd"] == 0.0 < spread["torch"]["machine_component_sd"]  # machines only
    assert (spread["all"]["defaults"], spread["all"]["processes"]) == (2, 8)


def test_a_machine_that_ran_both_designs_tells_the_designs_saving_alone(tmp_path: Path) -> None:
    """Staged (cold), fresh, staged, fresh rounds of two PyTorch workloads on one machine, 3 epochs a run: the
    first staged round met a cold cache and the second fresh round was stopped, so the saving is the warm staged
    round's 15 s against the whole warm fresh round's 20 + 30 s. Another machine's lone staged round has no fresh
    round beside it and says nothing."""
    both = ["mnist_mlp", "mnist_cnn"]

    def at(round_index: int, process: dict) -> dict:
        return {**process, "round": round_index}

    def fresh(round_index: int, walls: tuple[float, float], returncodes: tuple[int, int] = (0, 0)) -> list[dict]:
        return [at(round_index, _process("gpu-repeats-m1-ab", [w], round_index, wall, code, "torch", "repeat", 3))
                for w, wall, code in zip(both, walls, returncodes, strict=True)]  # fmt: skip

    staged = functools.partial(_process, "gpu-repeats-m1-ab", both, backend="torch", design="staged", epochs=3)
    _manifest(
        tmp_path,
        "m1-part1-manifest.json",
        [at(1, staged(1, 40.0)), *fresh(2, (20.0, 30.0)), at(3, staged(2, 15.0)), *fresh(4, (21.0, 9.0), (0, -1))],
    )
    lone = _process("gpu-repeats-m2-stg", both, 1, 14.0, 0, "torch", "staged", 3)
    _manifest(tmp_path, "m2-part1-manifest.json", [at(1, lone), at(2, {**lone, "repeat": 2})])
    costs = designs.round_costs(tmp_path / "NVIDIA-H100" / "console")
    assert costs["same_machine"] == [
        {"machine": "m1", "backend": "torch", "epochs": 3, "fresh_warm_s": [50.0], "staged_warm_s": [15.0],
         "over_fresh": 0.3}
    ]  # fmt: skip
