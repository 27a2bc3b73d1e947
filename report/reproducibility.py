"""Whether a result survives a rerun elsewhere: each machine's calibration fingerprint, and per workload and
configuration the median of one machine's repeats against another machine's.

Machines are told apart by the harness's `hardware.host_id`; logs without it fall back to the run id (one run id is
one machine session). Steady-epoch times are compared, so short repeats and full runs of one configuration agree
on what is measured.

What a renter should expect from the next machine: per configuration run on several machines, the spread between
machines beside the spread within one, and the interval for the next machine's median
(`benchmarks.stats.next_machine_interval`), whose spread between machines is pooled over the configurations of one
kind (host-bound or not: host-bound ones vary more). `machine_check` holds every machine out in turn and counts how
often the other machines' interval held its median. For host-bound configurations, how a run's steady epoch follows
the host's single-thread score, measured by the runner in the same process.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from benchmarks.stats import (
    Estimate,
    HeldOut,
    between_machine_sd,
    compare,
    leave_one_machine_out,
    median_estimate,
    next_machine_interval,
)
from records.loading import Run
from report.tables import Group

AGREE_WITHIN = 0.05  # the reproducibility target: two machines' medians within 5 % of each other
NOT_RECORDED = "not recorded (logs before metadata schema 2)"
FINGERPRINT_FIELDS = (
    ("host_single_thread_score", "host single-thread score"),
    ("gemm_tflops", "GEMM (TFLOP/s)"),
    ("device_memory_gbps", "device memory (GB/s)"),
    ("host_to_device_gbps", "host to device (GB/s)"),
    ("seconds", "calibration (s)"),
)


def fingerprint_table(runs: Sequence[Run]) -> pd.DataFrame:
    """One row per machine: its hardware and the median of its runs' fingerprints; unknowns in words."""
    by_machine: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by_machine[run.machine].append(run)
    rows = []
    for machine, members in sorted(by_machine.items()):
        hardware = members[0].metadata.hardware
        gpus = ", ".join(str(g.get("name")) for g in hardware.get("gpus") or [] if isinstance(g, dict))
        row = {
            "machine": machine + ("" if members[0].measured.host_id else " (run id: no host id recorded)"),
            "platform": ", ".join(sorted({r.config.platform for r in members})),
            "hardware": f"{gpus + ' + ' if gpus else ''}{hardware.get('cpu_model') or 'unknown CPU'}",
            "runs": len(members),
        }
        prints = [r.measured.fingerprint for r in members if r.measured.fingerprint]
        for key, title in FINGERPRINT_FIELDS:
            values = [float(v) for p in prints if isinstance(v := getattr(p, key), int | float)]
            row[title] = f"{median_estimate(values).value:,.3g}" if values else NOT_RECORDED if not prints else "n/a"
        if prints and prints[0].host_single_thread_unit:
            row["host single-thread score"] = f"{row['host single-thread score']} {prints[0].host_single_thread_unit}"
        rows.append(row)
    return pd.DataFrame(rows)


def reproducibility_table(groups: Sequence[Group]) -> pd.DataFrame:
    """Per workload x configuration run on two or more machines: each other machine's median steady epoch
    against the first machine's (the one that ran first), with intervals and the agreement checks."""
    rows = []
    for group in sorted(groups, key=lambda g: (g.workload, g.config.label)):
        machines = _by_machine(group.runs)
        if len(machines) < 2:
            continue
        (first, base_runs), *others = machines
        base = _steady(base_runs)
        for machine, runs in others:
            rows.append(_row(group, first, base, machine, _steady(runs)))
    return pd.DataFrame(rows)


def _by_machine(runs: Sequence[Run]) -> list[tuple[str, list[Run]]]:
    machines: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        if run.steady_median_s is not None:
            machines[run.machine].append(run)
    started = {m: min(r.metadata.started_at or "" for r in rs) for m, rs in machines.items()}
    return sorted(machines.items(), key=lambda item: (started[item[0]], item[0]))


def _steady(runs: Sequence[Run]) -> list[float]:
    return [r.steady_median_s for r in runs if r.steady_median_s is not None]


def _row(group: Group, first: str, a: list[float], second: str, b: list[float]) -> dict[str, object]:
    ea, eb = median_estimate(a), median_estimate(b)
    difference = eb.value / ea.value - 1
    return {
        "workload": group.workload,
        "configuration": group.config.label,
        "machine A": first,
        "A: steady epoch (s)": _estimate_text(ea),
        "machine B": second,
        "B: steady epoch (s)": _estimate_text(eb),
        "B vs A": f"{difference:+.1%}",
        "within 5%": "yes" if abs(difference) <= AGREE_WITHIN else "no",
        "within each other's intervals": _overlap(ea, eb),
        "test": compare(b, a).text("B", "A"),
    }


def _estimate_text(estimate: Estimate) -> str:
    return f"{estimate.value:.3f} ({estimate.interval_text('{:.3f}')})"


def _overlap(a: Estimate, b: Estimate) -> str:
    if not (a.has_interval and b.has_interval):
        return "unknown: fewer than 3 repeats on a machine"
    assert a.low is not None and a.high is not None and b.low is not None and b.high is not None
    inside = a.low <= b.value <= a.high and b.low <= a.value <= b.high
    return "yes" if inside else "no"


HOST_BOUND, GPU_BOUND = "host-bound", "not host-bound"
TARGET_COVERAGE = 0.90  # the share of held-out machines the next-machine interval should hold


@dataclass(frozen=True)
class Kind:
    """Configurations of one kind (host-bound or not): their runs by machine, and the leave-one-machine-out check."""

    name: str
    groups: list[Group]
    by_machine: list[dict[str, list[float]]]
    between_sd: float | None
    held_out: list[HeldOut]

    @property
    def inside(self) -> int:
        return sum(h.inside for h in self.held_out)


@dataclass(frozen=True)
class MachineCheck:
    kinds: list[Kind]

    @property
    def held_out(self) -> int:
        return sum(len(k.held_out) for k in self.kinds)

    @property
    def inside(self) -> int:
        return sum(k.inside for k in self.kinds)

    @property
    def share(self) -> float | None:
        return self.inside / self.held_out if self.held_out else None

    def text(self) -> str:
        """One sentence: how often the other machines' interval held a held-out machine's median."""
        if not self.held_out:
            return "Leave one machine out: no configuration has runs on two or more machines (3 runs besides one)."
        parts = [
            f"{k.name}: {k.inside} of {len(k.held_out)}, spread between machines {_sd_text(k.between_sd)}"
            for k in self.kinds
            if k.held_out
        ]
        share = self.share or 0.0
        verdict = "meets" if share >= TARGET_COVERAGE else "misses"
        return (
            f"Leave one machine out: {self.inside} of {self.held_out} held-out machine medians ({share:.0%}) fell "
            f"inside the 95% interval for the next machine built from the other machines alone ({'; '.join(parts)}); "
            f"this {verdict} the target of {TARGET_COVERAGE:.0%}."
        )


def _sd_text(sd: float | None) -> str:
    return "unknown" if sd is None else f"±{math.expm1(sd):.1%} (1 s.d.)"


def _kind_of(group: Group) -> str:
    return HOST_BOUND if any(r.measured.host_bound for r in group.runs) else GPU_BOUND


def _steady_by_machine(group: Group) -> dict[str, list[float]]:
    return {machine: _steady(runs) for machine, runs in _by_machine(group.runs)}


def machine_check(groups: Sequence[Group]) -> MachineCheck:
    kinds = []
    for name in (HOST_BOUND, GPU_BOUND):
        members = sorted((g for g in groups if _kind_of(g) == name), key=lambda g: (g.workload, g.config.label))
        by_machine = [_steady_by_machine(g) for g in members]
        kinds.append(Kind(name, members, by_machine, between_machine_sd(by_machine), leave_one_machine_out(by_machine)))
    return MachineCheck(kinds)


def machine_spread_table(check: MachineCheck) -> pd.DataFrame:
    """Per configuration run on two or more machines: the spread within one machine and between machines, the
    median over machines and runs, and what the next machine should give; for host-bound ones, the host score."""
    rows = []
    for kind in check.kinds:
        for group, by_machine in zip(kind.groups, kind.by_machine, strict=True):
            if len(by_machine) < 2:
                continue
            rows.append(_spread_row(group, kind, by_machine))
    return pd.DataFrame(rows)


def _spread_row(group: Group, kind: Kind, by_machine: dict[str, list[float]]) -> dict[str, object]:
    values = [v for runs in by_machine.values() for v in runs]
    machines = [m for m, runs in by_machine.items() for _ in runs]
    pooled = median_estimate(values, machines)
    medians = [float(np.median(v)) for v in by_machine.values()]
    within = [(max(v) - min(v)) / float(np.median(v)) for v in by_machine.values() if len(v) > 1]
    nxt = next_machine_interval(by_machine, kind.between_sd or 0.0)
    return {
        "workload": group.workload,
        "configuration": group.config.label,
        "kind": kind.name,
        "machines": len(by_machine),
        "runs": len(values),
        "steady epoch (s), machines then runs": f"{pooled.value:.3f} ({pooled.interval_text('{:.3f}')})",
        "within one machine (runs' range)": f"{np.median(within):.1%}" if within else "n/a: one run per machine",
        "between machines (medians' range)": f"{(max(medians) - min(medians)) / pooled.value:.1%}",
        "next machine's median (95%)": nxt.interval_text("{:.3f}").split(" (")[0] + " s"
        if nxt.has_interval
        else "n/a: fewer than 3 runs",
        "host single-thread score": _host_score(group) if kind.name == HOST_BOUND else "",
    }


def _host_score(group: Group) -> str:
    """How a run's steady epoch follows its host's single-thread score: the scores seen, their rank correlation
    with the epoch time, and the fitted epoch time at the lowest and highest score (log-linear least squares)."""
    pairs = [
        (r.measured.fingerprint.host_single_thread_score, r.steady_median_s)
        for r in group.runs
        if r.steady_median_s is not None and r.measured.fingerprint
    ]
    if len(pairs) < 4:
        return f"n/a: {len(pairs)} run(s) with a score"
    scores, times = np.array(pairs).T
    rho = pd.Series(scores).corr(pd.Series(times), method="spearman")
    slope, intercept = np.polyfit(scores, np.log(times), 1)
    low, high = scores.min(), scores.max()
    fitted = np.exp(intercept + slope * np.array([low, high]))
    return (
        f"{low:.1f}–{high:.1f}; Spearman ρ = {rho:+.2f} (n={len(pairs)}); fitted {fitted[0]:.3f} s at "
        f"{low:.1f}, {fitted[1]:.3f} s at {high:.1f}"
    )
