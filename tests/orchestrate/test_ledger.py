"""The ledger: append-only JSON lines, latest state per run, a torn last line tolerated, errors located."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrate.ledger import (
    STATUS_COMPLETE,
    InstanceRecord,
    ItemRecord,
    Ledger,
    LedgerError,
    RunRecord,
    StageRecord,
    read_runs,
)


def record(run_id: str, status: str = "starting") -> RunRecord:
    return RunRecord(
        run_id=run_id,
        profile="gce-t4",
        provider="gce",
        platform="gce-t4",
        suite="quick",
        owner="me@box",
        pid=4242,
        started_at=1000.0,
        status=status,
    )


def test_latest_line_of_each_run_wins_and_round_trips(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "sub" / "ledger.jsonl")
    first = record("r1")
    ledger.append(first)
    ledger.append(record("r2"))
    first.status = STATUS_COMPLETE
    first.instances.append(InstanceRecord("gce", "i-1", "us-central1-a", True, 1001.0, 1100.0, 99, 0.01))
    first.stages.append(StageRecord("launch", 1000.5, 1001.0, "i-1"))
    first.items.append(ItemRecord("mnist_mlp", "jax", "complete", 0, 1002.0, 1050.0, 1, ["logs/x.csv"]))
    ledger.append(first)
    runs = read_runs(ledger.path)
    assert list(runs) == ["r1", "r2"]
    assert runs["r1"] == first
    assert runs["r1"].final and not runs["r2"].final
    assert runs["r1"].stages[0].seconds == pytest.approx(0.5)
    assert len(ledger.path.read_text().splitlines()) == 3  # append-only


def test_a_torn_last_line_is_ignored_but_a_bad_middle_line_is_an_error(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append(record("r1"))
    with ledger.path.open("a") as handle:
        handle.write('{"run_id": "r2", "prof')  # the process died mid-write
    assert list(ledger.runs()) == ["r1"]
    with ledger.path.open("a") as handle:
        handle.write("\n")
    ledger.append(record("r3"))
    with pytest.raises(LedgerError, match=r"ledger.jsonl:2: not a ledger record"):
        ledger.runs()


def test_missing_ledger_reads_as_empty_and_env_sets_the_default(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KCB_LEDGER", str(tmp_path / "env-ledger.jsonl"))
    assert Ledger().path == tmp_path / "env-ledger.jsonl"
    assert Ledger().runs() == {}
