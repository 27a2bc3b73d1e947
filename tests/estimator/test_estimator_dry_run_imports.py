"""`python -m orchestrate run ... --dry-run` prints the estimate without the report package or pandas: the
orchestrator's extras need neither to plan a run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LEFT_OUT = ("report", "pandas", "matplotlib", "jinja2")


def _imported(args: list[str], cwd: Path) -> tuple[set[str], str]:
    """The top-level packages a dry run imported (from -X importtime), and what it printed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "orchestrate", "run", *args, "--suite", "short", "--dry-run"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    names = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    return {name.split(".")[0] for name in names}, done.stdout


@pytest.mark.parametrize("args", [["--profile", "aws-p5.4xlarge"], ["--profiles", "gce-t4,aws-g4dn.xlarge"]])
def test_a_dry_run_estimates_without_the_report_package_nor_pandas(args: list[str], tmp_path: Path) -> None:
    packages, printed = _imported(args, tmp_path)
    assert {"orchestrate", "estimator", "records"} <= packages  # the importtime lines were read
    assert not packages & set(LEFT_OUT), sorted(packages & set(LEFT_OUT))
    assert "nothing is launched" in printed
    assert "min" in printed and "$" in printed  # the estimate itself was printed, with its cost
