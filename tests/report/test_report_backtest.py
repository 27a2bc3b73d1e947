"""The estimator against the committed runs: every reference and published run predicted from the others with its
group left out. Run on the real committed data, so a change that makes the estimates worse fails here."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter

from report_helpers import REPO

from estimator.backtest import WORST, backtest, committed_outcomes, covered, report_lines, summaries, worst_lines
from estimator.basis import reference_basis
from estimator.model import published_observations

MAX_MEDIAN_ABS_PCT = 25.0
MIN_COVERAGE = 0.80


def test_every_committed_and_published_run_is_predicted_with_its_group_left_out() -> None:
    observations = reference_basis() + published_observations()
    outcomes = committed_outcomes()
    # The runs a dry run estimates are judged: the default settings in fresh processes that compiled their first
    # epoch; the others only predict.
    assert Counter(o.observation for o in outcomes) == Counter(
        o for o in observations if o.defaults and not o.cached_first
    )
    assert any(not o.defaults for o in observations) and any(o.defaults and o.cached_first for o in observations)
    assert {o.origin for o in observations} == {"measured", "published"} and len(observations) > 300
    # Left out means left out: a group alone has nothing to be predicted from.
    (alone,) = backtest(observations[:1])
    assert alone.prediction is None


def test_the_backtest_meets_its_goal() -> None:
    rows = {s.label: s for s in summaries(committed_outcomes())}
    overall = rows["all"]
    assert overall.median_abs_pct <= MAX_MEDIAN_ABS_PCT
    assert overall.coverage is not None and overall.coverage >= MIN_COVERAGE
    assert set(rows) == {"measured", "published", "hardware", "all"}
    assert all(s.coverage is not None and s.band is not None for s in rows.values())


def test_coverage_is_judged_on_ranges_made_without_the_runs_group() -> None:
    outcomes = list(committed_outcomes())
    flags = covered(outcomes)
    # One predicted outcome of its own basis: nothing else to make its range from, so it is not judged.
    only = next(o for o in outcomes if o.prediction is not None)
    assert covered([only]) == [None]
    # Its range made from the other groups alone: the run's own repeats would widen it in their favour.
    same = [o for o in outcomes if o.observation.group == only.observation.group]
    assert covered(same) == [None] * len(same)
    assert sum(f is True for f in flags) / sum(f is not None for f in flags) >= MIN_COVERAGE


def test_the_command_prints_the_error_distribution_and_coverage() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "report", "backtest"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("backtest: ") and "each predicted from the others with its group left out" in lines[0]
    assert [line.split()[0] for line in lines[2:6]] == ["measured", "published", "hardware", "all"]
    assert "range (5-95% of actual/predicted)" in lines[1] and "coverage" in lines[1]
    wrong = subprocess.run(
        [sys.executable, "-m", "report", "backtest", "--reference", "no-such-folder"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert wrong.returncode == 2 and wrong.stderr == "error: --reference no-such-folder: no such folder\n"


# Where the docs quote the backtest: "median error 21.1 %" and "89 % of runs inside the stated range" in prose, and
# the command's whole output in a code block that starts with its first line.
QUOTING = ("README.md", *sorted(f"docs/{page.name}" for page in (REPO / "docs").glob("*.md")))
MEDIAN_QUOTE = re.compile(r"median error (\d+(?:\.\d+)?) ?%")
COVERAGE_QUOTE = re.compile(r"(\d+) ?% of runs inside the stated range")


def test_the_figures_the_docs_quote_are_the_commands() -> None:
    printed = "\n".join(report_lines(committed_outcomes())) + "\n"
    overall = next(line.split() for line in printed.splitlines() if line.split()[:1] == ["all"])
    median, coverage = overall[3], overall[-1]  # "21.1%", "89%"
    quoted = 0
    for name in QUOTING:
        text = re.sub(r"\s+", " ", (REPO / name).read_text())  # a quote may wrap across lines
        for found in MEDIAN_QUOTE.finditer(text):
            assert f"{found.group(1)}%" == median, f"{name} quotes a median error of {found.group(0)}; {median} now"
            quoted += 1
        for found in COVERAGE_QUOTE.finditer(text):
            assert f"{found.group(1)}%" == coverage, f"{name} quotes a coverage of {found.group(0)}; {coverage} now"
            quoted += 1
    blocks = re.findall(r"^```\n(backtest: .*?)^```", (REPO / "docs" / "report.md").read_text(), flags=re.M | re.S)
    assert blocks == [printed], "docs/report.md's backtest block is not what `python -m report backtest` prints"
    assert quoted >= 2  # docs/report.md quotes both figures


def test_the_command_names_its_worst_runs_with_their_basis() -> None:
    outcomes = committed_outcomes()
    lines = worst_lines(outcomes)
    worst = max((o for o in outcomes if o.prediction is not None), key=lambda o: abs(o.log_error))
    assert len(lines) == 1 + WORST and lines[0].startswith(f"  the {WORST} runs predicted worst")
    assert worst.prediction is not None and worst.prediction.where in lines[1]
    assert f"from {worst.prediction.basis}: " in lines[1] and lines[1:] == report_lines(outcomes)[-12:-2]
