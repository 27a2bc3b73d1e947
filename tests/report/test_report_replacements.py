"""A fan-out's report names which profile ran in place of which retired one (`--replacement`), on the HTML page
and in the markdown document, and the fan-out passes every mapping it made."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_helpers import write_run

from orchestrate.fanout import report_commands, resolve_candidates
from records.catalog import load_catalogs
from report.cli import main


def test_the_report_names_the_profile_that_stood_in_for_a_retired_one(logs: Path, tmp_path: Path) -> None:
    write_run(logs, platform="gce-t4", run_id="20260101T000000Z-fan0-gce-t4")
    out, markdown = tmp_path / "out", tmp_path / "doc" / "report.md"
    assert main([str(logs), "--replacement", "gce-k80=gce-t4", "--out", str(out)]) == 0
    html = (out / "index.html").read_text()
    assert "<dt>Replacements</dt>" in html and "gce-t4 ran in place of gce-k80 (retired 2024-05-01)" in html
    assert main([str(logs), "--replacement", "gce-k80=gce-t4", "--markdown", str(markdown)]) == 0
    assert "gce-t4 ran in place of gce-k80 (retired 2024-05-01)" in markdown.read_text()


def test_a_malformed_replacement_is_a_one_line_error(logs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(logs)
    assert main([str(logs), "--replacement", "gce-k80"]) == 2
    assert (
        capsys.readouterr().err == "error: --replacement 'gce-k80': expected REQUESTED=PROFILE, e.g. gce-k80=gce-t4\n"
    )


def test_the_fanout_hands_its_mappings_to_both_reports(tmp_path: Path) -> None:
    candidates = resolve_candidates(load_catalogs([]), "gce-k80,local", allow_retired=False)
    commands = report_commands(tmp_path / "logs", "fan0", tmp_path / "out", None, None, candidates)
    assert len(commands) == 2
    for command in commands:
        assert [a for a in command if a.startswith("--replacement")] == ["--replacement=gce-k80=gce-t4"]
