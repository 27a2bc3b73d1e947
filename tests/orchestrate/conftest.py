"""Fixtures for the orchestration tests: a real sshd on loopback (orchestrate/testing/sshd.py) and a ledger of
the test's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrate.testing.sshd import sshd  # noqa: F401 - the fixture, for the tests here


@pytest.fixture
def ledger_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ledger for this test only; KCB_LEDGER points at it for subprocesses too."""
    path = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("KCB_LEDGER", str(path))
    return path
