"""The progress display: a live table on a terminal, plain timestamped lines anywhere else."""

from __future__ import annotations

import io

from rich.console import Console

from orchestrate.progress import LiveReporter, Reporter, make_reporter


def events(reporter: Reporter) -> None:
    reporter.items_planned(["mnist_mlp [jax]", "mnist_mlp [torch]"])
    reporter.stage_started("launch")
    reporter.stage_finished("launch", 1.25, detail="i-123 in us-east-1a")
    reporter.item_started("mnist_mlp [jax]")
    reporter.item_finished("mnist_mlp [jax]", "complete", 42.0)
    reporter.item_started("mnist_mlp [torch]")
    reporter.note("no capacity in us-east-1a; trying the next zone")


def test_plain_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    events(Reporter(out))
    lines = [line.split(" ", 1)[1] for line in out.getvalue().splitlines()]  # drop the HH:MM:SS stamps
    assert lines == [
        "2 container runs: mnist_mlp [jax], mnist_mlp [torch]",
        "launch     started",
        "launch     done in 1.2 s (i-123 in us-east-1a)",
        "mnist_mlp [jax] running",
        "mnist_mlp [jax] complete in 42.0 s",
        "mnist_mlp [torch] running",
        "no capacity in us-east-1a; trying the next zone",
    ]


def test_live_table_on_a_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120, color_system=None)
    reporter = LiveReporter(console)
    events(reporter)
    reporter.close()
    text = out.getvalue()
    for expected in ("launch", "done", "1.2 s", "i-123 in us-east-1a", "mnist_mlp [jax]", "complete", "42.0 s"):
        assert expected in text
    assert "running" in text and "trying the next zone" in text
    reporter.close()  # idempotent


def test_a_pipe_gets_plain_lines() -> None:
    assert type(make_reporter()) is Reporter  # pytest captures stderr: not a terminal
    assert type(make_reporter(force_plain=True)) is Reporter
