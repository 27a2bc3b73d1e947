"""Run the suite on a GPU machine that has the frameworks but not this project's other dependencies.

Such machines (a rented GPU box with a deep-learning image, a shared accelerator with no internet) have JAX,
PyTorch and CUDA but not Keras, and sometimes no route to PyPI or the dataset hosts. So:

    # here, with internet: wheels for the GPU machine's Python, and the real datasets from the Keras cache
    python -m benchmarks.gpu_session pack .carry --python-version 3.12
    # there, one call per phase, each ending within its time budget and leaving a tarball of logs
    python3 -m benchmarks.gpu_session run --carry .carry --phase sweep --backends jax,torch --out OUT --budget-s 540
    python3 -m benchmarks.gpu_session run --carry .carry --phase suite --backends jax --out OUT --budget-s 540
    # here: unpack into logs/, check every log, and write the configuration table
    python -m benchmarks.gpu_session collect OUT/logs-sweep.tar.gz OUT/logs-suite-jax.tar.gz --logs logs

Phases: `repeats` runs the short suite (5 epochs on slices sized for 1-3 s epochs) with each backend's defaults,
N fresh-process repeats of every workload interleaved round robin (`--repeats`, `--tag` names the machine);
`sweep` times each backend's configurations a careful user would try (jit on/off, torch.compile,
steps_per_execution, cuDNN or generic LSTM) for 3 epochs on the bounded suite's data; `suite` runs the bounded
suite (published epochs and hyperparameters) with each backend's default settings; `overhead` measures the
harness's overhead on the GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.suites import get_suite
from benchmarks.workloads import WORKLOADS

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
# Named here, not read from the specs: those import Keras, which this process on the GPU machine lacks.
LSTM_WORKLOADS = (
    "imdb_bidirectional_lstm",
    "lstm_text_generation",
    "text_generator_keras",
    "twitter_sentiment_bilstm",
    "siamese_lstm",
)
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
        **_common_alternatives(),
    },
    "torch": {
        "default": Configuration(()),
        "torch-compile": Configuration(("--jit-compile", "on"), TORCH_COMPILE_WORKLOADS),
        **_common_alternatives(),
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
        command = [python, "-m", "benchmarks", "run", "--workload", ",".join(self.workloads)]
        command += ["--backend", self.backend, "--suite", "bounded", "--platform", platform]
        command += ["--out", str(out), "--run-id", self.run_id, "--allow-synthetic", "--offline", *self.flags]
        command += ["--epochs", str(self.epochs)] if self.epochs else []
        return command + (["--prefer-dataset", self.dataset] if self.dataset else [])


def plan(
    phase: str,
    backends: Sequence[str],
    workloads: Sequence[str] = WORKLOADS,
    dataset: str | None = None,
    configs: Sequence[str] | None = None,
) -> list[Item]:
    """The items of a phase, defaults first so a budget cut loses alternatives rather than baselines."""
    if phase == "suite":
        return [Item(phase, b, "default", tuple(workloads), (), None, dataset) for b in backends]
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
    logs = Path(tempfile.mkdtemp(prefix="kcb-logs-"))
    suffix = _free_suffix(args.out, f"{args.phase}-{'-'.join(args.backends)}")
    manifest = []
    with (args.out / f"console-{suffix}.log").open("w") as console:
        if args.phase == "overhead":
            manifest = _overhead(args, env, console, deadline)
        elif args.phase == "repeats":
            manifest = [_repeats(args, env, logs, console, deadline)]
        elif args.phase == "variance":
            manifest = _variance(args, env, logs, console, deadline)
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
    remaining = deadline - time.monotonic()
    entry = {**asdict(item), "run_id": item.run_id, "returncode": None, "wall_s": 0.0}
    if remaining < 30:
        entry["skipped"] = "time budget spent"
        return entry
    started = time.monotonic()
    console.write(f"\n### {item.run_id}: {' '.join(item.workloads)}\n")
    console.flush()
    try:
        result = subprocess.run(
            item.command(sys.executable, platform, logs),
            env=env,
            cwd=REPO,
            stdout=console,
            stderr=subprocess.STDOUT,
            timeout=remaining - 15,
        )
        entry["returncode"] = result.returncode
    except subprocess.TimeoutExpired:
        entry["returncode"] = -1
        entry["skipped"] = "stopped at the time budget; finished workloads are kept"
    entry["wall_s"] = time.monotonic() - started
    return entry


def _repeats(args: argparse.Namespace, env: dict[str, str], logs: Path, console, deadline: float) -> dict:
    """The short suite with N repeats per workload and backend, started only while the budget lasts."""
    run_id = f"gpu-repeats-{args.tag}"
    command = [sys.executable, "-m", "benchmarks", "suite", "--suite", "short", "--repeats", str(args.repeats)]
    command += ["--backends", ",".join(args.backends), "--workloads", ",".join(args.workloads)]
    command += ["--platform", args.platform, "--out", str(logs), "--run-id", run_id, "--offline"]
    # Repeats that would start after this still run to their end: leave room for the longest one.
    command += ["--budget", str(max(1, int(deadline - time.monotonic() - 120)))]
    if dataset := _preferred_dataset(args.carry):
        command += ["--prefer-dataset", dataset]
    started = time.monotonic()
    console.write(f"\n### {run_id}: {' '.join(command[3:])}\n")
    console.flush()
    try:
        code = subprocess.run(
            command,
            env=env,
            cwd=REPO,
            stdout=console,
            stderr=subprocess.STDOUT,
            timeout=deadline - time.monotonic() - 10,
        ).returncode
    except subprocess.TimeoutExpired:
        code = -1
    return {"phase": "repeats", "run_id": run_id, "returncode": code, "wall_s": time.monotonic() - started}


# Where the spread of a host-bound workload comes from: the same run in fresh processes, with the garbage collector
# as Python leaves it, frozen, or off, and with the process held to 4 cores (thread placement), interleaved.
VARIANCE_WORKLOAD = ("mnist_mlp", "jax")
VARIANCE_EPOCHS = 8
VARIANCE_VARIANTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {  # name: (command prefix, runner flags)
    "gc-on": ((), ()),
    "gc-frozen": ((), ("--host-gc", "frozen")),
    "gc-off": ((), ("--host-gc", "off")),
    "pinned-4-cores": (("taskset", "-c", "0-3"), ()),
}


def _variance(args: argparse.Namespace, env: dict[str, str], logs: Path, console, deadline: float) -> list[dict]:
    workload, backend = VARIANCE_WORKLOAD
    entries = []
    for index in range(1, args.repeats + 1):
        for name, (prefix, flags) in VARIANCE_VARIANTS.items():
            if deadline - time.monotonic() < 60:
                return entries
            run_id = f"gpu-variance-{args.tag}-{name}"
            command = [*prefix, sys.executable, "-m", "benchmarks", "run", "--workload", workload, "--backend", backend]
            command += ["--platform", args.platform, "--out", str(logs), "--run-id", run_id, "--offline"]
            command += ["--epochs", str(VARIANCE_EPOCHS), "--repeat-index", str(index), "--repeat-group", run_id]
            command += ["--repeat-planned", str(args.repeats), *flags, "--allow-synthetic"]
            if dataset := _preferred_dataset(args.carry):
                command += ["--prefer-dataset", dataset]
            started = time.monotonic()
            console.write(f"\n### {run_id} repeat {index}\n")
            console.flush()
            result = subprocess.run(command, env=env, cwd=REPO, stdout=console, stderr=subprocess.STDOUT, check=False)
            entries.append({"phase": "variance", "run_id": run_id, "repeat": index, "returncode": result.returncode})
            entries[-1]["wall_s"] = time.monotonic() - started
    return entries


def _overhead(args: argparse.Namespace, env: dict[str, str], console, deadline: float) -> list[dict]:
    entries = []
    for backend in args.backends:
        dataset = _preferred_dataset(args.carry) or "synthetic"
        command = [sys.executable, "-m", "benchmarks.overhead", "--backend", backend, "--dataset", dataset]
        started = time.monotonic()
        result = subprocess.run(
            [*command, "--repeats", "5"],
            env=env,
            cwd=REPO,
            stdout=console,
            stderr=subprocess.STDOUT,
            timeout=max(30.0, deadline - time.monotonic() - 15),
        )
        entries.append({"phase": "overhead", "backend": backend, "returncode": result.returncode})
        entries[-1]["wall_s"] = time.monotonic() - started
    return entries


def collect(tarballs: Sequence[Path], logs: Path) -> list[Path]:
    """Copy the complete runs of result tarballs into the log tree, later tarballs replacing earlier ones.

    Runs stopped by the time budget (status other than complete) are listed and left out: their timing is not a
    result. A complete run whose log does not read back fails the collection.
    """
    from benchmarks.logs import STATUS_COMPLETE, read_epoch_log, read_metadata

    collected: set[Path] = set()
    for tarball in tarballs:
        with tempfile.TemporaryDirectory() as tmp, tarfile.open(tarball) as archive:
            archive.extractall(tmp, filter="data")
            for path in sorted(Path(tmp).rglob("*.csv")):
                relative = path.relative_to(tmp)
                status = (read_metadata(path) or {}).get("status")
                if status != STATUS_COMPLETE:
                    print(f"left out {relative}: status {status}")
                    continue
                read_epoch_log(path)
                target = logs / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
                shutil.copy2(path.with_suffix(".json"), target.with_suffix(".json"))
                collected.add(target)
    print(f"collected {len(collected)} complete runs into {logs}")
    return sorted(collected)


@dataclass(frozen=True)
class Measured:
    """One run's steady-epoch time, with what it was run with."""

    workload: str
    backend: str
    run_id: str
    settings: str  # jit, steps per execution, LSTM kernel, float32 matmul: what changes the time
    train_samples: int
    epochs: int
    steady_median: float
    first_epoch: float

    @property
    def is_default(self) -> bool:
        return self.run_id.startswith("gpu-suite-") and self.run_id.endswith("-default")


def describe_settings(settings: dict) -> str:
    """The settings a run's time depends on, in words; runs from before a field was recorded say "framework
    default" for it (float32 matmul: TF32 on JAX, float32 matmuls with TF32 cuDNN kernels on PyTorch)."""
    parts = [f"jit {'on' if settings.get('jit_compile') else 'off'}"]
    parts.append(f"{settings.get('steps_per_execution') or 1} step/exec")
    if settings.get("lstm_kernel"):
        parts.append(f"{settings['lstm_kernel']} LSTM")
    parts.append(f"{settings.get('float32_matmul') or 'framework-default'} matmul")
    return ", ".join(parts)


def measurements(logs: Path) -> list[Measured]:
    """Every complete run under `logs` that has steady epochs."""
    from benchmarks.logs import STATUS_COMPLETE, find_logs, read_epoch_log

    found: list[Measured] = []
    for path in find_logs(logs):
        log = read_epoch_log(path)
        meta = log.metadata or {}
        steady = [e.elapsed for e in log.steady_epochs]
        if meta.get("status") != STATUS_COMPLETE or not steady or log.first_epoch is None:
            continue
        found.append(
            Measured(
                workload=meta["workload"],
                backend=meta["backend"],
                run_id=str(meta.get("run_id") or path.parent.name),
                settings=describe_settings(meta.get("settings") or {}),
                train_samples=int((meta.get("data") or {}).get("train_samples") or 0),
                epochs=len(log.epochs),
                steady_median=statistics.median(steady),
                first_epoch=log.first_epoch.elapsed,
            )
        )
    return found


def _comparable(found: Sequence[Measured]) -> dict[tuple[str, str, int], list[Measured]]:
    """Runs that compare: one workload, one backend, the same training samples (a slice only with a slice)."""
    groups: dict[tuple[str, str, int], list[Measured]] = {}
    for m in found:
        groups.setdefault((m.workload, m.backend, m.train_samples), []).append(m)
    return {key: sorted(group, key=lambda m: m.steady_median) for key, group in sorted(groups.items())}


# Separate runs of the same settings on the H200 differed by up to 10% in steady epochs (text_generator_keras on
# PyTorch: 12.77 s and 14.09 s): a smaller difference between two configurations does not rank them.
RUN_TO_RUN_SPREAD = 0.10


def slower_defaults(logs: Path, tolerance: float = RUN_TO_RUN_SPREAD) -> list[str]:
    """Each default run that another measured configuration beats by more than `tolerance` in steady epochs."""
    problems = []
    for (workload, backend, _), group in _comparable(measurements(logs)).items():
        fastest = group[0]
        for default in (m for m in group if m.is_default):
            if default.settings != fastest.settings and default.steady_median > fastest.steady_median * (1 + tolerance):
                problems.append(
                    f"{workload} on {backend}: the default ({default.settings}) takes {default.steady_median:.2f} s "
                    f"a steady epoch, {fastest.run_id} ({fastest.settings}) {fastest.steady_median:.2f} s"
                )
    return problems


def configuration_table(logs: Path) -> str:
    """Markdown: median steady-epoch seconds of every configuration measured, fastest first within each group
    of comparable runs; the suite's default and the fastest settings are marked."""
    lines = [
        "| workload | backend | train samples | settings | run | steady epoch s (median) | first epoch s | epochs |",
        "|---|---|---:|---|---|---:|---:|---:|",
    ]
    for (workload, backend, samples), group in _comparable(measurements(logs)).items():
        fastest = group[0].settings if len({m.settings for m in group}) > 1 else None
        for m in group:
            marks = [mark for mark, on in (("default", m.is_default), ("fastest", m.settings == fastest)) if on]
            label = f"{m.settings}{''.join(f' **{mark}**' for mark in marks)}"
            run = m.run_id.removeprefix("gpu-")
            lines.append(
                f"| {workload} | {backend} | {samples:,} | {label} | {run} | {m.steady_median:.2f} | "
                f"{m.first_epoch:.2f} | {m.epochs} |"
            )
    return "\n".join(lines) + "\n"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_session", description=__doc__.splitlines()[0])
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
    p.add_argument("--phase", choices=("sweep", "suite", "overhead", "repeats", "variance"), required=True)
    p.add_argument("--repeats", type=int, default=3, help="repeats phase: repeats per workload and backend")
    p.add_argument("--tag", default="a", help="repeats phase: names this machine's run (gpu-repeats-TAG)")
    p.add_argument("--backends", default="jax,torch")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--configs", help="sweep only these configurations (default: all of each backend's)")
    p.add_argument("--platform", default="gpu")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--budget-s", type=float, default=540)
    p = sub.add_parser("collect", help="unpack result tarballs into the log tree")
    p.add_argument("tarballs", type=Path, nargs="+")
    p.add_argument("--logs", type=Path, default=Path("logs"))
    p = sub.add_parser("configurations", help="markdown table of the configurations measured under a log folder")
    p.add_argument("logs", type=Path)
    p = sub.add_parser("check-defaults", help="fail if a measured configuration beats a default run")
    p.add_argument("logs", type=Path)
    p.add_argument("--tolerance", type=float, default=RUN_TO_RUN_SPREAD, help="relative margin taken as noise")
    return parser


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
    if args.command == "configurations":
        print(configuration_table(args.logs), end="")
        return 0
    if args.command == "check-defaults":
        problems = slower_defaults(args.logs, args.tolerance)
        print("\n".join(problems) if problems else f"every default under {args.logs} is its fastest configuration")
        return 1 if problems else 0
    args.backends = _names(args.backends, list(CONFIGURATIONS), "backend")
    if args.command == "plan":
        for item in plan(args.phase, args.backends):
            print(" ".join(item.command("python3", "PLATFORM", Path("OUT"))))
        return 0
    args.workloads = _names(args.workloads, get_suite("bounded").workloads, "workload")
    known = sorted({name for backend in args.backends for name in CONFIGURATIONS[backend]})
    args.configs = _names(args.configs, known, "configuration") if args.configs else None
    args.out.mkdir(parents=True, exist_ok=True)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
