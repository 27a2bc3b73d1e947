"""`make test`'s workers (tests/conftest.py): a file's tests share a worker, and so do the folders whose files share
one fixture instance (the Slurm cluster, tests/images' session images)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

from tests.conftest import LONGEST_FIRST, longest_first, worker_group

CONFTEST = Path(__file__).with_name("conftest.py")
# Each test records which worker ran it; the sleep keeps both workers busy so that the scheduler must share out.
RECORDING_TEST = """
import os, pathlib, time
def test_{n}():
    time.sleep(0.3)
    pathlib.Path(os.environ["RAN_DIR"], "{name}-{n}").write_text(os.environ["PYTEST_XDIST_WORKER"])
"""


def test_a_file_is_its_own_group_and_the_shared_fixture_folders_are_one() -> None:
    assert worker_group("tests/orchestrate/test_faults.py::test_x[ssh]") == "tests/orchestrate/test_faults.py"
    assert worker_group("tests/test_readme_commands.py::test_y") == "tests/test_readme_commands.py"
    assert worker_group("tests/slurm/test_slurm_script.py::test_z") == "tests/slurm"
    assert worker_group("tests/images/test_images_cpu.py::TestA::test_b") == "tests/images"


def test_the_longest_units_are_handed_out_first_in_their_order() -> None:
    queue = OrderedDict.fromkeys(["tests/a.py", LONGEST_FIRST[2], "tests/b.py", LONGEST_FIRST[0]], {})
    longest_first(queue)
    assert list(queue) == [LONGEST_FIRST[0], LONGEST_FIRST[2], "tests/a.py", "tests/b.py"]
    assert all((CONFTEST.parent.parent / unit).exists() for unit in LONGEST_FIRST)  # none stale


def test_two_workers_keep_each_file_and_the_slurm_folder_together(tmp_path: Path) -> None:
    tree = tmp_path / "tests"
    files = {"slurm/test_a.py": "a", "slurm/test_b.py": "b", "other/test_c.py": "c", "other/test_d.py": "d"}
    for relative, name in files.items():
        (tree / relative).parent.mkdir(parents=True, exist_ok=True)
        (tree / relative).write_text("".join(RECORDING_TEST.format(n=n, name=name) for n in range(3)))
    (tree / "conftest.py").write_text(CONFTEST.read_text())
    (tmp_path / "ran").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadfile", "-p", "no:cacheprovider", "-q", "tests"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env={**os.environ, "RAN_DIR": str(tmp_path / "ran")},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    ran = {path.name: path.read_text() for path in (tmp_path / "ran").iterdir()}
    assert len(ran) == 12
    by_file = {name: {ran[f"{name}-{n}"] for n in range(3)} for name in "abcd"}
    assert all(len(workers) == 1 for workers in by_file.values()), by_file
    assert by_file["a"] == by_file["b"], by_file  # the Slurm folder on one worker
