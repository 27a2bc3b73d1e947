"""The ledger: append-only JSON lines, latest state per run, usable after a crash at any byte or a hand edit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from records.ledger import (
    STATUS_COMPLETE,
    InstanceRecord,
    ItemRecord,
    Ledger,
    LedgerError,
    RunRecord,
    StageRecord,
    latest_runs,
    read_lines,
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


def test_a_crash_at_any_byte_leaves_a_usable_ledger(tmp_path: Path) -> None:
    """Cut the file after every byte of a record, then go on appending: every whole record stays readable."""
    whole = Ledger(tmp_path / "whole.jsonl")
    whole.append(record("r2"))
    torn_line = whole.path.read_bytes()
    for cut in range(1, len(torn_line)):
        ledger = Ledger(tmp_path / f"cut-{cut}.jsonl")
        ledger.append(record("r1"))
        with ledger.path.open("ab") as handle:
            handle.write(torn_line[:cut])  # the process died mid-write
        only_newline_lost = cut == len(torn_line) - 1  # the record itself is whole
        assert list(ledger.runs()) == (["r1", "r2"] if only_newline_lost else ["r1"])
        ledger.append(record("r3"))  # the next run appends after the torn line, not onto it
        warnings: list[str] = []
        runs = list(latest_runs(read_lines(ledger.path, warnings.append)))
        assert runs == (["r1", "r2", "r3"] if only_newline_lost else ["r1", "r3"])
        assert len(warnings) == (0 if only_newline_lost else 1)


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("[1, 2]", "expected a RunRecord object, got list"),
        ('{"run_id": "x"}', "missing"),
        ("not json", "Expecting value"),
    ],
)
def test_unreadable_lines_are_skipped_with_one_warning(tmp_path: Path, line: str, why: str) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append(record("r1"))
    with ledger.path.open("a") as handle:
        handle.write(line + "\n")
    ledger.append(record("r3"))
    warnings: list[str] = []
    assert list(latest_runs(read_lines(ledger.path, warnings.append))) == ["r1", "r3"]
    assert len(warnings) == 1 and "ledger.jsonl: skipped 1 unreadable line(s): 2 (" in warnings[0]
    assert why in warnings[0]


def test_a_hand_edited_null_is_skipped_and_cost_still_works(tmp_path: Path) -> None:
    from orchestrate.cli import main

    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append(record("r1", STATUS_COMPLETE))
    edited = record("r2", STATUS_COMPLETE).to_json()
    edited["billed_seconds"] = None
    with ledger.path.open("a") as handle:
        handle.write(json.dumps(edited) + "\n")
    with pytest.raises(LedgerError, match=r"RunRecord.billed_seconds is None, expected int"):
        RunRecord.from_json(edited)
    assert main(["cost", "--ledger", str(ledger.path)]) == 0


def test_missing_ledger_reads_as_empty_and_env_sets_the_default(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KCB_LEDGER", str(tmp_path / "env-ledger.jsonl"))
    assert Ledger().path == tmp_path / "env-ledger.jsonl"
    assert Ledger().runs() == {}


def test_a_ledger_that_is_not_a_regular_file_is_refused_not_read() -> None:
    """`--ledger /dev/full` once read 21 GB of zeros; /dev/null, which ends at once, stands in for it here."""
    with pytest.raises(LedgerError, match=r"^/dev/null: not a regular file$"):
        Ledger(Path("/dev/null")).runs()


def test_one_warning_however_often_a_command_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append(record("r1"))
    with ledger.path.open("a") as handle:
        handle.write("garbage\n")
    for _ in range(3):
        assert list(ledger.runs()) == ["r1"]
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_torn_final_line_is_named_then_set_aside_and_its_run_settled_by_the_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The last line of a finished run is cut (a full disk, a crash mid-write): `cost` names the run and says its
    state may be stale; the sweep moves the line beside the ledger and restores the run's final state from the
    run.json its orchestrator wrote beside its logs."""
    from orchestrate.cli import main, owner_id

    ledger = Ledger(tmp_path / "ledger.jsonl")
    run = record("r1", "running")
    run.owner, run.pid, run.provider = owner_id(), 2**22 + 12345, "local"  # a pid no live process has
    run.logs_dir = str(tmp_path / "logs" / "local" / "r1")
    ledger.append(run)
    run.status, run.ended_at, run.message = STATUS_COMPLETE, 1100.0, "all 1 container runs complete"
    summary = Path(run.logs_dir) / "orchestrate" / "run.json"
    summary.parent.mkdir(parents=True)
    summary.write_text(json.dumps(run.to_json()))
    ledger.append(run)
    whole = ledger.path.read_bytes()
    first, _, last = whole.partition(b"\n")
    torn = last[: last.index(b'"run_id"') + 20]  # cut within the final line
    ledger.path.write_bytes(first + b"\n" + torn)

    assert main(["cost", "--ledger", str(ledger.path)]) == 0
    err = capsys.readouterr().err
    assert "skipped 1 unreadable line(s): 2 (run r1: " in err and "`python -m orchestrate sweep` sets them" in err

    assert main(["sweep", "--provider", "local", "--ledger", str(ledger.path)]) == 0
    out = capsys.readouterr().out
    assert "ledger       line 2 (run r1: " in out and f"moved to {ledger.quarantine_path}" in out
    assert "recovered    run r1: restored its final state (complete) from " in out
    assert ledger.quarantine_path.read_bytes() == torn + b"\n"
    warnings: list[str] = []
    assert read_runs(ledger.path)["r1"].status == STATUS_COMPLETE
    assert list(latest_runs(read_lines(ledger.path, warnings.append))) == ["r1"] and warnings == []
