"""The repeat scheduler: fresh processes round robin, adaptive stopping on the interval, budgets, numbering.

The launcher here writes what a runner process writes (a CSV and its metadata per repeat), so the scheduler and its
reading of finished repeats are exercised without training a model.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.logs import EpochLogWriter, EpochRecord, write_metadata
from benchmarks.repeats import (
    ADAPTIVE_MIN_REPEATS,
    SUMMARY_FILE,
    RepeatPolicy,
    fill_levels,
    planned_rounds,
    round_order,
    run_repeats,
)
from benchmarks.work import WorkItem

ITEMS = [WorkItem("mnist_mlp", "jax"), WorkItem("mnist_cnn", "jax"), WorkItem("mnist_mlp", "torch")]


def _writer(run_dir: Path, steady: dict[WorkItem, list[float]], log: list[tuple[str, int]]):
    """A launcher that records its calls and writes one repeat's files, with steady epochs from `steady`."""

    def launch(repeat: WorkItem) -> int:
        assert repeat.repeat is not None
        item, index = replace(repeat, repeat=None), repeat.repeat
        log.append((item.stem, index))
        path = run_dir / f"{repeat.stem}.csv"
        writer = EpochLogWriter(path)
        writer.append(EpochRecord(0, 5.0, compiled=True))
        seconds = steady[item][(index - 1) % len(steady[item])]
        for epoch in (1, 2, 3):
            writer.append(EpochRecord(epoch, seconds, compiled=False))
        writer.close()
        write_metadata(
            path,
            {
                "workload": item.workload,
                "backend": item.backend,
                "status": "complete",
                "stability": {"label": "stable"},
            },
        )
        return 0

    return launch


def test_round_robin_interleaves_items_and_rotates_the_start() -> None:
    assert [i.stem for i in round_order(ITEMS, 0)] == ["mnist_mlp_jax", "mnist_cnn_jax", "mnist_mlp_torch"]
    assert [i.stem for i in round_order(ITEMS, 1)] == ["mnist_cnn_jax", "mnist_mlp_torch", "mnist_mlp_jax"]


def test_planned_rounds_number_each_round_in_its_rotated_order() -> None:
    assert planned_rounds(ITEMS, 1) == tuple(ITEMS)  # one measurement: plain items, the runner's plain file names
    assert [i.stem for i in planned_rounds(ITEMS[:2], 2)] == [
        "mnist_mlp_jax.r01",
        "mnist_cnn_jax.r01",
        "mnist_cnn_jax.r02",
        "mnist_mlp_jax.r02",
    ]


def test_budgeted_rounds_fill_the_least_measured_first() -> None:
    done = {ITEMS[0]: 2, ITEMS[1]: 0, ITEMS[2]: 1}
    assert list(fill_levels(done, 3)) == [1, 2, 3]
    assert round_order(ITEMS, 0, done, level=2) == [ITEMS[1], ITEMS[2]]
    assert round_order(ITEMS, 1, done, level=3) == [ITEMS[1], ITEMS[2], ITEMS[0]]


def test_fixed_repeats_run_every_item_once_per_round_and_record_the_summary(tmp_path: Path) -> None:
    calls: list[tuple[str, int]] = []
    steady = {item: [1.0, 1.1, 0.9] for item in ITEMS}
    outcome = run_repeats(ITEMS, RepeatPolicy(repeats=3), tmp_path, "g", _writer(tmp_path, steady, calls))
    # Repeat 1 of every item before any repeat 2: drift on the machine hits every item alike.
    assert [index for _, index in calls] == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert outcome.stopped == "repeats done" and outcome.rounds == 3
    summary = json.loads((tmp_path / SUMMARY_FILE).read_text())
    first = summary["items"][0]
    assert first["repeats"] == 3 and first["steady_median_s"] == pytest.approx(1.0)
    assert first["interval_s"] == pytest.approx([0.9, 1.1]) and first["coverage"] == pytest.approx(0.75)
    assert first["stability_labels"] == {"stable": 3}


def test_adaptive_repeats_stop_each_item_when_its_interval_is_narrow(tmp_path: Path) -> None:
    calls: list[tuple[str, int]] = []
    steady = {
        ITEMS[0]: [1.00, 1.01, 0.99, 1.00, 1.005, 0.995],  # within +-2 % after the first six
        ITEMS[1]: [1.0, 1.5, 0.7, 1.3, 0.8, 1.2, 0.9],  # never within +-2 %
        ITEMS[2]: [2.0, 2.01, 1.99, 2.0, 2.005, 1.995],
    }
    policy = RepeatPolicy(target_ci_pct=2.0, max_repeats=9)
    outcome = run_repeats(ITEMS, policy, tmp_path, "g", _writer(tmp_path, steady, calls))
    counts = {stem: sum(1 for s, _ in calls if s == stem) for stem in {s for s, _ in calls}}
    assert counts == {
        "mnist_mlp_jax": ADAPTIVE_MIN_REPEATS,
        "mnist_mlp_torch": ADAPTIVE_MIN_REPEATS,
        "mnist_cnn_jax": 9,
    }
    assert outcome.stopped == "max repeats reached"
    reached = {r.workload + "_" + r.backend: r.reached_target for r in outcome.items}
    assert reached == {"mnist_mlp_jax": True, "mnist_cnn_jax": False, "mnist_mlp_torch": True}


def test_a_budget_stops_new_repeats_from_starting(tmp_path: Path) -> None:
    calls: list[tuple[str, int]] = []
    ticks = itertools.count(0, 10)  # each clock reading is 10 s later
    policy = RepeatPolicy(repeats=5, budget_s=45)
    steady = {item: [1.0] for item in ITEMS}
    outcome = run_repeats(
        ITEMS, policy, tmp_path, "g", _writer(tmp_path, steady, calls), clock=lambda: float(next(ticks))
    )
    assert outcome.stopped == "budget spent" and len(calls) == 4


def test_repeats_run_again_into_the_same_folder_continue_the_numbering(tmp_path: Path) -> None:
    calls: list[tuple[str, int]] = []
    steady = {item: [1.0] for item in ITEMS[:1]}
    run_repeats(ITEMS[:1], RepeatPolicy(repeats=2), tmp_path, "g", _writer(tmp_path, steady, calls))
    run_repeats(ITEMS[:1], RepeatPolicy(repeats=2), tmp_path, "g", _writer(tmp_path, steady, calls))
    assert [index for _, index in calls] == [1, 2, 3, 4]


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (RepeatPolicy(repeats=0), "--repeats must be at least 1"),
        (RepeatPolicy(target_ci_pct=0.0), "--target-ci must be a percentage"),
        (RepeatPolicy(repeats=2, budget_s=-1), "--budget must be positive"),
        (RepeatPolicy(target_ci_pct=5, max_repeats=4), "--max-repeats 4 is below the 6 repeats"),
    ],
)
def test_impossible_policies_are_one_line_errors(policy: RepeatPolicy, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        policy.check()
