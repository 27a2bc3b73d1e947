"""Charts in the spirit of the published ones: one horizontal bar per configuration, relative to the base,
with a dashed line at 1.0x. Synthetic-data bars are hatched and labelled, published bars
paler. Bars are coloured by hardware where a chart has several platforms, else by backend."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never a display

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.patches import Patch
from matplotlib.transforms import offset_copy

from report.format import ratio

BACKEND_COLOURS = {
    "tensorflow": "#e8710a",
    "jax": "#1a73e8",
    "torch": "#c5221f",
    "cntk": "#7b1fa2",
    "theano": "#5f6368",
}
OTHER_COLOUR = "#80868b"
# Hardware colours when a chart has several platforms: matplotlib's tab20, the dark tones first, so that up to 20
# platforms never share a colour.
GROUP_COLOURS = tuple(matplotlib.colors.to_hex(plt.cm.tab20(i)) for i in (*range(0, 20, 2), *range(1, 20, 2)))
SYNTHETIC_HATCH = "//"
PUBLISHED_ALPHA = 0.45
FORMATS = ("png", "svg")
FOOTNOTE_WIDTH = 115  # characters per footnote line at 8 pt on an 8.5 in wide figure
MIN_WIDTH_IN = 8.5
LABEL_IN_PER_CHAR = 0.075  # a y-tick label's width at 10 pt
MIN_AXES_IN = 4.5  # room for the bars beside the longest label
LEGEND_DROP_IN = 0.5  # the x tick labels and axis title at 10 pt


@dataclass(frozen=True)
class Bar:
    label: str
    value: float | None  # None: shown as "n/a" with the reason in `missing`
    backend: str
    low: float | None = None
    high: float | None = None
    synthetic: bool = False
    published: bool = False
    missing: str = ""  # why there is no value: the caller puts it in the footnotes, where it is not clipped
    group: str = ""  # the hardware (platform): coloured apart when a chart has several


def relative_chart(
    bars: Sequence[Bar], title: str, xlabel: str, footnotes: Sequence[str], out_stem: Path
) -> list[Path]:
    """Draw `bars` top to bottom and save `<out_stem>.png` and `.svg`; returns the paths written."""
    notes = [line for note in footnotes for line in textwrap.wrap(note, FOOTNOTE_WIDTH)]
    height = 1.6 + 0.42 * len(bars) + 0.16 * len(notes)
    widest_label = max((len(b.label) for b in bars), default=0)
    width = max(MIN_WIDTH_IN, LABEL_IN_PER_CHAR * widest_label + MIN_AXES_IN)  # long labels must not squeeze the bars
    fig, ax = plt.subplots(figsize=(width, height), layout="constrained")
    positions = list(range(len(bars)))[::-1]
    present = [v for v in (b.value for b in bars) if v is not None and math.isfinite(v)]
    reach = max([1.0, *present, *(b.high for b in bars if b.high is not None)])
    mixed = len({b.published for b in bars}) > 1  # published bars pale only beside measured ones
    colours = _colours(bars)
    for y, bar in zip(positions, bars, strict=True):
        _draw_bar(ax, y, bar, reach, colours[_key(bar, colours)], pale=mixed and bar.published)
    ax.axvline(1.0, color="black", linestyle="--", linewidth=1.2, zorder=3)
    ax.set_yticks(positions, [b.label for b in bars], fontsize=10)
    ax.set_xlim(0, reach * 1.22)
    ax.set_ylim(-0.7, len(bars) - 0.3)
    ax.set_xlabel(xlabel, fontsize=10)
    fig.suptitle("\n".join(textwrap.wrap(title, 90)), x=0.01, ha="left", fontsize=11)
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)
    handles = _legend(bars, mixed, colours)
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, 0),
        # a fixed distance under the axis, past its tick labels and title, however tall the chart
        bbox_transform=offset_copy(ax.transAxes, fig=fig, y=-LEGEND_DROP_IN, units="inches"),
        ncols=_legend_columns(handles),  # wraps into rows rather than past the figure edge
        fontsize=8,
        frameon=False,
    )
    if notes:
        fig.text(0.01, 0.0, "\n".join(notes), fontsize=8, color="#444444", va="bottom", ha="left")
        reserved = (0.16 * len(notes) + 0.1) / height
        engine = fig.get_layout_engine()
        assert isinstance(engine, ConstrainedLayoutEngine)  # layout="constrained" above
        engine.set(rect=(0, reserved, 1, 1 - reserved))
    return save_figure(fig, out_stem)


def save_figure(fig: Figure, out_stem: Path) -> list[Path]:
    """`<out_stem>.png` and `.svg`, the same bytes on every run of an unchanged report; closes the figure."""
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in FORMATS:
        path = out_stem.with_suffix(f".{fmt}")
        # A fixed salt makes the SVG's element ids, random otherwise, the same on every run.
        with plt.rc_context({"svg.hashsalt": "keras-cloud-bench"}):
            fig.savefig(path, dpi=150 if fmt == "png" else None, metadata=reproducible_metadata(fmt))
        written.append(path)
    plt.close(fig)
    return written


def _colours(bars: Sequence[Bar]) -> dict[str, str]:
    """By hardware where a chart has several (K80, P100, CPU and H200 bars must not look alike), else by backend."""
    groups = sorted({b.group for b in bars if b.group})
    if len(groups) > 1:
        return {g: GROUP_COLOURS[i % len(GROUP_COLOURS)] for i, g in enumerate(groups)}
    return {b.backend: BACKEND_COLOURS.get(b.backend, OTHER_COLOUR) for b in bars}


def _key(bar: Bar, colours: dict[str, str]) -> str:
    return bar.group if bar.group in colours else bar.backend


def _draw_bar(ax: plt.Axes, y: int, bar: Bar, reach: float, colour: str, pale: bool) -> None:
    if bar.value is None or not math.isfinite(bar.value):
        ax.text(0.01 * reach, y, "n/a (reason below)", va="center", fontsize=8, color="#444444")
        return
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
        ratio(bar.value),  # three significant digits below 0.1x: a GPU against a laptop is not "0.02x"
        va="center",
        fontsize=9,
        zorder=5,
        bbox={"facecolor": "white", "edgecolor": "none", "pad": 1, "alpha": 0.8},
    )


def _legend(bars: Sequence[Bar], mixed: bool, colours: dict[str, str]) -> list[Patch]:
    keys = sorted({_key(b, colours) for b in bars if b.value is not None})
    # A colour that only published bars carry is drawn pale in the legend too, as on the chart.
    only_published = {k for k in keys if mixed and all(b.published for b in bars if _key(b, colours) == k)}
    handles = [
        Patch(facecolor=colours[k], alpha=PUBLISHED_ALPHA if k in only_published else 1.0, label=k) for k in keys
    ]
    if any(b.synthetic for b in bars):
        handles.append(Patch(facecolor="white", edgecolor="black", hatch=SYNTHETIC_HATCH, label="synthetic data"))
    if mixed and not only_published:  # the swatch is a pale bar of a published bar's colour
        first = next((colours[_key(b, colours)] for b in bars if b.published), OTHER_COLOUR)
        handles.append(Patch(facecolor=first, alpha=PUBLISHED_ALPHA, label="published (pale)"))
    return handles


def _legend_columns(handles: Sequence[Patch]) -> int:
    """As many columns as fit the figure's width at 8 pt: about 100 characters of labels and swatches."""
    widest = max((len(str(h.get_label())) for h in handles), default=1) + 6  # the swatch and the gap
    return max(1, min(len(handles), 4, 100 // widest))


def reproducible_metadata(fmt: str) -> dict[str, str | None]:
    """No creation date or software stamp in the files, so an unchanged report is byte-identical."""
    if fmt == "svg":
        return {"Date": None, "Creator": None}
    return {"Software": None}
