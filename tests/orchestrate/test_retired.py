"""A retired profile follows one rule on `run --profile` and `run --profiles`: its catalog replacement runs in its
place, and the substitution is said before anything is launched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from records.catalog import load_catalogs, runs_as
from tests.orchestrate.orchestrate_helpers import orchestrate

MAPPING = "gce-k80 (retired 2024-05-01) -> gce-t4"


def test_runs_as_maps_a_retired_profile_unless_allowed() -> None:
    catalog = load_catalogs([])
    assert runs_as(catalog, "gce-k80").name == "gce-t4"
    assert runs_as(catalog, "gce-k80", allow_retired=True).name == "gce-k80"
    assert runs_as(catalog, "gce-l4").name == "gce-l4"


@pytest.mark.parametrize("which", ["--profile", "--profiles"])
def test_both_paths_substitute_the_replacement_and_say_so_first(tmp_path: Path, which: str) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}  # no cloud credentials: nothing could launch
    ledger, logs = tmp_path / "ledger.jsonl", tmp_path / "logs"
    args = [which, "gce-k80", "--workloads", "mnist_mlp", "--backends", "jax", "--dry-run"]
    done = orchestrate("run", *args, "--ledger", str(ledger), "--logs", str(logs), timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.index(MAPPING) < done.stdout.index("credentials")  # said before any launch could start
    assert "nothing is launched" in done.stdout and not logs.exists()
