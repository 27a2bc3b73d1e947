"""A user's workload files (`run --workload-file`) on the orchestrator's side: read and checked here before anything
is launched or paid for, then carried to the host beside the run's logs and mounted into each container read-only,
so the image is used as it is (benchmarks.plugins is the runner's side).

Reading them (`run_workloads`: the run's `benchmarks.workload_set.Workloads`) imports nothing. The check
(`check_workload_files`, only when a file is given) imports each file, checks its SPEC, builds its model and trains
one step on a tiny batch on the CPU, in a `python -m benchmarks check-workload` subprocess: the orchestrator itself
imports no framework.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks.plugins import BadWorkload
from benchmarks.step_costs import read_step_costs, record_path
from benchmarks.suites import Suite
from benchmarks.workload_set import Workload, Workloads, workloads_of

CONTAINER_DIR = "/workloads"  # where a container sees the run's workload files
CHECK_TIMEOUT_S = 600
BACKEND_PREFERENCE = ("jax", "torch", "tensorflow")  # the quickest to import first, for the check


def run_workloads(paths: Sequence[Path]) -> Workloads:
    """The run's workloads: the built-in ones and the files given, read without importing them; BadWorkload names
    the first unreadable file."""
    return workloads_of(paths)


def suite_workloads(suite: Suite, chosen: str | None, workloads: Workloads) -> list[str]:
    """The workloads a run or a schedule plans: the suite's (UnknownSuite names one it lacks); with workload files,
    theirs alone unless `chosen` (--workloads) names built-in ones too (and only those of them it names, if any)."""
    mine = [w.name for w in workloads.files]
    if not mine:
        return suite.subset("workload", chosen)
    names = [name.strip() for name in (chosen or "").split(",") if name.strip()]
    built_in = [name for name in names if name not in mine]
    named = [name for name in names if name in mine] or mine
    return [*(suite.subset("workload", ",".join(built_in)) if built_in else []), *named]


def check_workload_files(workloads: Workloads, backends: Sequence[str]) -> list[str]:
    """Train one step of each workload file's model on the CPU in a subprocess, with the first of the run's
    backends installed here (else any installed one); the check's lines, or BadWorkload with its one-line error.
    Without a file there is nothing to check, and no backend is needed here."""
    if not workloads.files:
        return []
    backend = _local_backend(backends)
    return [_check(file, backend) for file in workloads.files]


def _local_backend(backends: Sequence[str]) -> str:
    for backend in (*backends, *BACKEND_PREFERENCE):
        if importlib.util.find_spec(backend) is not None:
            return backend
    raise BadWorkload(
        "--workload-file: checking a workload needs Keras and one backend here (pip install keras jax), "
        "so that it is checked before a machine is paid for"
    )


def _check(file: Workload, backend: str) -> str:
    command = [sys.executable, "-m", "benchmarks", "check-workload", "--workload-file", str(file.path)]
    try:
        done = subprocess.run(
            [*command, "--backend", backend], capture_output=True, text=True, timeout=CHECK_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise BadWorkload(f"{file.path.name}: its check took over {CHECK_TIMEOUT_S} s on the CPU") from None
    said_ok = [line.removeprefix("ok: ") for line in done.stdout.splitlines() if line.startswith("ok: ")]
    if done.returncode == 0 and said_ok:
        return said_ok[-1]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    if errors:
        raise BadWorkload(errors[-1].removeprefix("error: "))
    last = (done.stderr.strip().splitlines() or [""])[-1]
    ended = f"exit status {done.returncode}" if done.returncode >= 0 else f"signal {-done.returncode}"
    raise BadWorkload(f"{file.path.name}: its check ended ({ended}) without saying ok" + (f": {last}" if last else ""))


def measure_step_costs(files: Sequence[Workload], logs: Path, data_dir: Path | None = None) -> list[str]:
    """Each file's step costs (benchmarks.step_costs) in `logs/step-costs/`, measured on the CPU with Keras on JAX
    in a `python -m benchmarks step-costs` subprocess unless a record of the same content is there: what the
    estimate's physics basis prices on a GPU. One line each; a file that cannot be measured says why, and its
    estimate rests on the other bases."""
    lines = []
    for file in files:
        path = record_path(logs, file.name, file.sha256)
        if read_step_costs(path) is not None:
            lines.append(f"{file.path.name}: step costs measured before ({path})")
            continue
        if importlib.util.find_spec("jax") is None:
            lines.append(f"{file.path.name}: no step costs: their analysis needs JAX here (pip install jax)")
            continue
        command = [sys.executable, "-m", "benchmarks", "step-costs", "--workload-file", str(file.path),
                   "--out", str(logs), *(["--data-dir", str(data_dir)] if data_dir else [])]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            lines.append(f"{file.path.name}: no step costs: their analysis took over {CHECK_TIMEOUT_S} s")
            continue
        said = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith(("step costs:", "error:"))]
        lines.append(f"{file.path.name}: " + (said[-1] if said else f"no step costs (exit {done.returncode})"))
    return lines
