"""The monthly cost of a scheduled run, itemised as the 2018 study itemised its own: compute at the machine's price,
disk, scheduler jobs, (functions), storage and requests. Prices are inputs: today's come from the catalog (the
machine) and `schedule_prices.toml` (the rest, each dated and sourced); the study's own inputs and prices are in the
same file, so its published $0.76 a month is recomputed line by line (`study_cost`).

This project's design has no functions line: the scheduler calls the compute API itself and the machine deletes
itself when its run is done, so nothing else runs and the disk lives only as long as the machine.
"""

from __future__ import annotations

import datetime as dt
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrate.cron import parse_cron
from records.catalog import MAX_USD_PER_HOUR, price_problem

PRICES_FILE = Path(__file__).with_name("schedule_prices.toml")
HOURS_PER_MONTH = 730  # how both clouds prorate a monthly price (GB-month, job-month)
ITEMS = ("compute", "disk", "scheduler", "functions", "storage", "requests")
NO_FUNCTIONS = "none: the scheduler calls the compute API directly and the machine deletes itself"


# Far above any cloud's list price for each unit (records.catalog.price_problem says why a ceiling at all).
MAX_USD_PER_UNIT = {
    "hour": MAX_USD_PER_HOUR,
    "GB-month": 10.0,
    "job-month": 100.0,
    "million invocations": 1000.0,
    "1000 requests": 100.0,
    "month": 10_000.0,
}


class PriceDataError(ValueError):
    """schedule_prices.toml holds something unusable; the message names the entry and the field."""


@dataclass(frozen=True)
class UnitPrice:
    usd: float
    unit: str  # "hour", "GB-month", "job-month", "million invocations", "1000 requests", "month"
    date: str  # ISO date it was read, or the year alone where a study gives no day
    source: str

    def text(self) -> str:
        """`$0.10/job-month`, `$0.005/1000 requests`, `$0.5400/hour`: cents always shown, at most 4 decimals."""
        whole, _, decimals = f"{self.usd:.4f}".partition(".")
        return f"${whole}.{decimals.rstrip('0').ljust(2, '0')}/{self.unit}"


@dataclass(frozen=True)
class Prices:
    """Everything a scheduled run pays for, per unit; None where a design does not use it."""

    compute: UnitPrice  # per machine hour
    disk: UnitPrice  # per GB-month
    scheduler_job: UnitPrice | None = None  # Cloud Scheduler: per job and month
    scheduler_invocations: UnitPrice | None = None  # EventBridge Scheduler: per million invocations
    storage: UnitPrice | None = None  # per GB-month of logs
    requests: UnitPrice | None = None  # per 1000 uploads
    functions: UnitPrice | None = None  # per month: what starts and stops the VM in the 2018 design


@dataclass(frozen=True)
class Usage:
    runs_per_month: float
    seconds_per_run: float  # machine time of one run, boot to deletion
    disk_gb: float
    disk_whole_month: bool = False  # True: the VM is stopped, not deleted, so its disk is billed all month
    scheduler_jobs: int = 1
    log_mb_per_run: float = 0.0
    uploads_per_run: int = 0
    billing_increment_s: int = 1
    billing_minimum_s: int = 60

    @property
    def billed_seconds(self) -> int:
        """One run's billed machine seconds: rounded up to the increment, at least the minimum."""
        if self.seconds_per_run <= 0:
            return 0
        billed = math.ceil(self.seconds_per_run / self.billing_increment_s) * self.billing_increment_s
        return max(self.billing_minimum_s, billed)


@dataclass(frozen=True)
class CostLine:
    item: str  # one of ITEMS
    usd: float | None  # None: the design has no such cost
    working: str  # how the figure follows from the inputs
    price: UnitPrice | None = None


def monthly_cost(usage: Usage, prices: Prices) -> list[CostLine]:
    """One line per item of ITEMS, in that order; the total is their sum."""
    runs = usage.runs_per_month
    machine_hours = runs * usage.billed_seconds / 3600
    lines = [
        CostLine(
            "compute",
            machine_hours * prices.compute.usd,
            f"{runs:.2f} runs x {usage.billed_seconds} s billed x {prices.compute.text()}",
            prices.compute,
        )
    ]
    if usage.disk_whole_month:
        lines.append(
            CostLine(
                "disk",
                usage.disk_gb * prices.disk.usd,
                f"{usage.disk_gb:g} GB x {prices.disk.text()}, the whole month (the VM is stopped, not deleted)",
                prices.disk,
            )
        )
    else:
        lines.append(
            CostLine(
                "disk",
                usage.disk_gb * prices.disk.usd * machine_hours / HOURS_PER_MONTH,
                f"{usage.disk_gb:g} GB x {prices.disk.text()} x {machine_hours:.2f} h of {HOURS_PER_MONTH} "
                "(deleted with the machine)",
                prices.disk,
            )
        )
    lines.append(_scheduler_line(usage, prices))
    if prices.functions is None:
        lines.append(CostLine("functions", None, NO_FUNCTIONS))
    else:
        lines.append(
            CostLine(
                "functions", prices.functions.usd, "as published (its breakdown: the price's source)", prices.functions
            )
        )
    if prices.storage is None:
        lines.append(CostLine("storage", None, "no logs are uploaded"))
    else:
        gigabytes = runs * usage.log_mb_per_run / 1024
        lines.append(
            CostLine(
                "storage",
                gigabytes * prices.storage.usd,
                f"{runs:.2f} runs x {usage.log_mb_per_run:g} MB of logs x {prices.storage.text()} "
                "(a month's logs, for each month they are kept)",
                prices.storage,
            )
        )
    if prices.requests is None:
        lines.append(CostLine("requests", None, "no uploads"))
    else:
        uploads = runs * usage.uploads_per_run
        lines.append(
            CostLine(
                "requests",
                uploads / 1000 * prices.requests.usd,
                f"{runs:.2f} runs x {usage.uploads_per_run} uploads x {prices.requests.text()}",
                prices.requests,
            )
        )
    return lines


def _scheduler_line(usage: Usage, prices: Prices) -> CostLine:
    if prices.scheduler_job is not None:
        jobs = usage.scheduler_jobs
        return CostLine(
            "scheduler",
            jobs * prices.scheduler_job.usd,
            f"{jobs} job{'s' if jobs != 1 else ''} x {prices.scheduler_job.text()}",
            prices.scheduler_job,
        )
    if prices.scheduler_invocations is not None:
        return CostLine(
            "scheduler",
            usage.runs_per_month / 1e6 * prices.scheduler_invocations.usd,
            f"{usage.runs_per_month:.2f} invocations x {prices.scheduler_invocations.text()}",
            prices.scheduler_invocations,
        )
    return CostLine("scheduler", None, "no scheduler price")


def total(lines: list[CostLine]) -> float:
    return sum(line.usd or 0.0 for line in lines)


def format_lines(lines: list[CostLine], published: dict[str, float] | None = None) -> list[str]:
    """The itemised table; with `published`, the study's own figure beside each recomputed one."""
    head = f"  {'item':<10} {'$/month':>9}" + (f" {'published':>9}" if published else "") + "  working"
    rows = [head]
    for line in lines:
        figure = "-" if line.usd is None else f"{line.usd:.4f}"
        shown = f"  {line.item:<10} {figure:>9}"
        if published is not None:
            theirs = published.get(line.item)
            shown += f" {'-' if theirs is None else f'{theirs:.2f}':>9}"
        rows.append(f"{shown}  {line.working}")
    summed = f"  {'total':<10} {total(lines):>9.4f}"
    if published is not None:
        summed += f" {published.get('total', float('nan')):>9.2f}"
    return [*rows, summed]


def price_sources(lines: list[CostLine]) -> list[str]:
    return [f"  {line.item:<10} {line.price.date}: {line.price.source}" for line in lines if line.price is not None]


# ---- the price file -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Study:
    name: str
    title: str
    source: str
    usage: Usage
    prices: Prices
    published: dict[str, float]


def load_price_file(path: Path = PRICES_FILE) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise PriceDataError(f"{path}: cannot read ({exc})") from exc


def cloud_prices(cloud: str, compute: UnitPrice, path: Path = PRICES_FILE) -> Prices:
    """Today's prices for `cloud` (its `[clouds.<cloud>]` table in `path`), with the machine's own hourly price."""
    entry = load_price_file(path).get("clouds", {}).get(cloud)
    if not isinstance(entry, dict):
        raise PriceDataError(f"{path}: no [clouds.{cloud}] prices")
    return _prices(f"{path}: clouds.{cloud}", entry, compute)


def load_study(name: str = "cron-2018", path: Path = PRICES_FILE) -> Study:
    entry = load_price_file(path).get("studies", {}).get(name)
    if not isinstance(entry, dict):
        raise PriceDataError(f"{path}: no [studies.{name}]")
    where = f"{path}: studies.{name}"
    try:
        usage = Usage(
            runs_per_month=parse_cron(entry["cron"]).runs_per_month(),
            seconds_per_run=float(entry["minutes_per_run"]) * 60,
            disk_gb=float(entry["disk_gb"]),
            disk_whole_month=bool(entry["disk_whole_month"]),
            scheduler_jobs=int(entry["scheduler_jobs"]),
            billing_increment_s=int(entry["billing_increment_s"]),
            billing_minimum_s=int(entry["billing_minimum_s"]),
        )
        published = {str(k): float(v) for k, v in entry["published"].items()}
        compute = _price(where, "compute", entry["compute"])
        return Study(name, str(entry["title"]), str(entry["source"]), usage, _prices(where, entry, compute), published)
    except (KeyError, TypeError, ValueError) as exc:
        raise PriceDataError(f"{where}: {exc!r}") from exc


def study_cost(study: Study) -> list[CostLine]:
    return monthly_cost(study.usage, study.prices)


def _prices(where: str, entry: dict[str, Any], compute: UnitPrice) -> Prices:
    optional = ("scheduler_job", "scheduler_invocations", "storage", "requests", "functions")
    found = {key: _price(where, key, entry[key]) for key in optional if key in entry}
    if "disk" not in entry:
        raise PriceDataError(f"{where}: field 'disk': required")
    return Prices(compute=compute, disk=_price(where, "disk", entry["disk"]), **found)


def _price(where: str, key: str, raw: Any) -> UnitPrice:
    if not isinstance(raw, dict) or set(raw) != {"usd", "unit", "date", "source"}:
        raise PriceDataError(f"{where}: field '{key}': expected {{usd, unit, date, source}}")
    usd, unit = raw["usd"], raw["unit"]
    if unit not in MAX_USD_PER_UNIT:
        raise PriceDataError(f"{where}: field '{key}': unit {unit!r} is not one of {', '.join(MAX_USD_PER_UNIT)}")
    problem = price_problem(usd, MAX_USD_PER_UNIT[unit])
    if problem is not None:
        raise PriceDataError(f"{where}: field '{key}': usd {problem}")
    if not _is_date_or_year(str(raw["date"])) or not str(raw["source"]).strip():
        raise PriceDataError(f"{where}: field '{key}': needs a date (YYYY-MM-DD, or YYYY) and a source")
    return UnitPrice(float(usd), str(raw["unit"]), str(raw["date"]), str(raw["source"]))


def _is_date_or_year(text: str) -> bool:
    if len(text) == 4 and text.isdigit():
        return True
    try:
        dt.date.fromisoformat(text)
    except ValueError:
        return False
    return len(text) == 10
