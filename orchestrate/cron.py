"""Cron expressions for scheduled runs: the 5-field unix form both clouds' schedulers are given, checked here.

Cloud Scheduler takes unix-cron (`minute hour day-of-month month day-of-week`) as is; EventBridge Scheduler takes
`cron(minutes hours day-of-month month day-of-week year)`, where one of the two day fields must be `?`, days of
the week are numbered 1-7 from Sunday and there is no "either day field" rule. So an expression is parsed into the
sets of values it allows and written back out for each cloud, and the one meaning the two clouds cannot share
(both day fields restricted, which unix-cron reads as "either") is refused, so that a schedule fires on the same
days whichever cloud runs it.
"""

from __future__ import annotations

import calendar
import datetime as dt
import itertools
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass

MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
WEEKDAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")  # unix-cron numbers them 0-6 (and 7 = Sunday)
# (name, lowest, highest, names for lowest.. or None)
FIELDS = (
    ("minute", 0, 59, None),
    ("hour", 0, 23, None),
    ("day-of-month", 1, 31, None),
    ("month", 1, 12, MONTHS),
    ("day-of-week", 0, 7, WEEKDAYS),
)
# Averaged over 2025-2028 (one leap year): a daily schedule fires 30.44 times a month.
REFERENCE_YEARS = (2025, 2029)


class CronError(ValueError):
    """A cron expression or time zone that cannot be used; the message says which part and why."""


@dataclass(frozen=True)
class Cron:
    text: str  # as given (whitespace normalised)
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int] | None  # None: any day of the month ("*")
    months: frozenset[int]
    weekdays: frozenset[int] | None  # 0 = Sunday; None: any day of the week ("*")

    def fires_on(self, day: dt.date) -> bool:
        if day.month not in self.months:
            return False
        if self.days is not None and day.day not in self.days:
            return False
        return self.weekdays is None or (day.isoweekday() % 7) in self.weekdays

    def eventbridge(self) -> str:
        """The same schedule as EventBridge Scheduler's `cron(...)` expression."""
        days = "?" if self.days is None and self.weekdays is not None else _compact(self.days, 1, 31)
        weekdays = "?" if self.weekdays is None else _compact(self.weekdays, 0, 6, WEEKDAYS)
        fields = (_compact(self.minutes, 0, 59), _compact(self.hours, 0, 23), days, _compact(self.months, 1, 12))
        return f"cron({' '.join(fields)} {weekdays} *)"

    def runs_per_month(self) -> float:
        """How many times it fires in an average month (over the reference years)."""
        first, last = (dt.date(year, 1, 1) for year in REFERENCE_YEARS)
        days = sum(1 for n in range((last - first).days) if self.fires_on(first + dt.timedelta(days=n)))
        months = (REFERENCE_YEARS[1] - REFERENCE_YEARS[0]) * 12
        return days * len(self.minutes) * len(self.hours) / months

    def shortest_gap_minutes(self) -> float:
        """The shortest time between two firings, looking ahead over a year (so monthly gaps are seen too)."""
        times = sorted(self._times_in(dt.date(REFERENCE_YEARS[0], 1, 1), 366, limit=20_000))
        if len(times) < 2:
            return float("inf")
        return min((b - a).total_seconds() / 60 for a, b in itertools.pairwise(times))

    def _times_in(self, start: dt.date, days: int, limit: int) -> list[dt.datetime]:
        clock = sorted((h, m) for h in self.hours for m in self.minutes)
        found: list[dt.datetime] = []
        for n in range(days):
            day = start + dt.timedelta(days=n)
            if self.fires_on(day):
                found += [dt.datetime(day.year, day.month, day.day, h, m) for h, m in clock]
                if len(found) >= limit:
                    break
        return found


def parse_cron(text: str) -> Cron:
    """A 5-field unix-cron expression; CronError names the field that is wrong."""
    parts = text.split()
    if len(parts) != len(FIELDS):
        raise CronError(
            f"cron {text!r}: expected 5 fields (minute hour day-of-month month day-of-week), got {len(parts)}; "
            'e.g. "0 4 * * 1" for Mondays at 04:00'
        )
    sets = [_field(text, part, *spec) for part, spec in zip(parts, FIELDS, strict=True)]
    minutes, hours, days, months, weekdays = sets
    if parts[2] != "*" and parts[4] != "*":
        raise CronError(
            f"cron {text!r}: day-of-month and day-of-week are both restricted (cron then runs on either); "
            "EventBridge Scheduler cannot say that: give one of them as *"
        )
    weekdays = {d % 7 for d in weekdays}  # 7 is Sunday too
    if parts[2] != "*" and not any(max_day(month) >= min(days) for month in months):
        raise CronError(f"cron {text!r}: day-of-month {parts[2]} never occurs in month(s) {parts[3]}")
    return Cron(
        text=" ".join(parts),
        minutes=frozenset(minutes),
        hours=frozenset(hours),
        days=None if parts[2] == "*" else frozenset(days),
        months=frozenset(months),
        weekdays=None if parts[4] == "*" else frozenset(weekdays),
    )


def max_day(month: int) -> int:
    return 29 if month == 2 else calendar.monthrange(2025, month)[1]


def check_time_zone(name: str) -> str:
    """An IANA time zone name both schedulers accept (e.g. UTC, Europe/Berlin); CronError otherwise."""
    if name not in zoneinfo.available_timezones():
        close = sorted(z for z in zoneinfo.available_timezones() if z.lower() == name.lower())
        hint = f"; did you mean {close[0]}?" if close else "; use an IANA name such as UTC or Europe/Berlin"
        raise CronError(f"time zone {name!r} is not an IANA time zone name{hint}")
    return name


def _field(text: str, part: str, name: str, low: int, high: int, names: tuple[str, ...] | None) -> set[int]:
    def fail(why: str) -> CronError:
        return CronError(f"cron {text!r}: {name} field {part!r}: {why}")

    values: set[int] = set()
    for item in part.split(","):
        body, slash, step_text = item.partition("/")
        step = _number(step_text, fail) if slash else 1
        if step < 1:
            raise fail("a step must be 1 or more")
        if body == "*":
            first, last = low, high
        else:
            first_text, dash, last_text = body.partition("-")
            first = _value(first_text, low, names, fail)
            last = _value(last_text, low, names, fail) if dash else (high if slash else first)
        for value in (first, last):
            if not low <= value <= high:
                raise fail(f"{value} is outside {low}-{high}")
        if first > last:
            raise fail(f"the range {first}-{last} runs backwards")
        values.update(range(first, last + 1, step))
    return values


def _value(text: str, low: int, names: tuple[str, ...] | None, fail: Callable[[str], CronError]) -> int:
    if names is not None and text.upper() in names:
        return names.index(text.upper()) + low
    return _number(text, fail)


def _number(text: str, fail: Callable[[str], CronError]) -> int:
    if not text.isdigit():
        raise fail(f"{text!r} is not a number{' or a name' if text.isalpha() else ''} (? L W # are AWS-only)")
    return int(text)


def _compact(values: frozenset[int] | None, low: int, high: int, names: tuple[str, ...] | None = None) -> str:
    """`*` for every value, else comma-separated runs (`1-5,10`), with names where the field has them."""
    if values is None or set(values) >= set(range(low, high + 1)):
        return "*"
    ordered = sorted(values)
    runs: list[tuple[int, int]] = []
    for value in ordered:
        if runs and value == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], value)
        else:
            runs.append((value, value))

    def label(value: int) -> str:
        return names[value - low] if names is not None else str(value)

    return ",".join(label(a) if a == b else f"{label(a)}-{label(b)}" for a, b in runs)
