"""The GPU configuration table, and the check that each backend's default is its fastest configuration.

Every complete run under a log folder is one repeat of a configuration: workload, backend, training samples and the
settings that change a time (jit, steps per execution, LSTM kernel, float32 matmul, garbage collector). A first epoch
that loaded its programs from a persistent compile cache measures a load, not a compile: first epochs are kept apart
by cache state (steady epochs run the same programs either way and are pooled). A default
loses only when another configuration is faster beyond noise by `benchmarks.stats.compare` (rank-sum test and
bootstrap interval of the ratio of medians, outside the noise threshold); with too few repeats to tell, the check
says so instead of ranking.

    python -m campaign.configurations table logs/reference/NVIDIA-H200
    python -m campaign.configurations check-defaults logs/reference/NVIDIA-H200
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.logs import find_logs, read_epoch_log
from benchmarks.metadata import UNCACHED, ProcessPlace, RunMetadata, Settings, Status
from benchmarks.stats import FASTER, TOO_FEW, Estimate, compare, median_estimate

# Runs of the defaults: the GPU session's suite and repeats phases. Its variance phase studies the spread of one
# workload under host settings and is not a configuration of its own.
DEFAULT_RUN_PREFIXES = ("gpu-suite-", "gpu-repeats-")
EXPERIMENT_RUN_PREFIXES = ("gpu-variance-",)


def describe_settings(settings: Settings) -> str:
    """The settings a run's time depends on, in words; runs from before a field was recorded say "framework
    default" for it (float32 matmul: TF32 on JAX, float32 matmuls with TF32 cuDNN kernels on PyTorch)."""
    parts = [f"jit {'on' if settings.jit_compile else 'off'}", f"{settings.steps_per_execution or 1} step/exec"]
    if settings.lstm_kernel:
        parts.append(f"{settings.lstm_kernel} LSTM")
    parts.append(f"{settings.float32_matmul or 'framework-default'} matmul")
    if settings.host_gc not in (None, "on"):
        parts.append(f"gc {settings.host_gc}")
    return ", ".join(parts)


COMPILED = "compiled"  # the first epoch compiled its programs (no cache, or a cold one)


def first_epoch_kind(settings: Settings, process: ProcessPlace | None = None) -> str:
    """What a run's first epoch measured: a compile in a fresh process, a compile after another workload in the
    same process, or a load from a warm (or partly warm) compile cache; alone on the machine, or beside the first
    epochs of a staged round's other children."""
    cache = settings.compile_cache
    kind = COMPILED if cache is None or cache.state in UNCACHED else f"compile cache {cache.state}"
    if process is not None and process.design == "staged":
        kind = f"{kind}, beside its round's first epochs"
    return kind if process is None or process.position == 1 else f"{kind}, not first in its process"


def _is_default_run(run_id: str) -> bool:
    return run_id.startswith(DEFAULT_RUN_PREFIXES) and (
        run_id.startswith("gpu-repeats-") or run_id.endswith("-default")
    )


@dataclass
class Configuration:
    workload: str
    backend: str
    train_samples: int
    settings: str
    steady_medians: list[float] = field(default_factory=list)
    first_epochs: dict[str, list[float]] = field(default_factory=dict)  # by first_epoch_kind, never pooled
    run_ids: set[str] = field(default_factory=set)
    epochs: set[int] = field(default_factory=set)

    @property
    def is_default(self) -> bool:
        return any(_is_default_run(r) for r in self.run_ids)

    @property
    def steady(self) -> Estimate:
        return median_estimate(self.steady_medians)


def configurations(logs: Path) -> list[Configuration]:
    """Every configuration with complete runs that have steady epochs; defaults apart from alternatives that
    share their settings (a sweep's "default" row is the same configuration as the suite's)."""
    found: dict[tuple[str, str, int, str, bool], Configuration] = {}
    for path in find_logs(logs):
        log = read_epoch_log(path)
        meta = log.metadata or RunMetadata.from_dict({})
        steady = [e.elapsed for e in log.steady_epochs]
        run_id = meta.run_id or path.parent.name
        if meta.status != Status.COMPLETE or not steady or log.first_epoch is None:
            continue
        if run_id.startswith(EXPERIMENT_RUN_PREFIXES):
            continue
        samples = meta.data.train_samples or 0
        settings = describe_settings(meta.settings)
        key = (meta.workload, meta.backend, samples, settings, _is_default_run(run_id))
        config = found.setdefault(key, Configuration(*key[:4]))
        config.steady_medians.append(statistics.median(steady))
        kind = first_epoch_kind(meta.settings, meta.process)
        config.first_epochs.setdefault(kind, []).append(log.first_epoch.elapsed)
        config.run_ids.add(run_id)
        config.epochs.add(len(log.epochs))
    return list(found.values())


def comparable_groups(found: Sequence[Configuration]) -> dict[tuple[str, str, int], list[Configuration]]:
    """Configurations that compare: one workload, one backend, the same training samples."""
    groups: dict[tuple[str, str, int], list[Configuration]] = {}
    for config in found:
        groups.setdefault((config.workload, config.backend, config.train_samples), []).append(config)
    return {key: sorted(group, key=lambda c: c.steady.value) for key, group in sorted(groups.items())}


@dataclass(frozen=True)
class Check:
    problems: list[str]  # a default that another configuration beats beyond noise
    undecided: list[str]  # comparisons with too few repeats to tell


def check_defaults(logs: Path) -> Check:
    problems, undecided = [], []
    for (workload, backend, samples), group in comparable_groups(configurations(logs)).items():
        for default in (c for c in group if c.is_default):
            for other in (c for c in group if c.settings != default.settings):
                result = compare(other.steady_medians, default.steady_medians)
                where = f"{workload} on {backend} ({samples:,} samples)"
                if result.verdict == FASTER:
                    problems.append(f"{where}: {result.text(other.settings, f'the default ({default.settings})')}")
                elif result.verdict == TOO_FEW:
                    undecided.append(f"{where}: {other.settings} vs the default: {result.text()}")
    return Check(problems, undecided)


def configuration_table(logs: Path) -> str:
    """Markdown: every configuration measured with its repeats and interval, fastest first within each group of
    comparable runs; the defaults and the fastest settings are marked."""
    lines = [
        "| workload | backend | train samples | settings | runs | repeats | steady epoch s (median, interval) "
        "| first epoch s | epochs |",
        "|---|---|---:|---|---|---:|---|---:|---|",
    ]
    for (workload, backend, samples), group in comparable_groups(configurations(logs)).items():
        fastest = group[0].settings if len({c.settings for c in group}) > 1 else None
        for c in group:
            marks = [mark for mark, on in (("default", c.is_default), ("fastest", c.settings == fastest)) if on]
            label = f"{c.settings}{''.join(f' **{mark}**' for mark in marks)}"
            runs = ", ".join(sorted(r.removeprefix("gpu-") for r in c.run_ids))
            steady = c.steady
            interval = "" if steady.n == 1 else f" [{steady.interval_text('{:.2f}')}]"
            lines.append(
                f"| {workload} | {backend} | {samples:,} | {label} | {runs} | {steady.n} "
                f"| {steady.value:.2f}{interval} "
                f"| {first_epochs_text(c.first_epochs)} | {', '.join(map(str, sorted(c.epochs)))} |"
            )
    return "\n".join(lines) + "\n"


def first_epochs_text(first_epochs: dict[str, list[float]]) -> str:
    """The compiled first epochs' median alone where there are only those, else each kind's median named."""
    if set(first_epochs) == {COMPILED}:
        return f"{statistics.median(first_epochs[COMPILED]):.2f}"
    return "; ".join(f"{statistics.median(v):.2f} ({k}, n={len(v)})" for k, v in sorted(first_epochs.items()))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m campaign.configurations", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("table", help="markdown table of the configurations measured under a log folder").add_argument(
        "logs", type=Path
    )
    sub.add_parser("check-defaults", help="fail if a configuration beats a default beyond noise").add_argument(
        "logs", type=Path
    )
    args = parser.parse_args(argv)
    if not args.logs.is_dir():
        print(f"error: {args.logs} is not a folder", file=sys.stderr)
        return 2
    if args.command == "table":
        print(configuration_table(args.logs), end="")
        return 0
    check = check_defaults(args.logs)
    for line in check.problems:
        print(line)
    print(f"{len(check.undecided)} comparison(s) with too few repeats to tell (run more repeats to decide them)")
    if not check.problems:
        print(f"no configuration under {args.logs} beats its default beyond noise")
    return 1 if check.problems else 0


if __name__ == "__main__":
    sys.exit(main())
