"""How `make test` spreads the tests over worker processes (pytest-xdist, `--dist loadgroup`).

Each test file stays on one worker, so a module's expensive fixture (a trained suite, a built image, a started
server) is made once; the folders whose files share a session- or package-scoped fixture (one Slurm cluster,
tests/images' session images) stay together on one worker too. Much of the suite waits on Docker, sshd, moto and
subprocesses rather than on the CPU, so two workers finish it well ahead of one even on two cores.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ONE_WORKER_FOLDERS = ("slurm", "images")  # their files share one fixture instance per session or package


def worker_group(path: Path) -> str:
    """The xdist group of a test file: its folder where the folder's files must share a worker, else the file."""
    relative = path.resolve().relative_to(TESTS)
    if relative.parts[0] in ONE_WORKER_FOLDERS:
        return relative.parts[0]
    return relative.as_posix()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(worker_group(item.path)))
