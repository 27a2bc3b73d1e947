"""User-facing text speaks of the product as a measurement report would (machine, date, software, runs, what was
left out and why), never of how the measurements were organised: no tracker numbers, working periods, borrowed
machines or their time allowances, or the names the raw consoles had while being collected.

Checked: README.md, docs/ (the generated docs/results.md included), and the data files whose text the product
prints (report/data/, orchestrate/*.toml, records/*.toml) and the suites' descriptions (`benchmarks list`).

Exceptions, allowed because they are technical terms, not organisation: "session" alone (a process session, a
Keras session, a cloud SDK session, a machine's billing session, a speaker's recording session) and the module name
`gpu_session`; the patterns below therefore name the organisational uses only.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from report_helpers import REPO

from benchmarks.suites import SUITES

FORBIDDEN = {
    "a tracker number": r"\bissues? #?\d+",
    "a working period": r"\b(first|second|third|fourth|fifth|two|three|earlier|later) sessions?\b",
    "a period's allowance": r"\bsessions? of \d+ minutes",
    "device time": r"\bdevice (time|budget|tool)\b",
    "a remaining allowance": r"budget_left",
    "a lent machine": r"\blent\b",
    "a console's collection name": r"\bs\d+-call\d+|\bcall\d+-(console|manifest)",
    "what could be carried": r"too large to carry|carried as a\s+wheel",
    "the project's own machines": r"this project's (2-core|test machine|CI|issue)",
    "a working file's name": r"seed document|\b\d{3}_[0-9a-f]{16}\.txt",
}
FILES = sorted(
    {
        REPO / "README.md",
        *REPO.glob("docs/**/*.md"),
        *REPO.glob("report/data/**/*.toml"),
        *REPO.glob("report/data/**/*.md"),
        *REPO.glob("orchestrate/*.toml"),
        *REPO.glob("records/*.toml"),
    }
)


def _hits(text: str) -> list[str]:
    return [
        f"{what}: {match.group(0)!r}"
        for what, pattern in FORBIDDEN.items()
        for match in re.finditer(pattern, text, flags=re.IGNORECASE)
    ]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_user_facing_text_speaks_of_the_product(path: Path) -> None:
    found = [
        f"{path.relative_to(REPO)}:{n}: {hit}"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        for hit in _hits(line)
    ]
    assert not found, "\n".join(found)


def test_suite_descriptions_speak_of_the_product() -> None:
    assert not [hit for suite in SUITES.values() for hit in _hits(suite.description)]


def test_the_patterns_catch_what_they_name() -> None:
    for text in (
        "as quoted in this project's issue 12",
        "Two sessions of 30 minutes of device time made these logs",
        "made on a lent single-H200 machine",
        "in `console/s2-call7-*`",
        "its wheel is too large to carry to that machine",
        'Source: the seed document "X" (000_f8d8b8f03bf3adfd.txt).',
    ):
        assert _hits(text), text
    assert not _hits("python -m campaign.gpu_session run; the Keras session is reset; each speaker session")
