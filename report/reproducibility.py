"""Whether a result survives a rerun elsewhere: each machine's calibration fingerprint, and per workload and
configuration the median of one machine's repeats against another machine's.

Machines are told apart by the harness's `hardware.host_id`; logs without it fall back to the run id (one run id is
one machine session). Steady-epoch times are compared, so short repeats and full runs of one configuration agree
on what is measured.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import pandas as pd

from benchmarks.stats import Estimate, compare, median_estimate
from report.loading import Run
from report.tables import Group

AGREE_WITHIN = 0.05  # the target of issue 11: two machines' medians within 5 % of each other
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
        hardware = members[0].metadata.get("hardware") or {}
        gpus = ", ".join(str(g.get("name")) for g in hardware.get("gpus") or [] if isinstance(g, dict))
        row = {
            "machine": machine + ("" if members[0].measured.host_id else " (run id: no host id recorded)"),
            "platform": ", ".join(sorted({r.config.platform for r in members})),
            "hardware": f"{gpus + ' + ' if gpus else ''}{hardware.get('cpu_model') or 'unknown CPU'}",
            "runs": len(members),
        }
        prints = [r.measured.fingerprint for r in members if r.measured.fingerprint]
        for key, title in FINGERPRINT_FIELDS:
            values = [float(p[key]) for p in prints if isinstance(p.get(key), int | float)]
            row[title] = f"{median_estimate(values).value:,.3g}" if values else NOT_RECORDED if not prints else "n/a"
        if prints and prints[0].get("host_single_thread_unit"):
            row["host single-thread score"] += f" {prints[0]['host_single_thread_unit']}"
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
    started = {m: min(str(r.metadata.get("started_at") or "") for r in rs) for m, rs in machines.items()}
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
