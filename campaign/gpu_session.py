"""Run the suite on a GPU machine that has the frameworks but not this project's other dependencies.

Such machines (a rented GPU box with a deep-learning image, a GPU machine without internet access) have JAX,
PyTorch and CUDA but not Keras, and sometimes no route to PyPI or the dataset hosts. So:

    # here, with internet: wheels for the GPU machine's Python, and the real datasets from the Keras cache
    python -m campaign.gpu_session pack .carry --python-version 3.12
    # on the GPU machine, one command per phase, each ending within --budget-s and leaving a tarball of logs
    python3 -m campaign.gpu_session run --carry .carry --phase sweep --backends jax,torch --out OUT --budget-s 540
    python3 -m campaign.gpu_session run --carry .carry --phase suite --backends jax --out OUT --budget-s 540
    python3 -m campaign.gpu_session run --carry .carry --phase scaling --backends jax --device-counts 2 \
        --repeats 5 --platform NVIDIA-H200-x2 --existing logs/reference/NVIDIA-H200-x2 --out OUT --budget-s 560
    # here: unpack into logs/, check every log, and write the configuration table
    python -m campaign.gpu_session collect OUT/logs-sweep.tar.gz OUT/logs-suite-jax.tar.gz --logs logs/reference
    # the configuration table and the check that every default is the fastest (campaign/configurations.py)
    python -m campaign.configurations table logs/reference/NVIDIA-H200

Phases: `scaling` runs the short suite data parallel (`--gpus`) at each device count of `--device-counts` under
both batch policies, next to one device, in fresh processes interleaved round robin (docs/distribution.md);
`repeats` runs the short suite (5 epochs on slices sized for 1-3 s epochs) with each backend's defaults,
each workload raised to `--repeats` fresh-process repeats counting those already collected in `--existing`, least
measured first (`--tag` names the machine; `--processes round` trains each backend's workloads of a round in one
process instead of one process per repeat, paying the framework's start-up once a round; `--processes preloaded`
imports the framework once a round and forks a fresh child per repeat; `--processes staged`, PyTorch only, forks
them all at once, their first epochs side by side and their steady epochs one at a time; two designs, e.g.
`--processes repeat,staged`, alternate whole rounds on the machine, A B B A ..., `--repeats` rounds each, so that
campaign.designs' `same_machine` sets them side by side unconfounded by the machine's drift);
`sweep` times each backend's configurations a careful user would try (jit on/off, torch.compile,
steps_per_execution, cuDNN or generic LSTM) for 3 epochs on the bounded suite's data; `suite` runs the bounded
suite (published epochs and hyperparameters) with each backend's default settings; `overhead` measures the
harness's overhead on the GPU; `headroom` trains each workload campaign.headroom supports by one compiled program
per epoch, its data on the device, on the short suite's slice (`--tag` names the machine). `--compile-cache DIR`
keeps compiled programs (JAX, torch.compile) in DIR across the phase's fresh processes; each run records whether
its compile hit it (benchmarks.harness.compile_cache).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from benchmarks.command import RunnerCommand
from benchmarks.harness.compile_cache import ENV as COMPILE_CACHE_ENV
from benchmarks.logs import read_metadata
from benchmarks.metadata import RunMetadata
from benchmarks.repeats import fill_levels, round_order
from benchmarks.suites import get_suite
from benchmarks.workloads import LSTM_WORKLOADS as RECURRENT
from benchmarks.workloads import REFERENCE_WORKLOADS, WORKLOADS
from benchmarks.workloads.native import NATIVE_WORKLOADS
from campaign.designs import DESIGNS as PROCESS_DESIGNS
from campaign.designs import FORKED, process_design
from campaign.preload import BACKENDS as PRELOADED_BACKENDS
from campaign.preload import STAGED_BACKENDS, die_with_parent

REPO = Path(__file__).resolve().parents[1]
# Packages the GPU images commonly lack: Keras and its two small dependencies that ship no CUDA code.
CARRIED_PACKAGES = ("keras==3.15.1", "namex", "optree")
CARRIED_DATASETS = ("fashion-mnist", "nietzsche.txt", "mnist.npz", "imdb.npz", "cifar-10-python.tar.gz")
SWEEP_EPOCHS = 3
# Eager JAX dispatches op by op and runs tens of times slower: it is measured on the small workloads only.
EAGER_JAX_WORKLOADS = ("mnist_mlp", "mnist_cnn", "imdb_fasttext")
# torch.compile spends a minute or more per model before its first step, then may run every step faster.
TORCH_COMPILE_WORKLOADS = WORKLOADS
# steps_per_execution runs several steps per dispatch from the host: it pays off where steps are short.
MULTI_STEP_WORKLOADS = WORKLOADS
# Keras's generic LSTM loop is compiled by XLA on JAX: on the full data of every recurrent workload.
LSTM_WORKLOADS = tuple(w for w in WORKLOADS if w in RECURRENT)
# Keras's generic LSTM loop is 25x slower than cuDNN on a GPU: both kernels are timed on the same slice
# (limits count samples for these two workloads), not on the full data.
LSTM_SLICE_WORKLOADS = ("imdb_bidirectional_lstm", "siamese_lstm")
LSTM_SLICE = ("--train-limit", "2500", "--val-limit", "2500")


@dataclass(frozen=True)
class Configuration:
    flags: tuple[str, ...]
    workloads: tuple[str, ...] = WORKLOADS  # where the configuration applies


def _common_alternatives() -> dict[str, Configuration]:
    return {
        "lstm-cudnn-slice": Configuration(("--lstm-kernel", "auto", *LSTM_SLICE), LSTM_SLICE_WORKLOADS),
        "lstm-generic-slice": Configuration(("--lstm-kernel", "generic", *LSTM_SLICE), LSTM_SLICE_WORKLOADS),
    }


# What a careful user would try per backend, beside the default (benchmarks.harness.backends.DEFAULTS).
CONFIGURATIONS: dict[str, dict[str, Configuration]] = {
    "jax": {
        "default": Configuration(()),
        "jit-off": Configuration(("--jit-compile", "off"), EAGER_JAX_WORKLOADS),
        "steps-per-execution-8": Configuration(("--steps-per-execution", "8"), MULTI_STEP_WORKLOADS),
        "steps-per-execution-32": Configuration(("--steps-per-execution", "32"), MULTI_STEP_WORKLOADS),
        # XLA compiles Keras's generic LSTM loop: on the full data, not only on the slice.
        "lstm-generic": Configuration(("--lstm-kernel", "generic"), LSTM_WORKLOADS),
        "bfloat16": Configuration(("--precision", "bfloat16"), REFERENCE_WORKLOADS),
        "float16": Configuration(("--precision", "float16"), REFERENCE_WORKLOADS),
        **_common_alternatives(),
    },
    "torch": {
        "default": Configuration(()),
        "torch-compile": Configuration(("--jit-compile", "on"), TORCH_COMPILE_WORKLOADS),
        "bfloat16": Configuration(("--precision", "bfloat16"), REFERENCE_WORKLOADS),
        **_common_alternatives(),
    },
    # The native PyTorch twins (benchmarks.workloads.native): eager and compiled, in either half precision.
    "torch-native": {
        "default": Configuration((), NATIVE_WORKLOADS),
        "bfloat16": Configuration(("--precision", "bfloat16"), NATIVE_WORKLOADS),
        "float16": Configuration(("--precision", "float16"), NATIVE_WORKLOADS),
        "torch-compile-bfloat16": Configuration(("--jit-compile", "on", "--precision", "bfloat16"), NATIVE_WORKLOADS),
        "torch-compile-float16": Configuration(("--jit-compile", "on", "--precision", "float16"), NATIVE_WORKLOADS),
        "eager": Configuration(("--jit-compile", "off"), NATIVE_WORKLOADS),
    },
    "tensorflow": {
        "default": Configuration(()),
        "xla-on": Configuration(("--jit-compile", "on")),
        "steps-per-execution-8": Configuration(("--steps-per-execution", "8"), MULTI_STEP_WORKLOADS),
        **_common_alternatives(),
    },
}


@dataclass(frozen=True)
class Item:
    """One runner process: a backend and configuration over several workloads."""

    phase: str
    backend: str
    config: str
    workloads: tuple[str, ...]
    flags: tuple[str, ...]
    epochs: int | None
    dataset: str | None = None  # applies to the workloads that accept it (e.g. fashion_mnist for the MNIST ones)

    @property
    def run_id(self) -> str:
        return f"gpu-{self.phase}-{self.backend}-{self.config}"

    def command(self, python: str, platform: str, out: Path) -> list[str]:
        runner = RunnerCommand(
            self.workloads,
            self.backend,
            platform=platform,
            run_id=self.run_id,
            out=str(out),
            suite="bounded",
            epochs=self.epochs,
            prefer_dataset=self.dataset,
            offline=True,
            allow_synthetic=True,
        )
        return [python, "-m", "benchmarks", *runner.argv(), *self.flags]


def plan(
    phase: str,
    backends: Sequence[str],
    workloads: Sequence[str] = WORKLOADS,
    dataset: str | None = None,
    configs: Sequence[str] | None = None,
) -> list[Item]:
    """The items of a phase, defaults first so a budget cut loses alternatives rather than baselines."""
    if phase == "suite":
        return [
            Item(phase, b, "default", tuple(w for w in workloads if applies(w, b)), (), None, dataset) for b in backends
        ]
    if phase != "sweep":
        raise ValueError(f"unknown phase {phase!r}; choose sweep or suite")
    items = []
    for backend in backends:
        for name, config in CONFIGURATIONS[backend].items():
            chosen = tuple(w for w in workloads if w in config.workloads)
            if chosen and (configs is None or name in configs):
                items.append(Item(phase, backend, name, chosen, config.flags, SWEEP_EPOCHS, dataset))
    return sorted(items, key=lambda item: item.config != "default")


def pack(dest: Path, python_version: str, keras_home: Path) -> None:
    """Wheels for the GPU machine's Python, and whatever real dataset files the local Keras cache holds."""
    wheels = dest / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    platforms = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
    command += ["--python-version", python_version, "--implementation", "cp", "-d", str(wheels)]
    for platform in platforms:
        command += ["--platform", platform]
    subprocess.run([*command, *CARRIED_PACKAGES], check=True)
    datasets = dest / "keras" / "datasets"
    datasets.mkdir(parents=True, exist_ok=True)
    for name in CARRIED_DATASETS:
        source = keras_home / "datasets" / name
        if source.is_dir():
            shutil.copytree(source, datasets / name, dirs_exist_ok=True)
        elif source.is_file():
            shutil.copy2(source, datasets / name)
    print(f"packed {dest}: {sorted(p.name for p in wheels.iterdir())}, datasets {sorted(os.listdir(datasets))}")


def install_carried(carry: Path) -> dict[str, str]:
    """Install the carried wheels into a private folder; return the environment that uses them."""
    site = Path(tempfile.mkdtemp(prefix="kcb-site-"))
    wheels = sorted(str(p) for p in (carry / "wheels").glob("*.whl"))
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--target", str(site)]
    subprocess.run([*command, *wheels], check=True)
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]),
        "KERAS_HOME": str((carry / "keras").resolve()),
        "PYTHONUNBUFFERED": "1",
    }


def run(args: argparse.Namespace) -> int:
    """Run a phase's items within the budget; always leave the logs tarball and a manifest in --out."""
    deadline = time.monotonic() + args.budget_s
    env = install_carried(args.carry)
    if args.compile_cache:
        # Every runner process of the phase keeps its compiled programs there (benchmarks.harness.compile_cache).
        env[COMPILE_CACHE_ENV] = str(args.compile_cache.resolve())
    logs = Path(tempfile.mkdtemp(prefix="kcb-logs-"))
    suffix = _free_suffix(args.out, f"{args.phase}-{'-'.join(args.backends)}")
    manifest = []
    with (args.out / f"console-{suffix}.log").open("w") as console:
        if args.phase == "overhead":
            manifest = _overhead(args, env, logs, console, deadline)
        elif args.phase == "repeats":
            manifest = _repeats(args, env, logs, console, deadline)
        elif args.phase == "scaling":
            manifest = _scaling(args, env, logs, console, deadline)
        elif args.phase == "variance":
            manifest = _variance(args, env, logs, console, deadline)
        elif args.phase == "headroom":
            manifest = _headroom(args, env, logs, console, deadline)
        else:
            items = plan(args.phase, args.backends, args.workloads, _preferred_dataset(args.carry), args.configs)
            manifest = [_run_item(item, args.platform, logs, env, console, deadline) for item in items]
    with tarfile.open(args.out / f"logs-{suffix}.tar.gz", "w:gz") as archive:
        archive.add(logs, arcname=".")
    (args.out / f"manifest-{suffix}.json").write_text(json.dumps(manifest, indent=2))
    return 0 if all(entry["returncode"] == 0 for entry in manifest) else 1


def _free_suffix(out: Path, suffix: str) -> str:
    """The suffix, numbered when an earlier run of the same call already left its files in `out`."""
    n, candidate = 1, suffix
    while (out / f"logs-{candidate}.tar.gz").exists():
        n += 1
        candidate = f"{suffix}-{n}"
    return candidate


def _preferred_dataset(carry: Path) -> str | None:
    """Real Fashion-MNIST for the MNIST workloads when MNIST itself was not carried (same shapes)."""
    datasets = carry / "keras" / "datasets"
    if not (datasets / "mnist.npz").is_file() and (datasets / "fashion-mnist").is_dir():
        return "fashion_mnist"
    return None


def _run_item(item: Item, platform: str, logs: Path, env: dict[str, str], console, deadline: float) -> dict:
    entry = {**asdict(item), "run_id": item.run_id, "returncode": None, "wall_s": 0.0}
    if deadline - time.monotonic() < 30:
        entry["skipped"] = "time budget spent"
        return entry
    console.write(f"\n### {item.run_id}: {' '.join(item.workloads)}\n")
    stopped = "stopped at the time budget; finished workloads are kept"
    return _run_until(item.command(sys.executable, platform, logs), env, console, deadline - 15, entry, stopped)


def _run_until(
    command: list[str], env: dict[str, str], console: TextIO, deadline: float, entry: dict, stopped: str
) -> dict:
    """Run one process into the console, killed at the deadline; its exit status and wall time into `entry`."""
    console.flush()
    started = time.monotonic()
    # its own process group: a preloaded parent's forked child goes down with it at the deadline; and it ends
    # with this process, should that be killed outright
    parent = os.getpid()
    with subprocess.Popen(
        command,
        env=env,
        cwd=REPO,
        stdout=console,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=functools.partial(die_with_parent, parent),
    ) as process:
        try:
            entry["returncode"] = process.wait(timeout=deadline - started)
        except subprocess.TimeoutExpired:
            _stop_group(process)
            entry["returncode"], entry["skipped"] = -1, stopped
    entry["wall_s"] = time.monotonic() - started
    return entry


# A runner told to stop (SIGTERM) records its run as partial, its finished epochs kept, within a few seconds; callers'
# deadlines leave 10-15 s before the call's budget ends.
STOP_GRACE_S = 8.0


def _stop_group(process: subprocess.Popen) -> None:
    """SIGTERM to the process's group, so that each runner in it records what it finished; SIGKILL to whatever is
    still running STOP_GRACE_S later."""
    os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=STOP_GRACE_S)
    with contextlib.suppress(ProcessLookupError):  # the whole group has ended
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _repeats(args: argparse.Namespace, env: dict[str, str], logs: Path, console, deadline: float) -> list[dict]:
    """The short suite's defaults, raising every (workload, backend) to --repeats counting the repeats already
    collected in --existing, least measured first, so that calls cut by their budget (or machines given back) end
    evenly measured rather than the tail of a fixed order never reached. `--processes repeat` starts a fresh
    process per repeat; `--processes round` one per backend per round, training that round's workloads in turn
    (each workload's repeats still come from as many processes as rounds, so their spread between processes stays
    measured, and the process's start-up is paid once a round instead of once a workload); `--processes preloaded`
    one parent per backend per round that imports the framework once and forks a fresh child per workload
    (campaign.preload); `--processes staged` such a parent forking them all at once, to compile side by side and
    measure their steady epochs one at a time. Two designs alternate whole rounds (repeat_rounds)."""
    items = [(w, b) for b in args.backends for w in args.workloads if applies(w, b)]
    alone = len(args.processes) == 1
    counts = existing_repeats(args.existing, items, args.processes[0]) if alone else dict.fromkeys(items, 0)
    walls: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    entries: list[dict] = []
    for round_index, (design, chosen) in enumerate(repeat_rounds(args.processes, args.repeats, items, counts)):
        for group in process_groups(chosen, design):
            # A process that cannot end before the deadline would leave its last workload unfinished: start only
            # what fits, by the same group's wall time in the same design earlier in this call.
            if deadline - time.monotonic() < max(REPEATS_MIN_START_S, 1.2 * walls.get((design, group), 0)):
                continue
            index = max(counts[item] for item in group) + 1
            entry = _repeat_process(args, env, logs, console, deadline, group, index, design)
            walls[design, group] = entry["wall_s"]
            entries.append({**entry, "round": round_index + 1})
            for item in group:
                counts[item] += 1
    console.write(f"\nrounds: {json.dumps(round_walls(entries))}\n")
    return entries


def repeat_rounds(
    designs: Sequence[str], repeats: int, items: Sequence[tuple[str, str]], counts: dict[tuple[str, str], int]
) -> Iterator[tuple[str, list[tuple[str, str]]]]:
    """(design, the round's items in order) per round, read as the rounds run (`counts` moves meanwhile). One
    design: rounds that raise every item to `repeats`, least measured first. Two: `repeats` whole rounds of each,
    alternating (alternating), every item in each."""
    if len(designs) == 1:
        for round_index, level in enumerate(fill_levels(counts, repeats)):
            yield designs[0], round_order(items, round_index, counts, level)
        return
    for round_index, design in enumerate(alternating(designs, repeats)):
        yield design, round_order(items, round_index)


def alternating(designs: Sequence[str], rounds_each: int) -> list[str]:
    """A B B A A B B A ...: in every four rounds each design runs once before and once after the other, so that a
    machine that speeds up or slows down through the call weighs on both designs alike."""
    first, second = designs
    block = (first, second, second, first)
    return [block[i % len(block)] for i in range(2 * rounds_each)]


def process_groups(chosen: Sequence[tuple[str, str]], design: str) -> list[tuple[tuple[str, str], ...]]:
    """The top-level processes of one round: one per (workload, backend), or one per backend in the round's order
    (a round process, or a preloaded parent forking a child per workload)."""
    if design == "repeat":
        return [(item,) for item in chosen]
    backends = list(dict.fromkeys(b for _, b in chosen))
    return [tuple(item for item in chosen if item[1] == backend) for backend in backends]


MIN_EPOCHS = 2  # a run's steady median needs one epoch after the compiling one

# A short-suite process on a GPU takes 10-100 s (torch.compile's first epoch the most); none starts with less left.
REPEATS_MIN_START_S = 30


def existing_repeats(
    logs: Path | None, items: Sequence[tuple[str, str]], design: str = "repeat"
) -> dict[tuple[str, str], int]:
    """Repeats already collected per (workload, backend) in this process design, over every machine's
    gpu-repeats-* folder: the report pools neither design with the other (campaign.designs), so each counts its own."""

    def in_design(path: Path) -> bool:
        meta = read_metadata(path)
        return (process_design(meta) if meta is not None else "repeat") == design

    return {
        (w, b): sum(in_design(p) for p in logs.glob(f"gpu-repeats-*/{w}_{b}*.r*.csv")) if logs else 0 for w, b in items
    }


def _repeat_process(
    args: argparse.Namespace,
    env: dict[str, str],
    logs: Path,
    console: TextIO,
    deadline: float,
    group: tuple[tuple[str, str], ...],
    index: int,
    design: str,
) -> dict:
    """One runner process of `design` for one repeat of each of `group`'s workloads (one backend)."""
    run_id = f"gpu-repeats-{args.tag}"
    workloads, backend = tuple(w for w, _ in group), group[0][1]
    # collect renumbers a repeat after its folder's highest where its index is taken
    console.write(f"\n### {run_id} {' '.join(workloads)} [{backend}] repeat {index}\n")
    entry: dict[str, Any] = {"phase": "repeats", "run_id": run_id, "backend": backend, "repeat": index}
    entry.update({"workload": workloads[0]} if len(workloads) == 1 else {"workloads": list(workloads)})
    entry["design"] = design
    if args.epochs is not None:
        entry["epochs"] = args.epochs
    planned = {"repeat_planned": args.repeats, "epochs": args.epochs}
    runner = functools.partial(_short_suite_repeat, args, logs, backend=backend, run_id=run_id, index=index, **planned)
    command = [sys.executable, "-m", *_repeat_argv(design, backend, workloads, runner)]
    return _run_until(command, env, console, deadline - 10, {**entry, "returncode": None}, "stopped at the time budget")


def _repeat_argv(
    design: str, backend: str, workloads: tuple[str, ...], runner: Callable[[tuple[str, ...]], RunnerCommand]
) -> list[str]:
    """`python -m` arguments of one top-level process of `design` in the repeats phase, `runner` giving the runner
    command that trains some of the workloads: all of them in one runner process, or one per child that
    campaign.preload forks."""
    if design not in FORKED:
        return ["benchmarks", *runner(workloads).argv()]
    staged = ["--staged"] if design == "staged" else []
    runs = (text for w in workloads for text in ("--run", shlex.join(runner((w,)).argv())))
    return ["campaign.preload", "--backend", backend, *staged, *runs]


def _short_suite_repeat(
    args: argparse.Namespace,
    logs: Path,
    workloads: tuple[str, ...],
    backend: str,
    run_id: str,
    index: int,
    **settings: Any,
) -> RunnerCommand:
    """One repeat of some workloads on the short suite's data, offline, as every measuring phase runs it."""
    return RunnerCommand(
        workloads,
        backend,
        platform=args.platform,
        run_id=run_id,
        out=str(logs),
        suite="short",
        prefer_dataset=_preferred_dataset(args.carry),
        offline=True,
        allow_synthetic=True,
        repeat_index=index,
        repeat_group=run_id,
        **settings,
    )


def round_walls(entries: Sequence[dict]) -> dict[str, dict]:
    """Per round of this call: the processes' summed wall seconds, per backend and in all (a round of the
    defaults, where every item was below the same level)."""
    rounds: dict[str, dict] = {}
    for e in entries:
        entry = rounds.setdefault(str(e["round"]), {"processes": 0, "wall_s": 0.0, "by_backend": {}})
        entry["processes"] += 1
        entry["wall_s"] = round(entry["wall_s"] + e["wall_s"], 2)
        entry["by_backend"][e["backend"]] = round(entry["by_backend"].get(e["backend"], 0.0) + e["wall_s"], 2)
    return rounds


# Where the spread of a host-bound workload comes from: the same run in fresh processes, with the garbage collector
# as Python leaves it, frozen, or off, and with the process held to 4 cores (thread placement), interleaved.
VARIANCE_WORKLOAD = ("mnist_mlp", "jax")
VARIANCE_EPOCHS = 8
VARIANCE_VARIANTS: dict[str, tuple[tuple[str, ...], str | None]] = {  # name: (command prefix, runner's --host-gc)
    "gc-on": ((), None),
    "gc-frozen": ((), "frozen"),
    "gc-off": ((), "off"),
    "pinned-4-cores": (("taskset", "-c", "0-3"), None),
}


def _variance(args: argparse.Namespace, env: dict[str, str], logs: Path, console, deadline: float) -> list[dict]:
    workload, backend = VARIANCE_WORKLOAD
    entries: list[dict[str, Any]] = []
    for index in range(1, args.repeats + 1):
        for name, (prefix, gc) in VARIANCE_VARIANTS.items():
            if deadline - time.monotonic() < 60:
                return entries
            run_id = f"gpu-variance-{args.tag}-{name}"
            runner = RunnerCommand(
                (workload,),
                backend,
                platform=args.platform,
                run_id=run_id,
                out=str(logs),
                epochs=VARIANCE_EPOCHS,
                prefer_dataset=_preferred_dataset(args.carry),
                offline=True,
                allow_synthetic=True,
                repeat_index=index,
                repeat_group=run_id,
                repeat_planned=args.repeats,
                host_gc=gc,
            )
            command = [*prefix, sys.executable, "-m", "benchmarks", *runner.argv()]
            started = time.monotonic()
            console.write(f"\n### {run_id} repeat {index}\n")
            console.flush()
            result = subprocess.run(command, env=env, cwd=REPO, stdout=console, stderr=subprocess.STDOUT, check=False)
            entries.append({"phase": "variance", "run_id": run_id, "repeat": index, "returncode": result.returncode})
            entries[-1]["wall_s"] = time.monotonic() - started
    return entries


# The workloads campaign.headroom trains (kept here: that module imports Keras, which this machine may lack).
HEADROOM_WORKLOADS = ("mnist_mlp", "mnist_cnn", "imdb_fasttext", "cifar10_cnn")
HEADROOM_SUFFIX = ".headroom.json"


def _headroom(args: argparse.Namespace, env: dict[str, str], logs: Path, console, deadline: float) -> list[dict]:
    """Each host-bound workload's model trained by one compiled program per epoch, data on the device, on the
    short suite's slice and data (campaign.headroom): what the GPU needs for the epoch the suite times."""
    folder = logs / args.platform / f"gpu-headroom-{args.tag}"
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for workload in (w for w in args.workloads if w in HEADROOM_WORKLOADS):
        command = [sys.executable, "-m", "campaign.headroom", "--workload", workload, "--cut", "short"]
        command += ["--allow-synthetic", "--out", str(folder / f"{workload}{HEADROOM_SUFFIX}")]
        if dataset := _preferred_dataset(args.carry):
            command += ["--prefer-dataset", dataset]
        console.write(f"\n### gpu-headroom-{args.tag} {workload}\n")
        entry = {"phase": "headroom", "run_id": f"gpu-headroom-{args.tag}", "workload": workload, "backend": "jax"}
        entries.append(_run_until(command, env, console, deadline - 10, {**entry, "returncode": None}, "stopped"))
    return entries


@dataclass(frozen=True)
class ScalingConfig:
    devices: int
    batch_policy: str

    @property
    def name(self) -> str:
        return "1gpu" if self.devices == 1 else f"{self.devices}gpu-{self.batch_policy}"


def scaling_configs(device_counts: Sequence[int], policies: Sequence[str] | None = None) -> list[ScalingConfig]:
    """One device (where the batch policies coincide), then every larger count under each policy (both unless
    `policies` names some)."""
    from benchmarks.harness.distribution import BATCH_POLICIES, SAME_GLOBAL

    chosen = [p for p in BATCH_POLICIES if policies is None or p in policies]
    configs = [ScalingConfig(1, SAME_GLOBAL)]
    configs += [ScalingConfig(n, policy) for n in sorted(set(device_counts)) if n > 1 for policy in chosen]
    return configs


def scaling_order(workloads: Sequence[str], configs: Sequence[ScalingConfig], round_index: int) -> list[tuple]:
    """A round: every workload (the start rotating each round), each under every configuration back to back, so
    drift on the machine falls alike on the configurations that the scaling table compares."""
    shift_w, shift_c = round_index % len(workloads), round_index % len(configs)
    rotated_configs = [*configs[shift_c:], *configs[:shift_c]]
    return [(w, c) for w in [*workloads[shift_w:], *workloads[:shift_w]] for c in rotated_configs]


# A short-suite process on an H200 takes 12-30 s; none is started with less than this left.
SCALING_MIN_START_S = 40


def _scaling(args: argparse.Namespace, env: dict[str, str], logs: Path, console, deadline: float) -> list[dict]:
    configs = scaling_configs(args.device_counts, getattr(args, "batch_policies", None))
    entries: list[dict[str, Any]] = []
    counts = existing_scaling_repeats(args.existing, args.tag, args.backends[0], args.workloads, configs)
    # A later call continues the rotation and the repeat numbering where the earlier one stopped.
    for round_index, level in enumerate(fill_levels(counts, args.repeats), start=args.round_offset):
        for workload, config in scaling_round(args.workloads, configs, round_index, counts, level):
            if deadline - time.monotonic() < SCALING_MIN_START_S:
                return entries
            entries.append(_scaling_process(args, env, logs, console, deadline, workload, config, round_index + 1))
            counts[workload, config.name] += 1
    return entries


def existing_scaling_repeats(
    logs: Path | None, tag: str, backend: str, workloads: Sequence[str], configs: Sequence[ScalingConfig]
) -> dict[tuple[str, str], int]:
    """Repeats already collected per workload and configuration, from an earlier session's logs."""
    return {
        (workload, config.name): len(
            list((logs / f"gpu-scaling-{tag}-{config.name}").glob(f"{workload}_{backend}*.r*.csv")) if logs else []
        )
        for workload in workloads
        for config in configs
    }


def scaling_round(
    workloads: Sequence[str],
    configs: Sequence[ScalingConfig],
    round_index: int,
    counts: dict[tuple[str, str], int],
    level: int,
) -> list[tuple[str, ScalingConfig]]:
    """The round's configurations that hold fewer than `level` repeats, the least measured workloads first (a
    budget cut then falls on the best measured), each workload's configurations back to back in the round's order."""
    order = [(w, c) for w, c in scaling_order(workloads, configs, round_index) if counts[w, c.name] < level]
    total = {w: sum(counts[w, c.name] for c in configs) for w in workloads}
    return sorted(order, key=lambda pair: total[pair[0]])


def _scaling_process(
    args: argparse.Namespace,
    env: dict[str, str],
    logs: Path,
    console: TextIO,
    deadline: float,
    workload: str,
    config: ScalingConfig,
    index: int,
) -> dict:
    run_id = f"gpu-scaling-{args.tag}-{config.name}"
    runner = _short_suite_repeat(
        args,
        logs,
        (workload,),
        args.backends[0],
        run_id,
        index,
        gpus=str(config.devices),
        batch_policy=config.batch_policy,
        epochs=getattr(args, "epochs", None),
        train_limit=getattr(args, "train_limit", None),
    )
    console.write(f"\n### {run_id} {workload} repeat {index}\n")
    entry = {"phase": "scaling", "run_id": run_id, "workload": workload, "repeat": index, "returncode": None}
    command = [
        sys.executable,
        "-m",
        "benchmarks",
        *runner.argv(),
        *shlex.split(getattr(args, "runner_flags", "") or ""),
    ]
    return _run_until(command, env, console, deadline - 10, entry, "stopped at the time budget")


def applies(workload: str, backend: str) -> bool:
    """Whether the backend trains the workload: every one on Keras's backends, the twins on torch-native."""
    return workload in NATIVE_WORKLOADS or backend != "torch-native"


def _overhead(args: argparse.Namespace, env: dict[str, str], logs: Path, console, deadline: float) -> list[dict]:
    """Per workload and backend, beside each other: a runner process (short suite, defaults, fresh) and
    benchmarks.overhead on the same workload (the model built as the runner builds it: plain fits and harnessed
    fits alternating on one compiled model), which also holds the runner process's steady median against its plain
    epoch. Each entry carries the overhead's figures; the console ends with their table."""
    entries: list[dict[str, Any]] = []
    run_id = f"gpu-overhead-{args.tag}"
    for backend in args.backends:
        for workload in (w for w in args.workloads if applies(w, backend)):
            if deadline - time.monotonic() < OVERHEAD_MIN_START_S:
                break
            runner = _short_suite_repeat(args, logs, (workload,), backend, run_id, 1)
            console.write(f"\n### {run_id} {workload} [{backend}] runner\n")
            entry: dict[str, Any] = {"phase": "overhead", "run_id": run_id, "workload": workload, "backend": backend}
            entry = _run_until(
                [sys.executable, "-m", "benchmarks", *runner.argv()], env, console, deadline - 10, entry, "stopped"
            )
            csvs = sorted((logs / args.platform / run_id).glob(f"{workload}_{backend}*.r01.csv"))
            command = [sys.executable, "-m", "benchmarks.overhead", "--workload", workload, "--backend", backend]
            command += ["--suite", "short", "--epochs", "2", "--repeats", str(OVERHEAD_PAIRS), "--json"]
            command += ["--runner-csv", str(csvs[-1])] if csvs and entry["returncode"] == 0 else []
            if dataset := _preferred_dataset(args.carry):
                command += ["--dataset", dataset] if workload.startswith("mnist") else []
            entry["overhead"] = _overhead_figures(command, env, console, deadline)
            entries.append(entry)
    console.write("\n" + overhead_table(entries) + "\n")
    return entries


OVERHEAD_PAIRS = 3
OVERHEAD_MIN_START_S = 60


def _overhead_figures(command: list[str], env: dict[str, str], console: TextIO, deadline: float) -> dict | None:
    console.flush()
    try:
        result = subprocess.run(
            command,
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=max(30.0, deadline - time.monotonic() - 10),
        )
    except subprocess.TimeoutExpired:
        return None
    console.write(result.stdout + result.stderr[-3000:])
    lines = [line for line in result.stdout.splitlines() if line.startswith("OVERHEAD ")]
    return json.loads(lines[-1].removeprefix("OVERHEAD ")) if lines else None


def overhead_table(entries: Sequence[dict]) -> str:
    """The runner's share of a steady epoch per workload: in-process (harnessed against plain fits on one model)
    and whole-process (the runner's own steady median against the plain fit)."""
    rows = ["workload                 backend       plain epoch s  harness work %  A/B %    runner process %"]
    for e in entries:
        r = e.get("overhead")
        if not r:
            rows.append(f"{e['workload']:24} {e['backend']:13} (no figures: see the console)")
            continue
        epoch = r["epoch_s"]
        runner = f"{100 * (r['runner_s'] - epoch) / epoch:+.2f}" if "runner_s" in r else "-"
        rows.append(
            f"{e['workload']:24} {e['backend']:13} {epoch:13.4f}  {100 * r['direct_s'] / epoch:14.3f}  "
            f"{100 * r['ab_s'] / epoch:+6.2f}   {runner}"
        )
    return "\n".join(rows)


def collect(tarballs: Sequence[Path], logs: Path) -> list[Path]:
    """Copy the complete runs of result tarballs into the log tree, later tarballs replacing earlier ones.

    Runs stopped by the time budget (status other than complete) are listed and left out: their timing is not a
    result. A complete run whose log does not read back fails the collection. Repeats are never replaced: each call
    numbers its repeats from 1, so a repeat whose name is taken is renumbered after the highest index in its
    folder (file names and metadata), and one already collected (same bytes) is not copied twice.
    """
    from benchmarks.logs import STATUS_COMPLETE, read_epoch_log

    collected: set[Path] = set()
    for tarball in tarballs:
        with tempfile.TemporaryDirectory() as tmp, tarfile.open(tarball) as archive:
            archive.extractall(tmp, filter="data")
            for path in sorted(Path(tmp).rglob("*.csv")):
                relative = path.relative_to(tmp)
                metadata = read_metadata(path)
                if metadata is None or metadata.status != STATUS_COMPLETE:
                    print(f"left out {relative}: status {metadata and metadata.status}")
                    continue
                read_epoch_log(path)
                target = logs / relative
                if metadata.repeat is not None:
                    if _already_collected(path, target):
                        continue
                    target, metadata = _free_repeat(target, metadata)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
                target.with_suffix(".json").write_text(json.dumps(metadata.to_dict(), indent=2))
                collected.add(target)
            for path in sorted(Path(tmp).rglob(f"*{HEADROOM_SUFFIX}")):
                target = logs / path.relative_to(tmp)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
                collected.add(target)
    print(f"collected {len(collected)} complete runs and headroom records into {logs}")
    return sorted(collected)


def _repeat_base(target: Path) -> str:
    return target.stem.rpartition(".")[0]


def _already_collected(source: Path, target: Path) -> bool:
    return any(p.read_bytes() == source.read_bytes() for p in target.parent.glob(f"{_repeat_base(target)}.r*.csv"))


def _free_repeat(target: Path, metadata: RunMetadata) -> tuple[Path, RunMetadata]:
    if not target.exists() or metadata.repeat is None:
        return target, metadata
    taken = [int(p.stem.rpartition(".r")[2]) for p in target.parent.glob(f"{_repeat_base(target)}.r*.csv")]
    index = max(taken) + 1
    renumbered = replace(metadata, repeat=replace(metadata.repeat, index=index))
    return target.with_name(f"{_repeat_base(target)}.r{index:02d}.csv"), renumbered


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m campaign.gpu_session", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="collect wheels and datasets for the GPU machine")
    p.add_argument("dest", type=Path)
    p.add_argument("--python-version", default="3.12")
    p.add_argument("--keras-home", type=Path, default=Path(os.environ.get("KERAS_HOME", Path.home() / ".keras")))
    p = sub.add_parser("plan", help="print a phase's runner commands")
    p.add_argument("--phase", choices=("sweep", "suite"), required=True)
    p.add_argument("--backends", default="jax,torch")
    p = sub.add_parser("run", help="run a phase on the GPU machine")
    p.add_argument("--carry", type=Path, required=True)
    phases = ("sweep", "suite", "overhead", "repeats", "variance", "scaling", "headroom")
    p.add_argument("--phase", choices=phases, required=True)
    p.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="repeats: per workload; scaling: per workload and configuration, counting --existing",
    )
    p.add_argument(
        "--processes",
        type=_process_designs,
        default="repeat",
        help="repeats: a fresh process per repeat (default), one per backend per round training its workloads "
        "(round), one parent per backend per round forking a fresh child per workload after importing the "
        "framework once (preloaded), or such a parent forking them all at once, first epochs side by side and steady "
        "epochs one child at a time (staged, torch only); two, e.g. repeat,staged, alternate whole rounds A B B A, "
        "--repeats rounds each",
    )
    p.add_argument(
        "--epochs",
        type=int,
        help="repeats: epochs per run, the compiling one included (default: the short suite's 5); at least 2. "
        "`python -m campaign.today LOGS --epochs` says how many steady epochs keep the verdicts",
    )
    p.add_argument("--tag", default="a", help="repeats, scaling, headroom: names this machine's run (gpu-PHASE-TAG)")
    p.add_argument("--device-counts", default="2", help="scaling: device counts beside one, e.g. 2,4")
    p.add_argument("--round-offset", type=int, default=0, help="scaling: rounds an earlier call already ran")
    p.add_argument("--batch-policies", type=lambda t: tuple(t.split(",")), help="scaling: only these (default: both)")
    p.add_argument("--runner-flags", help="scaling: more runner flags for every process, e.g. '--jit-compile off'")
    p.add_argument(
        "--train-limit",
        type=int,
        help="scaling: train on this many samples instead of the short suite's (e.g. 4x, for 4 GPUs' larger batch)",
    )
    p.add_argument(
        "--existing",
        type=Path,
        help="repeats, scaling: earlier calls' collected logs (the platform's folder), counted; least measured first",
    )
    p.add_argument("--backends", default="jax,torch")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--configs", help="sweep only these configurations (default: all of each backend's)")
    p.add_argument("--platform", default="gpu")
    p.add_argument(
        "--compile-cache",
        type=Path,
        help="keep compiled programs in this folder across the phase's fresh processes (JAX, torch.compile); "
        "a run records whether its compile hit it",
    )
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--budget-s", type=float, default=540)
    p = sub.add_parser("collect", help="unpack result tarballs into the log tree")
    p.add_argument("tarballs", type=Path, nargs="+")
    p.add_argument("--logs", type=Path, default=Path("logs"))
    return parser


def _process_designs(text: str) -> tuple[str, ...]:
    """--processes: one design, or two different ones to alternate round by round."""
    names = tuple(n for n in text.split(",") if n)
    if not 1 <= len(names) <= 2 or len(set(names)) != len(names) or set(names) - set(PROCESS_DESIGNS):
        raise argparse.ArgumentTypeError(
            f"{text!r}: one design, or two different ones separated by a comma, among {', '.join(PROCESS_DESIGNS)}"
        )
    return names


def _names(text: str, allowed: Sequence[str], what: str) -> tuple[str, ...]:
    names = tuple(n for n in text.split(",") if n)
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        raise SystemExit(f"error: unknown {what} {', '.join(unknown) or text!r}; choose from {', '.join(allowed)}")
    return names


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "pack":
        pack(args.dest, args.python_version, args.keras_home)
        return 0
    if args.command == "collect":
        collect(args.tarballs, args.logs)
        return 0
    args.backends = _names(args.backends, list(CONFIGURATIONS), "backend")
    if args.command == "plan":
        for item in plan(args.phase, args.backends):
            print(" ".join(item.command("python3", "PLATFORM", Path("OUT"))))
        return 0
    args.workloads = _names(args.workloads, get_suite("bounded").workloads, "workload")
    if "torch-native" in args.backends and not any(applies(w, "torch-native") for w in args.workloads):
        raise SystemExit(f"error: --backends torch-native trains only {', '.join(NATIVE_WORKLOADS)}")
    known = sorted({name for backend in args.backends for name in CONFIGURATIONS[backend]})
    args.configs = _names(args.configs, known, "configuration") if args.configs else None
    args.device_counts = _device_counts(args.device_counts)
    if args.phase == "scaling" and len(args.backends) != 1:
        raise SystemExit("error: --backends: the scaling phase takes one backend (torch has no data-parallel fit)")
    if args.epochs is not None and args.epochs < MIN_EPOCHS:
        raise SystemExit(
            f"error: --epochs: at least {MIN_EPOCHS} (the compiling epoch and a steady one), got {args.epochs}"
        )
    for design in args.processes:
        allowed = {"preloaded": PRELOADED_BACKENDS, "staged": STAGED_BACKENDS}.get(design)
        if allowed is not None and set(args.backends) - set(allowed):
            raise SystemExit(f"error: --processes {design}: --backends must be among {', '.join(allowed)}")
    if len(args.processes) > 1 and args.existing is not None:
        raise SystemExit(
            "error: --existing: alternating designs run --repeats rounds of each on this machine, whatever was "
            "collected before; leave --existing out"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    return run(args)


def _device_counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(n) for n in text.split(",") if n)
    except ValueError:
        raise SystemExit(f"error: --device-counts: expected comma-separated integers, got {text!r}") from None
    if not counts or min(counts) < 1:
        raise SystemExit(f"error: --device-counts: expected positive integers, got {text!r}")
    return counts


if __name__ == "__main__":
    sys.exit(main())
