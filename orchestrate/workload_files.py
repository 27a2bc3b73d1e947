"""A user's workload files (`run --workload-file`) on the orchestrator's side: read and checked here before anything
is launched or paid for, then carried to the host beside the run's logs and mounted into each container read-only,
so the image is used as it is (benchmarks.plugins is the runner's side).

The check imports the file, checks its SPEC, builds its model and trains one step on a tiny batch on the CPU, in a
`python -m benchmarks check-workload` subprocess: the orchestrator itself imports no framework.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.plugins import BadWorkload, Declared, declared
from benchmarks.suites import Suite

CONTAINER_DIR = "/workloads"  # where a container sees the run's workload files
CHECK_TIMEOUT_S = 600
BACKEND_PREFERENCE = ("jax", "torch", "tensorflow")  # the quickest to import first, for the check

_CHECKED: dict[tuple[str, str], str] = {}  # (sha256, backend) -> the check's line: a fan-out plans each profile


@dataclass(frozen=True)
class WorkloadFile:
    path: Path  # absolute, on this machine
    spec: Declared  # its SPEC's literals

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def in_container(self) -> str:
        return f"{CONTAINER_DIR}/{self.path.name}"


def read_workload_files(paths: Sequence[Path]) -> tuple[WorkloadFile, ...]:
    """Each file's declared SPEC, read without importing it; BadWorkload names the first unreadable one."""
    files = tuple(WorkloadFile(Path(p).expanduser().resolve(), declared(p)) for p in paths)
    for what, values in (("file name", [f.path.name for f in files]), ("SPEC.name", [f.name for f in files])):
        repeated = sorted({v for v in values if values.count(v) > 1})
        if repeated:
            raise BadWorkload(f"--workload-file: two files with the {what} {repeated[0]}; give each once")
    return files


def suite_workloads(suite: Suite, chosen: str | None, plugins: Sequence[str]) -> list[str]:
    """The workloads a run or a schedule plans: the suite's (UnknownSuite names one it lacks); with workload files,
    theirs alone unless `chosen` (--workloads) names built-in ones too (and only those of them it names, if any)."""
    if not plugins:
        return suite.subset("workload", chosen)
    names = [name.strip() for name in (chosen or "").split(",") if name.strip()]
    built_in = [name for name in names if name not in plugins]
    named = [name for name in names if name in plugins] or list(plugins)
    return [*(suite.subset("workload", ",".join(built_in)) if built_in else []), *named]


def check_workload_files(files: Sequence[WorkloadFile], backends: Sequence[str]) -> list[str]:
    """Train one step of each file's model on the CPU in a subprocess, with the first of the run's backends
    installed here (else any installed one); the check's lines, or BadWorkload with its one-line error."""
    backend = _local_backend(backends)
    lines = []
    for file in files:
        key = (file.spec.sha256, backend)
        if key not in _CHECKED:
            _CHECKED[key] = _check(file, backend)
        lines.append(_CHECKED[key])
    return lines


def _local_backend(backends: Sequence[str]) -> str:
    for backend in (*backends, *BACKEND_PREFERENCE):
        if importlib.util.find_spec(backend) is not None:
            return backend
    raise BadWorkload(
        "--workload-file: checking a workload needs Keras and one backend here (pip install keras jax), "
        "so that it is checked before a machine is paid for"
    )


def _check(file: WorkloadFile, backend: str) -> str:
    command = [sys.executable, "-m", "benchmarks", "check-workload", "--workload-file", str(file.path)]
    try:
        done = subprocess.run(
            [*command, "--backend", backend], capture_output=True, text=True, timeout=CHECK_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise BadWorkload(f"{file.path.name}: its check took over {CHECK_TIMEOUT_S} s on the CPU") from None
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
        reason = said[-1].removeprefix("error: ") if said else (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise BadWorkload(reason)
    return done.stdout.strip().splitlines()[-1].removeprefix("ok: ")
