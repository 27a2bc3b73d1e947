"""Price-performance of one profile over time: the runs a schedule produced (the same suite on the same profile,
on several dates), as a table and a chart of steady-epoch time and dollars per 1000 training samples against date.

A trend is drawn for every platform whose complete runs of a workload and setup (backend, settings, data and
shape: `_setup`) fall on two dates or more. Each
point is one date: the median steady epoch with the order-statistic interval of `benchmarks.stats.median_estimate`,
over the date's repeats when it has several, else over the run's own steady epochs (the basis column says which).
Dollars are the steady epoch's time at the platform's hourly price (the catalog's, or `--price`), over the epoch's
training samples: one price for every date, so a price change between dates is not in the figures.
"""

from __future__ import annotations

import datetime as dt
import re
import textwrap
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never a display

import matplotlib.pyplot as plt
import matplotlib.ticker
import pandas as pd

from benchmarks.stats import Estimate, median_estimate
from records.loading import Run
from report.charts import save_figure
from report.costs import Pricing, Unpriced

RUN_ID_DATE = re.compile(r"^(\d{8})T\d{6}Z")
COLUMNS = [
    "platform",
    "workload",
    "backend",
    "date",
    "run ids",
    "steady epoch s",
    "interval",
    "basis",
    "$ per epoch",
    "$ per 1000 samples",
    "$ per 1000 samples interval",
]


@dataclass(frozen=True)
class Point:
    date: dt.date
    run_ids: tuple[str, ...]
    steady: Estimate  # seconds of a steady epoch
    basis: str  # "3 repeats" or "5 steady epochs of one run"
    train_samples: int | None


@dataclass
class Trend:
    platform: str
    series: dict[tuple[str, str], list[Point]]  # (workload, backend) -> points by date
    usd_per_hour: float | None
    price_note: str
    chart: tuple[str, str] | None = None  # (title, png path relative to the report folder)
    svg: str = ""


@dataclass
class TrendSection:
    trends: list[Trend]
    table: pd.DataFrame = field(default_factory=pd.DataFrame)


def run_date(run: Run) -> dt.date | None:
    """The day the run started (metadata `started_at`), else the day its run id names."""
    started = run.metadata.started_at
    if started is not None:
        try:
            return dt.datetime.fromisoformat(started).date()
        except ValueError:
            pass
    match = RUN_ID_DATE.match(run.run_id)
    return dt.datetime.strptime(match.group(1), "%Y%m%d").date() if match else None


def section(runs: Sequence[Run], pricing: Callable[[str], Pricing | Unpriced]) -> TrendSection | None:
    """The trends of every platform with runs of one workload and backend on two dates or more; None if none."""
    by_key: dict[tuple[str, str, str], dict[dt.date, list[Run]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        date = run_date(run)
        if run.complete and run.steady_median_s is not None and date is not None and not run.config.reference:
            by_key[(run.config.platform, run.workload, _setup(run))][date].append(run)
    trends: dict[str, Trend] = {}
    for (platform, workload, backend), dates in sorted(by_key.items()):
        if len(dates) < 2:
            continue
        if platform not in trends:
            price = pricing(platform)
            if isinstance(price, Pricing):
                trends[platform] = Trend(
                    platform, {}, price.usd_per_hour, f"${price.usd_per_hour:.4f}/h ({price.source})"
                )
            else:
                trends[platform] = Trend(platform, {}, None, price.reason)
        trends[platform].series[(workload, backend)] = [_point(day, dates[day]) for day in sorted(dates)]
    if not trends:
        return None
    found = TrendSection(list(trends.values()))
    found.table = trend_table(found.trends)
    return found


def _setup(run: Run) -> str:
    """The backend with everything else that changes the time: settings (jit, steps per execution, LSTM kernel,
    devices), the data source and the samples an epoch. Only runs alike in all of these make one trend: a date's runs
    are its repeats, and a sweep's alternatives or another suite's slice are not."""
    samples = run.metadata.data.train_samples
    parts = [run.config.backend]
    if run.compile_settings:
        parts.append(f"[{run.compile_settings}]")
    if run.config.synthetic:
        parts.append("(synthetic)")
    if samples:
        parts.append(f"{samples:,} samples an epoch")
    return " ".join(parts)


def _point(day: dt.date, runs: list[Run]) -> Point:
    medians = [r.steady_median_s for r in runs if r.steady_median_s is not None]
    if len(runs) > 1:
        steady, basis = median_estimate(medians), f"{len(runs)} repeats"
    else:
        epochs = [e.elapsed for e in runs[0].log.steady_epochs]
        steady, basis = median_estimate(epochs), f"{len(epochs)} steady epochs of one run"
    samples = {r.metadata.data.train_samples for r in runs}
    count = samples.pop() if len(samples) == 1 else None
    return Point(day, tuple(sorted(r.run_id for r in runs)), steady, basis, count)


def per_thousand(seconds: float | None, usd_per_hour: float | None, samples: int | None) -> float | None:
    """Dollars per 1000 training samples at a steady epoch's pace."""
    if seconds is None or usd_per_hour is None or not samples:
        return None
    return seconds * usd_per_hour / 3600 / samples * 1000


def trend_table(trends: Sequence[Trend]) -> pd.DataFrame:
    rows = []
    for trend in trends:
        for (workload, backend), points in trend.series.items():
            for p in points:
                price = trend.usd_per_hour
                low = per_thousand(p.steady.low, price, p.train_samples)
                high = per_thousand(p.steady.high, price, p.train_samples)
                rows.append(
                    {
                        "platform": trend.platform,
                        "workload": workload,
                        "backend": backend,
                        "date": p.date.isoformat(),
                        "run ids": ", ".join(p.run_ids),
                        "steady epoch s": round(p.steady.value, 4),
                        "interval": p.steady.interval_text("{:.3f}"),
                        "basis": p.basis,
                        "$ per epoch": None if price is None else round(p.steady.value * price / 3600, 6),
                        "$ per 1000 samples": _rounded(per_thousand(p.steady.value, price, p.train_samples)),
                        "$ per 1000 samples interval": f"{low:.6f}–{high:.6f}" if low and high else "no interval",
                    }
                )
    return pd.DataFrame(rows, columns=COLUMNS)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def draw(found: TrendSection, out: Path, charts_dir: str) -> None:
    """One chart per platform: steady-epoch time and $ per 1000 samples against date, with their intervals."""
    for trend in found.trends:
        priced = trend.usd_per_hour is not None
        fig, axes = plt.subplots(2 if priced else 1, 1, figsize=(8.5, 6.5 if priced else 4), sharex=True, squeeze=False)
        time_ax = axes[0][0]
        colours = [plt.cm.tab10(i) for i in range(10)]
        for index, ((workload, backend), points) in enumerate(sorted(trend.series.items())):
            colour = colours[index % len(colours)]
            label = f"{workload} [{backend}]"
            _line(time_ax, points, lambda e, p: e, colour, label)
            if priced:
                _line(axes[1][0], points, _cost_per_thousand(trend.usd_per_hour), colour, label)
        time_ax.set_ylabel("steady epoch (s)")
        time_ax.legend(fontsize=8, frameon=False)
        if priced:
            axes[1][0].set_ylabel("$ per 1000 samples")
            # small dollar figures in full ("$5e-06") rather than under an axis offset ("1e-6")
            axes[1][0].yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"${v:.3g}"))
        axes[-1][0].set_xlabel("date of the run")
        fig.autofmt_xdate()
        title = f"{trend.platform}: price-performance over time (lower is better)"
        fig.suptitle(title, x=0.01, ha="left", fontsize=11)
        note = "medians with order-statistic intervals (over a date's repeats, else the run's steady epochs); "
        note += f"price: {trend.price_note}" if priced else f"no price: {trend.price_note}"
        fig.text(0.01, 0.005, "\n".join(textwrap.wrap(note, 115)), fontsize=8, color="#444444", va="bottom")
        fig.tight_layout(rect=(0, 0.1, 1, 0.96))
        stem = out / charts_dir / f"trend_{re.sub(r'[^A-Za-z0-9_.-]+', '_', trend.platform)}"
        png, svg = (path.relative_to(out).as_posix() for path in save_figure(fig, stem))
        trend.chart, trend.svg = (title, png), svg


def _cost_per_thousand(usd_per_hour: float | None) -> Callable[[float | None, Point], float | None]:
    return lambda seconds, point: per_thousand(seconds, usd_per_hour, point.train_samples)


def _line(
    ax: plt.Axes,
    points: Sequence[Point],
    value: Callable[[float | None, Point], float | None],
    colour: tuple[float, ...],
    label: str,
) -> None:
    xs, ys, below, above = [], [], [], []
    for p in points:
        y = value(p.steady.value, p)
        if y is None:
            continue
        low, high = value(p.steady.low, p), value(p.steady.high, p)
        xs.append(p.date)
        ys.append(y)
        below.append(y - low if low is not None else 0.0)
        above.append(high - y if high is not None else 0.0)
    # matplotlib converts dates through its units registry; its stubs accept numbers only.
    ax.errorbar(xs, ys, yerr=[below, above], color=colour, marker="o", capsize=3, linewidth=1.2, label=label)  # type: ignore[arg-type]
    ax.grid(color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)
