"""Charts in the spirit of the published ones: one horizontal bar per configuration, relative to the base,
with a dashed line at 1.0x. Backends are coloured, synthetic-data bars hatched and labelled, published bars
paler."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never a display

import matplotlib.pyplot as plt
from matplotlib.patches import Patch

BACKEND_COLOURS = {
    "tensorflow": "#e8710a",
    "jax": "#1a73e8",
    "torch": "#c5221f",
    "cntk": "#7b1fa2",
    "theano": "#5f6368",
}
OTHER_COLOUR = "#80868b"
SYNTHETIC_HATCH = "//"
PUBLISHED_ALPHA = 0.45
FORMATS = ("png", "svg")
FOOTNOTE_WIDTH = 115  # characters per footnote line at 8 pt on an 8.5 in wide figure


@dataclass(frozen=True)
class Bar:
    label: str
    value: float | None  # None: shown as "n/a" with the reason in `missing`
    backend: str
    low: float | None = None
    high: float | None = None
    synthetic: bool = False
    published: bool = False
    missing: str = ""


def relative_chart(
    bars: Sequence[Bar], title: str, xlabel: str, footnotes: Sequence[str], out_stem: Path
) -> list[Path]:
    """Draw `bars` top to bottom and save `<out_stem>.png` and `.svg`; returns the paths written."""
    notes = [line for note in footnotes for line in textwrap.wrap(note, FOOTNOTE_WIDTH)]
    height = 1.6 + 0.42 * len(bars) + 0.16 * len(notes)
    fig, ax = plt.subplots(figsize=(8.5, height), layout="constrained")
    positions = list(range(len(bars)))[::-1]
    present = [v for v in (b.value for b in bars) if v is not None and math.isfinite(v)]
    reach = max([1.0, *present, *(b.high for b in bars if b.high is not None)])
    mixed = len({b.published for b in bars}) > 1  # published bars pale only beside measured ones
    for y, bar in zip(positions, bars, strict=True):
        _draw_bar(ax, y, bar, reach, pale=mixed and bar.published)
    ax.axvline(1.0, color="black", linestyle="--", linewidth=1.2, zorder=3)
    ax.set_yticks(positions, [b.label for b in bars], fontsize=10)
    ax.set_xlim(0, reach * 1.22)
    ax.set_ylim(-0.7, len(bars) - 0.3)
    ax.set_xlabel(xlabel, fontsize=10)
    fig.suptitle("\n".join(textwrap.wrap(title, 90)), x=0.01, ha="left", fontsize=11)
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)
    handles = _legend(bars, mixed)
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.14 - 0.5 / height),
        ncols=min(len(handles), 4),  # wraps into rows rather than past the figure edge
        fontsize=8,
        frameon=False,
    )  # below the axis, never over a bar
    if notes:
        fig.text(0.01, 0.0, "\n".join(notes), fontsize=8, color="#444444", va="bottom", ha="left")
        reserved = (0.16 * len(notes) + 0.1) / height
        fig.get_layout_engine().set(rect=(0, reserved, 1, 1 - reserved))
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in FORMATS:
        path = out_stem.with_suffix(f".{fmt}")
        # A fixed salt makes the SVG's element ids, random otherwise, the same on every run.
        with plt.rc_context({"svg.hashsalt": "keras-cloud-bench"}):
            fig.savefig(path, dpi=150 if fmt == "png" else None, metadata=_reproducible_metadata(fmt))
        written.append(path)
    plt.close(fig)
    return written


def _draw_bar(ax: plt.Axes, y: int, bar: Bar, reach: float, pale: bool) -> None:
    if bar.value is None or not math.isfinite(bar.value):
        ax.text(0.01 * reach, y, f"n/a: {bar.missing}", va="center", fontsize=8, color="#444444")
        return
    colour = BACKEND_COLOURS.get(bar.backend, OTHER_COLOUR)
    ax.barh(
        y,
        bar.value,
        color=colour,
        alpha=PUBLISHED_ALPHA if pale else 1.0,
        hatch=SYNTHETIC_HATCH if bar.synthetic else None,
        edgecolor="black" if bar.synthetic else colour,
        linewidth=0.6,
        height=0.7,
        zorder=2,
    )
    if bar.low is not None and bar.high is not None:
        ax.errorbar(
            bar.value,
            y,
            xerr=[[bar.value - bar.low], [bar.high - bar.value]],
            fmt="none",
            ecolor="black",
            capsize=3,
            linewidth=1,
            zorder=4,
        )
    end = max(bar.value, bar.high or 0.0)
    ax.text(
        end + 0.015 * reach,
        y,
        f"{bar.value:.2f}x",
        va="center",
        fontsize=9,
        zorder=5,
        bbox={"facecolor": "white", "edgecolor": "none", "pad": 1, "alpha": 0.8},
    )


def _legend(bars: Sequence[Bar], mixed: bool) -> list[Patch]:
    backends = sorted({b.backend for b in bars if b.value is not None})
    handles = [Patch(color=BACKEND_COLOURS.get(b, OTHER_COLOUR), label=b) for b in backends]
    if any(b.synthetic for b in bars):
        handles.append(Patch(facecolor="white", edgecolor="black", hatch=SYNTHETIC_HATCH, label="synthetic data"))
    if mixed:
        handles.append(Patch(facecolor="#999999", alpha=PUBLISHED_ALPHA, label="published (pale)"))
    return handles


def _reproducible_metadata(fmt: str) -> dict[str, str | None]:
    """No creation date or software stamp in the files, so an unchanged report is byte-identical."""
    if fmt == "svg":
        return {"Date": None, "Creator": None}
    return {"Software": None}
