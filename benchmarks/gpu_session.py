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

Phases: `sweep` times each backend's configurations a careful user would try (jit on/off, torch.compile,
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
# torch.compile spends a minute or more per model before its first step: measured where that can pay off.
TORCH_COMPILE_WORKLOADS = ("mnist_mlp", "mnist_cnn", "cifar10_cnn", "imdb_fasttext", "imdb_bidirectional_lstm")
# steps_per_execution pays off where steps are short; the PyDataset-fed workloads are left out.
MULTI_STEP_WORKLOADS = (
    "mnist_mlp",
    "mnist_cnn",
    "imdb_fasttext",
    "imdb_bidirectional_lstm",
    "lstm_text_generation",
    "text_generator_keras",
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
        "lstm-cudnn-slice": Configuration(LSTM_SLICE, LSTM_SLICE_WORKLOADS),
        "lstm-generic-slice": Configuration(("--lstm-kernel", "generic", *LSTM_SLICE), LSTM_SLICE_WORKLOADS),
    }


# What a careful user would try per backend, beside the default (benchmarks.harness.backends.DEFAULTS).
CONFIGURATIONS: dict[str, dict[str, Configuration]] = {
    "jax": {
        "default": Configuration(()),
        "jit-off": Configuration(("--jit-compile", "off"), EAGER_JAX_WORKLOADS),
        "steps-per-execution-8": Configuration(("--steps-per-execution", "8"), MULTI_STEP_WORKLOADS),
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
    suffix = f"{args.phase}-{'-'.join(args.backends)}"
    manifest = []
    with (args.out / f"console-{suffix}.log").open("w") as console:
        if args.phase == "overhead":
            manifest = _overhead(args, env, console, deadline)
        else:
            items = plan(args.phase, args.backends, args.workloads, _preferred_dataset(args.carry), args.configs)
            manifest = [_run_item(item, args.platform, logs, env, console, deadline) for item in items]
    with tarfile.open(args.out / f"logs-{suffix}.tar.gz", "w:gz") as archive:
        archive.add(logs, arcname=".")
    (args.out / f"manifest-{suffix}.json").write_text(json.dumps(manifest, indent=2))
    return 0 if all(entry["returncode"] == 0 for entry in manifest) else 1


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


def configuration_table(logs: Path) -> str:
    """Markdown: median steady-epoch seconds of every workload x backend x configuration in the sweep and suite."""
    from benchmarks.logs import find_logs, read_epoch_log

    rows: dict[tuple[str, str], dict[tuple[str, str], tuple[float, float, int]]] = {}
    for path in find_logs(logs):
        log = read_epoch_log(path)
        meta = log.metadata or {}
        phase_config = path.parent.name.removeprefix("gpu-").split("-", 2)  # phase, backend, config
        steady = [e.elapsed for e in log.steady_epochs]
        if len(phase_config) != 3 or not steady:
            continue
        phase, backend, config = phase_config
        label = (config, f"{phase}, {log.epochs[-1].epoch + 1} epochs")
        summary = (statistics.median(steady), log.epochs[0].elapsed, len(steady))
        rows.setdefault((meta["workload"], backend), {})[label] = summary
    lines = [
        "| workload | backend | configuration | steady epoch s (median) | first epoch s | steady epochs |",
        "|---|---|---|---:|---:|---:|",
    ]
    for (workload, backend), configs in sorted(rows.items()):
        # The fastest configuration by name: the same configuration measured twice (sweep and suite) is one.
        names = {config for config, _ in configs}
        fastest = min(configs, key=lambda label: configs[label][0])[0] if len(names) > 1 else None
        for (config, where), (median, first, n) in sorted(configs.items(), key=lambda item: item[1][0]):
            mark = " **fastest**" if config == fastest else ""
            lines.append(f"| {workload} | {backend} | {config}{mark} ({where}) | {median:.2f} | {first:.2f} | {n} |")
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
    p.add_argument("--phase", choices=("sweep", "suite", "overhead"), required=True)
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
