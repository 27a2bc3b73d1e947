"""Helpers for the end-to-end tests: run the real CLI as a subprocess against the test sshd."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrate.plan import RunPlan, WorkItem
from orchestrate.testing.sshd import SSHServer
from records.catalog import Profile
from records.ledger import RunRecord, read_runs
from tests.support.datasets import prefill_keras_cache

ROOT = Path(__file__).resolve().parents[2]
# A tiny slice of the quick suite: every stage of a real run, seconds of training per workload.
TINY = ["--epochs", "2", "--train-limit", "512", "--val-limit", "128"]


@dataclass
class Workspace:
    """Local logs and ledger, and the host's work folder (with a dataset cache filled from shared/datasets)."""

    root: Path

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def ledger(self) -> Path:
        return self.root / "ledger.jsonl"

    @property
    def remote_dir(self) -> Path:
        return self.root / "host"

    def prefill(self) -> None:
        prefill_keras_cache(self.remote_dir / "cache" / "keras")

    def run_record(self, run_id: str) -> RunRecord:
        return read_runs(self.ledger)[run_id]

    def run_logs(self, platform: str, run_id: str) -> Path:
        return self.logs / platform / run_id


def ssh_run_args(server: SSHServer, ws: Workspace, run_id: str, *extra: str) -> list[str]:
    """`orchestrate run` on the ssh profile, reaching the test sshd through its ssh_config alias."""
    return [
        "run",
        "--profile",
        "ssh",
        "--host",
        server.alias,
        "--ssh-config",
        str(server.config_path),
        "--logs",
        str(ws.logs),
        "--ledger",
        str(ws.ledger),
        "--remote-dir",
        str(ws.remote_dir),
        "--run-id",
        run_id,
        "--plain",
        *extra,
    ]


def orchestrate(
    *args: str, timeout: float = 900, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI in a subprocess; `env` replaces the environment (PYTHONPATH is always set)."""
    return subprocess.run(
        [sys.executable, "-m", "orchestrate", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**(os.environ if env is None else env), "PYTHONPATH": str(ROOT)},
    )


def start_orchestrate(*args: str, output: Path) -> subprocess.Popen[bytes]:
    handle = output.open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrate", *args],
        cwd=ROOT,
        stdout=handle,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def wait_for(condition: Callable[[], object], timeout: float, what: str, interval: float = 0.5) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def ledger_items(ledger: Path, run_id: str) -> list[dict]:
    """The latest ledger line's items for a run, read raw (the file may be mid-append)."""
    if not ledger.exists():
        return []
    latest: list[dict] = []
    for line in ledger.read_text().splitlines():
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        if data.get("run_id") == run_id:
            latest = data.get("items", [])
    return latest


def plan_on_image(
    tmp_path: Path, image: str, run_id: str, items: tuple[WorkItem, ...], provider: str = "local", **changes: object
) -> RunPlan:
    """A run plan on an image already present, logging under tmp_path; `changes` override any field."""
    fields: dict = {
        "run_id": run_id,
        "profile": Profile(name=provider, provider=provider, machine_type=None),
        "platform": provider,
        "suite": "quick",
        "items": items,
        "spot": False,
        "image_ref": image,
        "image_source": "present",
        "build": None,
        "logs_dir": tmp_path / "logs",
        "owner": f"test@{provider}",
        "remote_dir": str(tmp_path / "host"),
    }
    return RunPlan(**{**fields, **changes})
