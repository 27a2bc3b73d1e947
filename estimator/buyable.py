"""Machines one can buy today, each figure dated and sourced (data/buyable.toml), set against renting.

For a workload, a rented machine and its hourly price, a bought machine's break-even is the days of use around the
clock (as the 2018 home-server post counted it) after which buying has cost less than renting the same work:

    speed-up = the rented machine's training time / the bought machine's (each measured, or estimated by
               estimator.suite: measured, published, physics or hardware, with the backtested range)
    break-even days = purchase / (24 h x (rented price x speed-up - electricity per hour))

through estimator.owned's arithmetic (`Buyable.as_owned`). The dry run (estimator.owning) and the report
(report.buyable) set them against the rented machines; the range of the break-even comes from the range of the
bought machine's time.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from estimator import DATA_DIR
from estimator.owned import Owned, OwnedDataError
from estimator.workload_plan import estimate_data
from records.catalog import MAX_USD_PER_KWH, MAX_USD_PER_MACHINE, price_problem

BUYABLE_FILE = DATA_DIR / "buyable.toml"
FIGURES = ("purchase_usd", "gpu_watts", "useful_life_years", "electricity_usd_per_kwh")
# The most each figure can plausibly be (records.catalog.price_problem): a figure above it is a typo, or no figure.
CEILINGS = {
    "purchase_usd": MAX_USD_PER_MACHINE,
    "gpu_watts": 10_000.0,
    "useful_life_years": 50.0,
    "electricity_usd_per_kwh": MAX_USD_PER_KWH,
}
DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")  # as precisely as the source dates it


@dataclass(frozen=True)
class Figure:
    value: float | None  # None: no source was found, `source` says why
    date: str | None
    source: str

    def text(self, unit: str) -> str:
        if self.value is None:
            return f"unknown ({self.source})"
        if self.date is None:  # given by the user, not read from a source
            return f"{self.value:,g} {unit} ({self.source})"
        return f"{self.value:,g} {unit} ({self.date}; {self.source})"


@dataclass(frozen=True)
class Buyable:
    name: str
    title: str
    gpu: str  # its key in data/estimate.toml [gpus]
    figures: Mapping[str, Figure]

    def value(self, field: str) -> float | None:
        return self.figures[field].value

    def with_electricity(self, usd_per_kwh: float | None) -> Buyable:
        """The machine at the user's electricity price (`--electricity-price`), where one is given."""
        if usd_per_kwh is None:
            return self
        given = Figure(usd_per_kwh, None, "--electricity-price")
        return replace(self, figures={**self.figures, "electricity_usd_per_kwh": given})

    def as_owned(self) -> Owned:
        """The owned-machine arithmetic's view: used around the clock, the card's board power as its load."""
        return Owned(
            name=self.name,
            title=self.title,
            source="report/data/buyable.toml",
            currency="USD",
            purchase_price=self.value("purchase_usd"),
            useful_life_years=self.value("useful_life_years"),
            hours_per_day=24.0,
            load_watts=self.value("gpu_watts"),
            electricity_per_kwh=self.value("electricity_usd_per_kwh"),
        )


def load_buyable(path: Path = BUYABLE_FILE) -> dict[str, Buyable]:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise OwnedDataError(f"{path}: cannot read ({exc})") from exc
    defaults = data.pop("defaults", {})
    gpus = estimate_data()["gpus"]
    return {name: _buyable(path, name, entry, defaults, gpus) for name, entry in data.items()}


def _buyable(path: Path, name: str, entry: Any, defaults: Mapping[str, Any], gpus: Mapping[str, Any]) -> Buyable:
    where = f"{path}: machine {name!r}"
    if not isinstance(entry, dict):
        raise OwnedDataError(f"{where}: expected a table")
    for field in ("title", "gpu"):
        if not isinstance(entry.get(field), str) or not entry[field].strip():
            raise OwnedDataError(f"{where}: field {field!r} must be a non-empty string")
    if entry["gpu"] not in gpus:
        raise OwnedDataError(f"{where}: field 'gpu': {entry['gpu']!r} has no speed figure in estimate.toml [gpus]")
    unknown = sorted(set(entry) - {"title", "gpu", *FIGURES})
    if unknown:
        raise OwnedDataError(f"{where}: unknown field {unknown[0]!r}; fields: title, gpu, {', '.join(FIGURES)}")
    figures = {}
    for field in FIGURES:
        raw = entry.get(field, defaults.get(field))
        if raw is None:
            raise OwnedDataError(f'{where}: field {field!r} is missing (give it, or {{ unknown = "why" }})')
        figures[field] = _figure(f"{where}: field {field!r}", raw, CEILINGS[field])
    return Buyable(name, entry["title"], entry["gpu"], figures)


def _figure(where: str, raw: Any, ceiling: float) -> Figure:
    if not isinstance(raw, dict):
        raise OwnedDataError(f'{where}: expected {{ value, date, source }} or {{ unknown = "why" }}')
    if set(raw) == {"unknown"} and isinstance(raw["unknown"], str) and raw["unknown"].strip():
        return Figure(None, None, raw["unknown"])
    if set(raw) != {"value", "date", "source"}:
        raise OwnedDataError(f"{where}: expected exactly value, date and source, got {', '.join(sorted(raw))}")
    value, date, source = raw["value"], raw["date"], raw["source"]
    problem = price_problem(value, ceiling)
    if problem is not None:
        raise OwnedDataError(f"{where}: value {problem}")
    if not isinstance(date, str) or not DATE.match(date):
        raise OwnedDataError(f"{where}: date must be YYYY, YYYY-MM or YYYY-MM-DD, got {date!r}")
    if not isinstance(source, str) or not source.strip():
        raise OwnedDataError(f"{where}: source must be a non-empty string")
    return Figure(float(value), date, source)
