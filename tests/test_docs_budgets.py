"""The documentation's budgets: the README is an entry page (at most 200 lines), and no paragraph of the README or of
a page under docs/ runs over 80 words, so that detail is a list, a table or a page of its own. docs/results.md is
left out: it is generated from the reference logs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 200
PARAGRAPH_MAX_WORDS = 80
GENERATED = {"docs/results.md"}

FENCE = re.compile(r"^\s*(```|~~~)")
ITEM = re.compile(r"^\s*([-*+]|\d+[.)])\s")
HEADING = re.compile(r"^#{1,6}\s")
TABLE_ROW = re.compile(r"^\s*\|")


def paragraphs(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each paragraph: a run of non-blank lines outside code fences, split where a list
    item or a heading starts (each list item is a paragraph of its own); table rows are no paragraph."""
    found: list[tuple[int, list[str]]] = []
    in_fence, previous_blank = False, True
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            in_fence, previous_blank = not in_fence, True
            continue
        if in_fence or not line.strip() or TABLE_ROW.match(line):
            previous_blank = True
            continue
        if previous_blank or ITEM.match(line) or HEADING.match(line):
            found.append((number, []))
        found[-1][1].append(HEADING.sub("", ITEM.sub("", line, count=1)).strip())
        previous_blank = bool(HEADING.match(line))  # a heading is a paragraph of one line
    return [(number, " ".join(lines)) for number, lines in found]


def words(paragraph: str) -> int:
    return len(paragraph.split())


def checked_pages() -> list[Path]:
    docs = sorted(p for p in (ROOT / "docs").glob("*.md") if p.relative_to(ROOT).as_posix() not in GENERATED)
    return [ROOT / "README.md", *docs]


def test_the_counter_splits_lists_headings_fences_and_tables() -> None:
    text = "# Title\nOne two\nthree.\n\n- item one\n  goes on\n- item two\n\n```\nnot counted at all\n```\n"
    text += "| a | b |\nend"
    assert [(n, words(p)) for n, p in paragraphs(text)] == [(1, 1), (2, 3), (5, 4), (7, 2), (13, 1)]


def test_the_readme_is_an_entry_page() -> None:
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; at most {README_MAX_LINES}: move detail to docs/"


@pytest.mark.parametrize("page", checked_pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_paragraph_runs_over_the_budget(page: Path) -> None:
    long = [
        f"{page.relative_to(ROOT)}:{number}: {words(text)} words: {text[:60]}..."
        for number, text in paragraphs(page.read_text())
        if words(text) > PARAGRAPH_MAX_WORDS
    ]
    assert not long, f"paragraphs over {PARAGRAPH_MAX_WORDS} words (make them a list or a table):\n" + "\n".join(long)
