"""Repeats: every configuration measured several times, each time in a fresh process, interleaved round robin.

A fresh process per repeat puts compilation, allocator state and process-level effects (where a thread lands, what
the garbage collector does) into the spread a user will see. Interleaving (repeat 1 of every item, then repeat 2,
each round starting one item later) spreads slow drift of the machine over all items alike, instead of charging it
to whichever item ran last.

Fixed repeats (`--repeats N`) run N rounds. Adaptive repeats (`--target-ci PCT`, as hyperfine's and pyperf's
calibration do) keep going until the 95 % interval of each item's median steady-epoch time is within +-PCT of the
median, or the time budget (`--budget`) or `--max-repeats` runs out; an item that has reached its target stops
early. The order-statistic interval needs 6 repeats before it reaches 95 % coverage, so adaptive runs do at least 6.
What was reached is written to `repeats.json` in the run folder. Repeats run again into the same folder (same run
id) continue the numbering. Importable without any framework.

The round order is this module's for every scheduler of repeats: the runner's (`run_repeats`), the orchestrator's
plan (`planned_rounds`) and the GPU session tool's budgeted rounds (`round_order` with the repeats already held,
`fill_levels`).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from benchmarks.logs import LogFormatError, find_logs, read_epoch_log
from benchmarks.metadata import Status
from benchmarks.stats import CONFIDENCE, median_estimate
from benchmarks.work import WorkItem

ADAPTIVE_MIN_REPEATS = 6  # the fewest for which the order-statistic interval of a median covers 95 %
DEFAULT_MAX_REPEATS = 30
SUMMARY_FILE = "repeats.json"

T = TypeVar("T", bound=Hashable)


@dataclass(frozen=True)
class RepeatPolicy:
    repeats: int = 1
    target_ci_pct: float | None = None
    budget_s: float | None = None
    max_repeats: int = DEFAULT_MAX_REPEATS

    @property
    def adaptive(self) -> bool:
        return self.target_ci_pct is not None

    @property
    def minimum(self) -> int:
        return max(self.repeats, ADAPTIVE_MIN_REPEATS) if self.adaptive else self.repeats

    @property
    def planned(self) -> int | None:
        return None if self.adaptive else self.repeats

    def check(self) -> None:
        """One-line errors for values that cannot make a plan."""
        if self.repeats < 1:
            raise ValueError(f"--repeats must be at least 1, got {self.repeats}")
        if self.target_ci_pct is not None and not 0 < self.target_ci_pct < 100:
            raise ValueError(f"--target-ci must be a percentage between 0 and 100, got {self.target_ci_pct}")
        if self.budget_s is not None and self.budget_s <= 0:
            raise ValueError(f"--budget must be positive seconds, got {self.budget_s}")
        if self.max_repeats < self.minimum:
            raise ValueError(f"--max-repeats {self.max_repeats} is below the {self.minimum} repeats this plan needs")


@dataclass
class ItemResult:
    workload: str
    backend: str
    repeats: int = 0
    failed: int = 0
    steady_medians_s: list[float] = field(default_factory=list)
    steady_median_s: float | None = None
    interval_s: list[float] | None = None
    coverage: float | None = None
    half_width_pct: float | None = None
    reached_target: bool | None = None
    stability_labels: dict[str, int] = field(default_factory=dict)


def round_order(
    items: Sequence[T], round_index: int, done: Mapping[T, int] | None = None, level: int | None = None
) -> list[T]:
    """Round robin, each round starting one item later than the last. With `done` (the repeats each item holds
    already) and `level`: only the items below `level`, the least measured first, ties in the rotated order."""
    if not items:
        return []
    shift = round_index % len(items)
    rotated = [*items[shift:], *items[:shift]]
    if done is None or level is None:
        return rotated
    return sorted((item for item in rotated if done[item] < level), key=lambda item: done[item])


def fill_levels(done: Mapping[Any, int], target: int) -> range:
    """The levels of budgeted rounds: each round raises every item below its level by one repeat, up to `target`
    repeats in all, so that a budget cut leaves the items evenly measured rather than some with many and some with
    none."""
    return range(min(done.values(), default=0) + 1, target + 1)


def planned_rounds(items: Sequence[WorkItem], repeats: int) -> tuple[WorkItem, ...]:
    """A fixed number of repeats, planned ahead: every item's repeat 1 in round-robin order, then repeat 2, ...;
    a single repeat keeps the items plain (no repeat index, the runner's plain file names)."""
    if repeats == 1:
        return tuple(items)
    return tuple(item.at_repeat(r + 1) for r in range(repeats) for item in round_order(items, r))


def steady_medians(run_dir: Path, item: WorkItem) -> tuple[list[float], dict[str, int]]:
    """Each finished repeat's median steady-epoch time, and how many repeats got each stability label."""
    medians: list[float] = []
    labels: dict[str, int] = {}
    for path in find_logs(run_dir):
        if not _is_repeat_of(path.stem, item):
            continue
        try:
            log = read_epoch_log(path)
        except LogFormatError:
            continue
        meta = log.metadata
        steady = [e.elapsed for e in log.steady_epochs]
        if meta is None or meta.status != Status.COMPLETE or not steady:
            continue
        medians.append(statistics.median(steady))
        label = meta.stability.label if meta.stability else "unknown"
        labels[label] = labels.get(label, 0) + 1
    return medians, labels


def _repeat_index(stem: str, item: WorkItem) -> int | None:
    """The repeat index in a file stem of `item` (`mnist_mlp_jax.r02` -> 2), None for other files."""
    base, dot, repeat = stem.rpartition(".")
    if not dot or not repeat.startswith("r") or not repeat[1:].isdigit():
        return None
    return int(repeat[1:]) if base in (item.base_stem, f"{item.base_stem}_synthetic") else None


def _is_repeat_of(stem: str, item: WorkItem) -> bool:
    return _repeat_index(stem, item) is not None


def repeats_done(run_dir: Path, item: WorkItem) -> int:
    """The highest repeat index already in `run_dir` for `item`: a rerun into the same folder adds repeats after
    it rather than overwriting them."""
    indices = [_repeat_index(path.stem, item) for path in run_dir.glob("*.csv")] if run_dir.is_dir() else []
    return max((i for i in indices if i is not None), default=0)


def evaluate(run_dir: Path, item: WorkItem, policy: RepeatPolicy, failed: int = 0) -> ItemResult:
    medians, labels = steady_medians(run_dir, item)
    result = ItemResult(item.workload, item.backend, len(medians), failed, medians, stability_labels=labels)
    if not medians:
        return result
    estimate = median_estimate(medians)
    result.steady_median_s = estimate.value
    if estimate.has_interval:
        result.interval_s = [estimate.low, estimate.high]  # type: ignore[list-item]
        result.coverage = estimate.coverage
        result.half_width_pct = estimate.half_width_pct
    if policy.adaptive:
        result.reached_target = (
            estimate.coverage is not None
            and estimate.coverage >= CONFIDENCE
            and estimate.half_width_pct is not None
            and estimate.half_width_pct <= policy.target_ci_pct  # type: ignore[operator]
        )
    return result


@dataclass
class Outcome:
    group: str
    policy: RepeatPolicy
    rounds: int = 0
    elapsed_s: float = 0.0
    stopped: str = ""
    items: list[ItemResult] = field(default_factory=list)
    exit_codes: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "policy": asdict(self.policy),
            "rounds": self.rounds,
            "elapsed_s": self.elapsed_s,
            "stopped": self.stopped,
            "items": [asdict(item) for item in self.items],
        }


INTERRUPTED = 130


def run_repeats(
    items: Sequence[WorkItem],
    policy: RepeatPolicy,
    run_dir: Path,
    group: str,
    launch: Callable[[WorkItem], int],
    clock: Callable[[], float] = time.monotonic,
) -> Outcome:
    """Run `launch(item)` round robin, each item at its next repeat index, until the policy is satisfied; write
    repeats.json.

    `launch` starts one fresh process for one repeat and returns its exit code (130: interrupted, which stops the
    whole plan). A budget stops new repeats from starting; a running one is never cut.
    """
    policy.check()
    started = clock()
    outcome = Outcome(group=group, policy=policy)
    failures = {item: 0 for item in items}
    earlier = {item: repeats_done(run_dir, item) for item in items}
    pending = list(items)
    for round_index in range(policy.max_repeats if policy.adaptive else policy.repeats):
        if not pending:
            outcome.stopped = "every item reached its target"
            break
        for item in round_order(pending, round_index):
            if policy.budget_s is not None and clock() - started >= policy.budget_s:
                outcome.stopped = "budget spent"
                break
            code = launch(item.at_repeat(earlier[item] + round_index + 1))
            outcome.exit_codes.append(code)
            failures[item] += code != 0
            if code == INTERRUPTED:
                outcome.stopped = "interrupted"
                break
        outcome.rounds = round_index + 1
        if outcome.stopped:
            break
        if policy.adaptive and outcome.rounds >= policy.minimum:
            pending = [i for i in pending if not evaluate(run_dir, i, policy).reached_target]
    if not outcome.stopped:
        if not policy.adaptive:
            outcome.stopped = "repeats done"
        else:
            outcome.stopped = "max repeats reached" if pending else "every item reached its target"
    outcome.elapsed_s = clock() - started
    outcome.items = [evaluate(run_dir, item, policy, failures[item]) for item in items]
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / SUMMARY_FILE).write_text(json.dumps(outcome.as_dict(), indent=2))
    return outcome
