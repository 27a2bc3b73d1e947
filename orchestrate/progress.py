"""What the user sees while a run goes: each stage and each workload x backend with its state and time.

On a terminal a live table (rich); elsewhere (CI, a pipe, a log file) one plain line per event, so the output
stays readable as text. A stream that closes mid-run (the terminal or the pipe reader gone) silences the display
and nothing else: the run, its teardown and its ledger entries go on.
"""

from __future__ import annotations

import sys
import time
from typing import IO

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

STYLES = {
    "running": "yellow",
    "done": "green",
    "complete": "green",
    "failed": "red",
    "preempted": "magenta",
    "interrupted": "red",
    "skipped": "dim",
    "pending": "dim",
}


class Reporter:
    """Plain lines: `HH:MM:SS stage  launch     started` ... one per event, flushed at once."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self.silenced = False  # the stream closed: nobody reads the display any more

    def stage_started(self, name: str, detail: str = "") -> None:
        self._line(f"{name:<10} started{_suffix(detail)}")

    def stage_finished(self, name: str, seconds: float, status: str = "done", detail: str = "") -> None:
        self._line(f"{name:<10} {status} in {seconds:.1f} s{_suffix(detail)}")

    def items_planned(self, labels: list[str]) -> None:
        self._line(f"{len(labels)} container runs: {', '.join(labels)}")

    def item_started(self, label: str) -> None:
        self._line(f"{label} running")

    def item_finished(self, label: str, status: str, seconds: float, detail: str = "") -> None:
        self._line(f"{label} {status} in {seconds:.1f} s{_suffix(detail)}")

    def note(self, text: str) -> None:
        self._line(text)

    def close(self) -> None:
        """Stop any live display (idempotent)."""

    def _line(self, text: str) -> None:
        if self.silenced:
            return
        try:
            print(f"{time.strftime('%H:%M:%S')} {text}", file=self.stream, flush=True)
        except (OSError, ValueError):  # a broken pipe, a closed terminal or file: the run must not stop for it
            self.silenced = True


class LiveReporter(Reporter):
    """A table redrawn in place: stages on top, the workload x backend runs below, notes under it."""

    def __init__(self, console: Console) -> None:
        super().__init__(console.file)
        self.console = console
        self.stages: dict[str, list] = {}  # name -> [status, started monotonic, seconds or None, detail]
        self.items: dict[str, list] = {}
        self.notes: list[str] = []
        self.live = Live(get_renderable=self._render, console=console, refresh_per_second=4, transient=False)
        self.live.start()

    def stage_started(self, name: str, detail: str = "") -> None:
        self.stages[name] = ["running", time.monotonic(), None, detail]

    def stage_finished(self, name: str, seconds: float, status: str = "done", detail: str = "") -> None:
        entry = self.stages.setdefault(name, ["running", time.monotonic(), None, ""])
        entry[0], entry[2] = status, seconds
        entry[3] = detail or entry[3]

    def items_planned(self, labels: list[str]) -> None:
        for label in labels:
            self.items.setdefault(label, ["pending", None, None, ""])

    def item_started(self, label: str) -> None:
        self.items[label] = ["running", time.monotonic(), None, ""]

    def item_finished(self, label: str, status: str, seconds: float, detail: str = "") -> None:
        self.items[label] = [status, None, seconds, detail]

    def note(self, text: str) -> None:
        self.notes = [*self.notes[-7:], f"{time.strftime('%H:%M:%S')} {text}"]

    def close(self) -> None:
        if self.live.is_started:
            try:
                self.live.stop()  # draws the table a last time
            except (OSError, ValueError):
                self.silenced = True

    def _render(self) -> Group:
        return Group(_table("stage", self.stages), _table("workload [backend]", self.items), *map(Text, self.notes))


def _table(title: str, rows: dict[str, list]) -> Table:
    table = Table(show_edge=False, pad_edge=False, box=None)
    table.add_column(title, min_width=28)
    table.add_column("state", min_width=11)
    table.add_column("time", justify="right", min_width=8)
    table.add_column("", overflow="fold")
    now = time.monotonic()
    for name, (status, started, seconds, detail) in rows.items():
        shown = seconds if seconds is not None else (now - started if started is not None else None)
        table.add_row(  # Text, not str: "mnist_mlp [jax]" is not rich markup
            Text(name),
            Text(status, style=STYLES.get(status, "")),
            Text("" if shown is None else f"{shown:.1f} s"),
            Text(detail),
        )
    return table


def _suffix(detail: str) -> str:
    return f" ({detail})" if detail else ""


def make_reporter(force_plain: bool = False) -> Reporter:
    console = Console(stderr=True)
    if force_plain or not console.is_terminal:
        return Reporter()
    return LiveReporter(console)
