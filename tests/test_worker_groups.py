"""`make test`'s workers (tests/conftest.py): a file's tests share a worker, and so do the folders whose files share
one fixture instance (the Slurm cluster, tests/images' session images)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import TESTS, worker_group

# Printed by a plugin of the collecting pytest: each collected test and the xdist group it carries.
PLUGIN = """
def pytest_collection_finish(session):
    for item in session.items:
        marker = item.get_closest_marker("xdist_group")
        print("GROUP", item.nodeid, marker.args[0] if marker else None)
"""


def test_a_file_is_its_own_group_and_the_shared_fixture_folders_are_one() -> None:
    assert worker_group(TESTS / "orchestrate" / "test_faults.py") == "orchestrate/test_faults.py"
    assert worker_group(TESTS / "test_readme_commands.py") == "test_readme_commands.py"
    assert {worker_group(path) for path in (TESTS / "slurm").glob("test_*.py")} == {"slurm"}
    assert {worker_group(path) for path in (TESTS / "images").glob("test_*.py")} == {"images"}


def test_every_collected_test_carries_its_group(tmp_path: Path) -> None:
    (tmp_path / "print_groups.py").write_text(PLUGIN)
    files = ["tests/slurm/test_slurm_script.py", "tests/slurm/test_slurm_contract.py", "tests/test_docs_budgets.py"]
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", "-p", "print_groups", *files],
        cwd=TESTS.parent, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(TESTS.parent)])},
    )  # fmt: skip
    assert listed.returncode == 0, listed.stdout + listed.stderr
    found = [
        line.removeprefix("GROUP ").rsplit(" ", 1) for line in listed.stdout.splitlines() if line.startswith("GROUP ")
    ]
    groups = {node: group for node, group in found}
    assert groups and "None" not in groups.values()
    assert {g for node, g in groups.items() if node.startswith("tests/slurm/")} == {"slurm"}
    assert {g for node, g in groups.items() if node.startswith("tests/test_docs")} == {"test_docs_budgets.py"}
