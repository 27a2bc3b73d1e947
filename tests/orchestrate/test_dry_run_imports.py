"""What a dry run imports: it plans and estimates from the catalog and the shipped reference basis, so it loads no
cloud client's types, no report (pandas) and no framework, whatever the profile."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("google.cloud.compute_v1", "pandas", "jax", "torch", "tensorflow", "report")
DRY_RUN = """
import json, sys
from orchestrate.cli import main
try:
    main(["run", "--profile", sys.argv[1], "--suite", "quick", "--dry-run"])
except SystemExit as done:
    assert not done.code, done.code
print(json.dumps(sorted(name for name in sys.argv[2:] if name in sys.modules)))
"""


@pytest.mark.parametrize("profile", ["gce-h100", "aws-p5.4xlarge", "local"])
def test_a_dry_run_imports_no_cloud_client_types_report_or_framework(profile: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", DRY_RUN, profile, *HEAVY], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
