"""Own or rent, before renting: each machine one could own against each priced profile, for the planned runs.

The machines are the dated catalog of machines to buy (data/buyable.toml) and the user's own (`--owned FILE.toml`,
as data/owned.toml, with the `gpu` it holds). The planned runs are estimated on each machine's GPU as on any
profile (estimator.suite: the runs measured on that GPU where there are any, else the physics basis at its
tensor-core datasheet peak), and the break-even is estimator.owned's:

    speed-up = the runs' time on the rented profile / their time on the owned machine
    break-even days = purchase / (hours a day x (rented price x speed-up - electricity per hour) - idle cost a day)

with the owned machine's estimated range carried through (a faster machine pays back sooner). One line per
machine; a machine that cannot be weighed says why in that line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from benchmarks.workload_set import Workloads
from estimator.buyable import load_buyable
from estimator.owned import Owned, Rival
from estimator.physics import peaks
from estimator.suite import Basis, Shape, basis_of, estimate_runs
from records.catalog import Profile

HEAD = "own instead"


@dataclass(frozen=True)
class Rented:
    """A priced profile and the planned runs' estimated time on it (without the machine's start)."""

    profile: Profile
    price_per_hour: float
    runs_s: float


def bought(usd_per_kwh: float | None = None) -> dict[str, Owned]:
    """The buyable catalog's machines as owned ones (used around the clock), each with its GPU; electricity at
    `usd_per_kwh` where given."""
    return {
        name: replace(machine.with_electricity(usd_per_kwh).as_owned(), gpu=machine.gpu)
        for name, machine in load_buyable().items()
    }


def candidates(owned: Mapping[str, Owned], usd_per_kwh: float | None = None) -> list[tuple[Owned, str]]:
    """Every machine to weigh, each with what its line says of where it comes from: the buyable catalog's (an
    unknown price with why it is), then the user's."""
    found = []
    for name, machine in bought(usd_per_kwh).items():
        price = load_buyable()[name].figures["purchase_usd"]
        found.append((machine, "to buy" if price.value is not None else f"to buy; price unknown: {price.source}"))
    return found + [(m, "yours, --owned") for m in owned.values()]


def owning_lines(
    rented: Sequence[Rented],
    suite: str,
    items: Sequence[tuple[str, str]],
    logs: Path,
    shape: Shape | None = None,
    owned: Mapping[str, Owned] | None = None,
    workloads: Workloads | None = None,
) -> list[str]:
    """The dry run's own-or-rent lines: per machine, its time for the runs and the break-even in days of use
    against each profile in `rented` (those priced, whose runs were all estimated)."""
    if not rented:
        return []
    names = ", ".join(f"{r.profile.name} ${r.price_per_hour:.4f}/h" for r in rented)
    lines = [f"  {HEAD:<12} the break-even in days of use before owning costs less than renting ({names}):"]
    single = Shape(shape.epochs, shape.train_limit) if shape else Shape()  # an owned machine of one GPU
    basis = basis_of(logs)
    for machine, source in candidates(owned or {}):
        text = machine_text(machine, rented, suite, items, basis, single, workloads)
        lines.append(f"    {machine.title} ({source}): {text}")
    return lines


def machine_text(
    machine: Owned,
    rented: Sequence[Rented],
    suite: str,
    items: Sequence[tuple[str, str]],
    basis: Basis,
    shape: Shape,
    workloads: Workloads | None = None,
) -> str:
    why = cannot(machine)
    if why:
        return why
    assert machine.gpu is not None
    runs = estimate_runs(machine.gpu, suite, items, basis.logs, shape, workloads, basis)
    missing = [i for i in runs if i.seconds is None]
    if missing:
        return f"not estimated: {missing[0].workload} [{missing[0].backend}] {missing[0].basis}"
    point = sum(i.total for i in runs)
    low, high = sum(i.total_low for i in runs), sum(i.total_high for i in runs)
    bases = ", ".join(sorted({i.basis for i in runs}))
    days = "; ".join(f"{r.profile.name} {_days(machine, r, point, low, high)}" for r in rented)
    hours = "around the clock" if machine.hours_per_day in (None, 24.0) else f"at {machine.hours_per_day:g} h a day"
    electricity = "" if machine.electricity_per_kwh is not None else ", electricity not counted (no price)"
    return (
        f"the runs take {_minutes(point)} ({_minutes(low)} to {_minutes(high)}) on its {machine.gpu} ({bases}); "
        f"break-even {hours}{electricity}: {days}"
    )


def cannot(machine: Owned) -> str:
    """Why `machine` cannot be weighed against a catalog price, or ""."""
    if machine.currency != "USD":
        return f"priced in {machine.currency}, the catalog in USD: no exchange rate is assumed"
    if machine.purchase_price is None:
        return "not weighed: no purchase price"
    if machine.gpu is None:
        return "speed unknown: its entry names no `gpu` to estimate it from"
    if machine.gpu not in peaks():
        return f"speed unknown: {machine.gpu} has no datasheet peak in report/data/gpu_peaks.toml"
    return ""


def _days(machine: Owned, rented: Rented, point: float, low: float, high: float) -> str:
    def days(owned_s: float) -> float | None:
        rival = Rival(rented.profile.name, rented.profile.name, "", rented.price_per_hour, "", rented.runs_s / owned_s,
                      "", {})  # fmt: skip
        return machine.break_even_days(rival)

    found, fewest, most = days(point), days(low), days(high)
    if found is None:
        return "unknown"
    if math.isinf(found):
        return "never (renting costs less than its electricity)"
    spread = "" if fewest is None or most is None else f" ({_day(fewest)} to {_day(most)})"
    return f"{_day(found)} days{spread}"


def _day(days: float) -> str:
    return "never" if math.isinf(days) else f"{days:,.0f}"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:,.1f} min"
