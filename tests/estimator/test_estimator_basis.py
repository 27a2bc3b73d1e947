"""The estimate's reference basis ships as a table (estimator/data/reference_basis.json): it is what logs/reference
gives today, a dry run reads it instead of the logs, and a table of other fields is refused in one line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from estimator import basis
from estimator.basis import COMMITTED_REFERENCE, TABLE, StaleBasis, folder_observations, read_table, table_text

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_table_is_a_fresh_derivation_of_logs_reference() -> None:
    derived = folder_observations(COMMITTED_REFERENCE)
    assert len(derived) > 900 and {o.where.split()[0] for o in derived} == {"reference"}
    assert read_table(TABLE) == derived, "stale: run `python -m estimator.basis write` after changing logs/reference"
    assert TABLE.read_text() == table_text(derived)


def test_the_measured_basis_reads_the_table_not_the_reference_logs(tmp_path: Path, monkeypatch) -> None:
    """As an installed package sees it: no logs/reference beside the source, the reference runs all the same."""
    read: list[Path] = []
    monkeypatch.setattr(basis, "COMMITTED_REFERENCE", tmp_path / "not-installed")
    monkeypatch.setattr(basis, "load_runs", lambda folder: read.append(folder) or basis.load_runs(folder))
    found = basis.measured(tmp_path / "my-logs")
    assert found == list(basis.reference_basis()) and read == []


def test_a_users_own_reference_folder_is_read_beside_the_table(tmp_path: Path) -> None:
    platform = tmp_path / "logs" / "reference" / "NVIDIA-H100"
    shutil.copytree(COMMITTED_REFERENCE / "NVIDIA-H100" / "gpu-repeats-h100-1c83db", platform / "mine")
    found = basis.measured(tmp_path / "logs")
    own = found[: len(found) - len(basis.reference_basis())]
    assert own and all(o.where.startswith("reference NVIDIA-H100") for o in own)


def test_a_table_of_other_fields_is_refused_naming_the_command_that_regenerates_it(tmp_path: Path) -> None:
    data = json.loads(TABLE.read_text())
    data["fields"] = [*data["fields"], "flops"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    with pytest.raises(StaleBasis, match=r"regenerate it with `python -m estimator.basis write`"):
        read_table(old)


def test_the_check_command_says_whether_the_table_is_current(tmp_path: Path) -> None:
    copy = tmp_path / "basis.json"
    copy.write_text(TABLE.read_text())
    command = [sys.executable, "-m", "estimator.basis", "check", "--table", str(copy)]
    current = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert current.returncode == 0 and "current" in current.stdout, current.stderr
    copy.write_text(TABLE.read_text().replace('"reference NVIDIA-H100', '"reference NVIDIA-H1OO', 1))
    stale = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert stale.returncode == 1 and "python -m estimator.basis write" in stale.stderr
