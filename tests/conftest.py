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

from pathlib import PurePosixPath
from typing import Any

import pytest

try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pytest-xdist not installed: tests run in one process, nothing to schedule
    LoadScopeScheduling = None

ONE_WORKER_FOLDERS = ("slurm", "images")  # their files share one fixture instance per session or package


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

    def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
        return FileOrFolderScheduling(config, log) if config.getvalue("dist") == "loadfile" else None
