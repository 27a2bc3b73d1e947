"""How `make test` spreads the tests over worker processes (pytest-xdist, `-n auto --dist loadfile`).

Each test file stays on one worker, so a module's expensive fixture (a trained suite, a built image, a started
server) is made once and tests that share fixed names (run ids, containers) never run side by side; the folders
whose files share a session- or package-scoped fixture (one Slurm cluster, tests/images' session images) stay
together on one worker too. Much of the suite waits on Docker, sshd, moto and subprocesses rather than on the CPU,
so two workers finish it well ahead of one even on two cores.

The grouping is a scheduler of its own rather than xdist_group markers: xdist's `loadgroup` writes the group into
each test's node id, which pytest 9 no longer lets a plugin change, so the markers would silently group nothing.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import PurePosixPath
from typing import Any

import pytest

try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pytest-xdist not installed: tests run in one process, nothing to schedule
    LoadScopeScheduling = None

ONE_WORKER_FOLDERS = ("slurm", "images")  # their files share one fixture instance per session or package
# The units that take two minutes or more (test time on 2 cores, 2026-11-29), longest first: handed out before the
# others, so that no worker is left finishing a long unit alone while the other has nothing left. xdist otherwise
# orders units by their number of tests, which put the documented-commands file (3 tests, 4 minutes) last.
LONGEST_FIRST = (
    "tests/clouds/test_cloud_runs.py",
    "tests/benchmarks/test_reference_workloads.py",
    "tests/slurm",
    "tests/test_readme_commands.py",
    "tests/orchestrate/test_faults.py",
    "tests/clouds/test_detached.py",
    "tests/benchmarks/test_bench_runner.py",
    "tests/benchmarks/test_bench_distribution.py",
    "tests/benchmarks/test_native.py",
    "tests/images",
)


def longest_first(queue: OrderedDict[str, Any]) -> None:
    """Move the LONGEST_FIRST units still queued to the front of xdist's work queue, in that order."""
    for scope in reversed([scope for scope in LONGEST_FIRST if scope in queue]):
        queue.move_to_end(scope, last=False)


def worker_group(nodeid: str) -> str:
    """The unit one worker runs whole: the test's folder where that folder's files must share a worker, else its
    file (a node id is `tests/<folder>/<file>::<test>`, relative to the repository)."""
    path = PurePosixPath(nodeid.split("::", 1)[0])
    parts = path.parts[1:] if path.parts[:1] == ("tests",) else path.parts
    return f"tests/{parts[0]}" if len(parts) > 1 and parts[0] in ONE_WORKER_FOLDERS else path.as_posix()


if LoadScopeScheduling is not None:

    class FileOrFolderScheduling(LoadScopeScheduling):
        """xdist's scope scheduling with worker_group as the scope."""

        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            longest_first(self.workqueue)
            super()._assign_work_unit(node)

    def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
        return FileOrFolderScheduling(config, log) if config.getvalue("dist") == "loadfile" else None
