"""The CLI against the test cluster: `orchestrate run --profile testcluster-cpu ...` as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.orchestrate.orchestrate_helpers import ROOT, Workspace
from tests.slurm.conftest import PROFILE, SlurmSite

POLL_S = "1"  # the queue is read every second (10 s by default)


def slurm_env(site: SlurmSite) -> dict[str, str]:
    return {**os.environ, "KCB_CATALOG": str(site.catalog), "KCB_BATCH_POLL_S": POLL_S, "PYTHONPATH": str(ROOT)}


def run_args(site: SlurmSite, ws: Workspace, run_id: str, *extra: str) -> list[str]:
    return [
        "run",
        "--profile",
        PROFILE,
        "--ssh-config",
        str(site.server.config_path),
        "--logs",
        str(ws.logs),
        "--ledger",
        str(ws.ledger),
        "--run-id",
        run_id,
        "--plain",
        *extra,
    ]


def run_folder(site: SlurmSite, run_id: str) -> Path:
    return site.shared_dir / "runs" / run_id


def orchestrate(site: SlurmSite, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`python -m orchestrate ARGS` against the test cluster, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "orchestrate", *args],
        cwd=ROOT,
        env=slurm_env(site),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
