"""Process designs of the GPU defaults' repeats: what each process pays outside its runs, and whether runs trained
in one process per round measure what fresh processes measure.

gpu_session's repeats phase trains each repeat in a fresh process (`--processes repeat`) or each backend's
workloads of a round in one process (`--processes round`), which pays the interpreter, the framework's import and
the device's set-up once a round instead of once a workload. That saving is worth having only where the shared
process's runs agree with fresh ones; until they are shown to, the report keeps them apart (`fresh_repeat`).
`--processes preloaded` pays only the import once a round: a parent imports the framework and forks a fresh child
per workload (campaign.preload); its runs are set beside fresh ones the same way, and kept apart the same way.
`--processes staged` (PyTorch) forks those children at once: their first epochs, mostly `torch.compile`'s host
work, overlap, and their steady epochs run one child at a time; its runs too are kept apart and set beside fresh
ones, and its first epochs, which shared the machine, are never pooled with anyone's.
A shared run is set beside the fresh runs of its own host and of hosts about as fast (the fingerprint's
single-thread score), because on these machines the host's speed moves the host-bound defaults more than the
design does. What a round of the defaults costs per design, cold and warm compile cache, comes from the manifests.

    python -m campaign.designs logs/reference/NVIDIA-H100     # JSON: start-up and cost per design, round runs vs fresh
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.logs import find_logs, read_epoch_log
from benchmarks.metadata import RunMetadata, Status
from benchmarks.stats import (
    MIN_REPEATS_FOR_INTERVAL,
    between_machine_sd,
    machine_component_sd,
    mean_interval,
    within_machine_sd,
)
from benchmarks.workloads import REFERENCE_WORKLOADS

REPEATS_PREFIX = "gpu-repeats-"
SIMILAR_HOST = 0.2  # fresh runs whose host single-thread score is within 20 % of a shared run's count as alike


DESIGNS = ("repeat", "round", "preloaded", "staged")  # gpu_session's --processes
FORKED = ("preloaded", "staged")  # designs whose parent forks a child per workload; a round is one top-level process


def process_design(meta: RunMetadata) -> str:
    """repeat: trained alone in a fresh process; round: with other workloads in one process; preloaded: alone in
    a child forked from a parent that had imported the framework (campaign.preload); staged: such a child forked
    with its siblings at once, its first epoch beside theirs and its steady epochs alone."""
    if shared_process(meta):
        return "round"
    if meta.process is None or meta.process.design not in FORKED:
        return "repeat"
    return meta.process.design


def machine_of(meta: RunMetadata) -> str:
    """The machine a run ran on: its host id, or its run id where the host was not recorded."""
    return str(meta.hardware.get("host_id") or meta.run_id)


def repeat_design(meta: RunMetadata) -> str | None:
    """The process design of a GPU default's repeat; None for any other run (a suite's runs share a process by
    design and are not repeats)."""
    return process_design(meta) if meta.run_id.startswith(REPEATS_PREFIX) else None


def fresh_repeat(meta: RunMetadata) -> bool:
    """A repeat of a GPU default trained alone in a fresh process: the runs the report pools."""
    return repeat_design(meta) == "repeat"


def round_process_repeat(meta: RunMetadata) -> bool:
    """A repeat of a GPU default trained in one process per round (`--processes round`)."""
    return repeat_design(meta) == "round"


def preloaded_repeat(meta: RunMetadata) -> bool:
    """A repeat of a GPU default trained in a child of a preloaded parent (`--processes preloaded`)."""
    return repeat_design(meta) == "preloaded"


def staged_repeat(meta: RunMetadata) -> bool:
    """A repeat of a GPU default trained in a staged child (`--processes staged`)."""
    return repeat_design(meta) == "staged"


def shared_process(meta: RunMetadata) -> bool:
    return meta.process is not None and meta.process.workloads > 1


@dataclass(frozen=True)
class Timed:
    """A complete repeat's identity, span and steady-epoch median."""

    run_id: str
    workload: str
    backend: str
    index: int
    host: str
    span_s: float  # ended_at - started_at, whole seconds as the metadata records them
    steady_s: float
    design: str  # process_design
    host_score: float | None = None  # the fingerprint's single-thread score at the process's start
    setup: dict[str, float] = field(default_factory=dict)  # SETUP_PHASES -> seconds, where the run recorded them
    cache_lookups: tuple[int, int] | None = None  # the run's compile-cache (hits, misses); None: no cache record
    started_at: datetime | None = None


def complete_runs_in(folder: Path) -> Iterator[tuple[RunMetadata, list[float]]]:
    """(metadata, steady epoch seconds) of every complete run with steady epochs under `folder`."""
    for path in find_logs(folder):
        log = read_epoch_log(path)
        steady = [e.elapsed for e in log.steady_epochs]
        if log.metadata is not None and log.metadata.status == Status.COMPLETE and steady:
            yield log.metadata, steady


def timed_repeats(platform_dir: Path) -> list[Timed]:
    out = []
    for meta, steady in complete_runs_in(platform_dir):
        if not meta.run_id.startswith(REPEATS_PREFIX):
            continue
        if meta.repeat is None or not meta.started_at or not meta.ended_at:
            continue
        started = datetime.fromisoformat(meta.started_at)
        span = (datetime.fromisoformat(meta.ended_at) - started).total_seconds()
        host = machine_of(meta)
        out.append(
            Timed(
                meta.run_id,
                meta.workload,
                meta.backend,
                meta.repeat.index,
                host,
                span,
                statistics.median(steady),
                process_design(meta),
                _host_score(meta),
                _setup(meta),
                _cache_lookups(meta),
                started,
            )
        )
    return out


SETUP_PHASES = ("data_s", "build_s", "describe_s")


def _cache_lookups(meta: RunMetadata) -> tuple[int, int] | None:
    cache = meta.settings.compile_cache if meta.settings else None
    return (cache.hits, cache.misses) if cache else None


def _setup(meta: RunMetadata) -> dict[str, float]:
    timing = meta.timing
    found = {phase: getattr(timing, phase) for phase in SETUP_PHASES} if timing else {}
    return {phase: seconds for phase, seconds in found.items() if seconds is not None}


def setup_per_round(runs: Sequence[Timed]) -> dict[str, dict[str, dict[str, float]]]:
    """design -> backend -> each step before the first epoch (SETUP_PHASES), summed over a round's workloads from
    each workload's median: what a round of the defaults pays before any training, per process design."""
    by: dict[tuple[str, str, str], list[dict[str, float]]] = defaultdict(list)
    for run in runs:
        if set(run.setup) == set(SETUP_PHASES):
            by[run.design, run.backend, run.workload].append(run.setup)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for (design, backend, _), setups in sorted(by.items()):
        row = out.setdefault(design, {}).setdefault(
            backend, {"workloads": 0, "runs": 0, **dict.fromkeys(SETUP_PHASES, 0.0)}
        )
        row["workloads"] += 1
        row["runs"] += len(setups)
        for phase in SETUP_PHASES:
            row[phase] = round(row[phase] + statistics.median(s[phase] for s in setups), 2)
    return out


def _host_score(meta: RunMetadata) -> float | None:
    return meta.fingerprint.host_single_thread_score if meta.fingerprint else None


def manifest_processes(consoles: Path) -> list[dict]:
    """Every runner process gpu_session's repeats phase recorded in the manifests beside the consoles, in the
    order they ran, as {machine, run_id, backend, repeat, workloads, design, epochs, returncode, wall_s, round}; a
    manifest's name up to "-part" names its machine, epochs is None where the runs trained the suite's own, and
    round (the call's round, recorded since rounds of two designs alternated) None where not recorded. A
    process listed without a return code of its own (the earlier manifests' suite entries) counts as finished; one
    without a design (those before preloaded parents) is a round where it trained several workloads."""
    out = []
    for manifest in sorted(consoles.glob("*-manifest.json")):
        machine = manifest.name.split("-part")[0]
        for entry in json.loads(manifest.read_text()):
            if entry.get("phase") != "repeats":
                continue
            for p in entry.get("processes", [entry]):  # one suite entry per call, or one entry per process
                workloads = p.get("workloads") or ([p["workload"]] if "workload" in p else [])
                if workloads and "wall_s" in p:
                    out.append(
                        {
                            "machine": machine,
                            "run_id": entry["run_id"],
                            "backend": p["backend"],
                            "repeat": p["repeat"],
                            "workloads": list(workloads),
                            "design": p.get("design") or ("round" if len(workloads) > 1 else "repeat"),
                            "epochs": p.get("epochs"),
                            "returncode": p.get("returncode", 0),
                            "wall_s": p["wall_s"],
                            "round": p.get("round"),
                        }
                    )
    return out


def start_up(processes: Iterable[dict], runs: Sequence[Timed]) -> list[dict]:
    """Per process whose every workload left a complete run: its wall time less the runs' spans, i.e. what it paid
    outside its runs. A run matches by folder, workload, backend and repeat index where exactly one process claims
    that key (calls number their repeats from where the committed logs stood, so two calls on one machine between
    collections claim the same numbers, and collect renumbers the later runs); a run longer than the process
    never matches it. A staged parent's runs overlap in time, so its wall time is not theirs plus a start-up: it is
    left out."""
    processes = [p for p in processes if p["design"] != "staged"]
    by_key = {(r.run_id, r.workload, r.backend, r.index): r for r in runs}
    claims = Counter((p["run_id"], w, p["backend"], p["repeat"]) for p in processes for w in p["workloads"])
    out = []
    for p in processes:
        keys = [(p["run_id"], w, p["backend"], p["repeat"]) for w in p["workloads"]]
        matched = [by_key.get(k) if claims[k] == 1 else None for k in keys]
        if p["returncode"] != 0 or any(r is None or r.span_s > p["wall_s"] for r in matched):
            continue
        spans = sum(r.span_s for r in matched if r is not None)
        out.append(
            {
                "design": p["design"],
                "backend": p["backend"],
                "workloads": len(p["workloads"]),
                "wall_s": round(p["wall_s"], 1),
                "outside_runs_s": round(p["wall_s"] - spans, 1),
            }
        )
    return out


def start_up_summary(rows: Sequence[dict]) -> dict[str, dict[str, dict[str, float]]]:
    """design -> backend -> the median, least and most seconds a process paid outside its runs, and how many."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["design"], r["backend"]), []).append(r)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for (design, backend), group in sorted(groups.items()):
        values = [r["outside_runs_s"] for r in group]
        out.setdefault(design, {})[backend] = {
            "processes": len(values),
            "median_s": round(statistics.median(values), 1),
            "min_s": min(values),
            "max_s": max(values),
            "workloads_per_process": statistics.median(r["workloads"] for r in group),
        }
    return out


def shared_against_fresh(runs: Sequence[Timed], design: str = "round", label: str = "shared") -> list[dict]:
    """Per default trained in `design`'s processes: its steady-epoch medians beside the fresh processes' (all
    machines, and the design's own machines alone, which separates the design from the host); keys name the
    design's runs by `label`."""
    out = []
    for workload, backend in sorted({(r.workload, r.backend) for r in runs if r.design == design}):
        same = [r for r in runs if (r.workload, r.backend) == (workload, backend)]
        shared_runs = [r for r in same if r.design == design]
        shared = [r.steady_s for r in shared_runs]
        hosts = {r.host for r in shared_runs}
        fresh_runs = [r for r in same if r.design == "repeat"]
        fresh = sorted(r.steady_s for r in fresh_runs)
        if not fresh:
            continue
        median = statistics.median(fresh)
        alike = sorted(r.steady_s for r in fresh_runs if _alike_host(r, shared_runs))
        out.append(
            {
                "workload": workload,
                "backend": backend,
                f"{label}_s": [round(v, 3) for v in shared],
                "fresh_n": len(fresh),
                "fresh_median_s": round(median, 3),
                "fresh_range_s": [round(fresh[0], 3), round(fresh[-1], 3)],
                "fresh_same_host_s": [round(r.steady_s, 3) for r in fresh_runs if r.host in hosts],
                f"{label}_over_fresh_median": round(statistics.median(shared) / median, 2),
                "inside_fresh_range": all(fresh[0] <= v <= fresh[-1] for v in shared),
                "fresh_alike_host_s": [round(v, 3) for v in alike],
                f"{label}_over_alike_host_median": round(statistics.median(shared) / statistics.median(alike), 2)
                if alike
                else None,
            }
        )
    return out


def _alike_host(fresh: Timed, shared: Sequence[Timed]) -> bool:
    """Whether a fresh run's host scored within SIMILAR_HOST of any shared run's host."""
    if fresh.host_score is None:
        return False
    return any(
        s.host_score is not None and abs(fresh.host_score - s.host_score) <= SIMILAR_HOST * s.host_score for s in shared
    )


def same_machine(runs: Sequence[Timed], design: str) -> dict[str, dict]:
    """Per backend: `design`'s steady-epoch median against the fresh processes' median of the same default on the
    same machine, as a log ratio per (machine, default) pair; their mean with a 95 % bootstrap interval that
    resamples machines, then their pairs (pairs of one machine share its host and its hour), and its ratio. Only
    the same machine tells a design's effect from the host's: the verdicts' runs come from machines whose hosts
    differ by more than processes do. A mean whose interval holds 0 is no effect beyond the pairs' noise; a design
    can only keep the verdicts where there is none.

    A pair is `interleaved` where neither design's runs all came before the other's: a machine drifts over its
    lease (its later calls ran slower, whatever they ran), and a pair whose fresh runs all ran first measures that
    drift with the design. `interleaved_only` gives the same figures over those pairs alone."""
    by: dict[tuple[str, str, str], dict[str, list[Timed]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        by[r.backend, r.host, r.workload][r.design].append(r)
    out: dict[str, dict] = {}
    for backend in sorted({b for b, _, _ in by}):
        pairs = [
            _pair(host, workload, d[design], d["repeat"])
            for (b, host, workload), d in sorted(by.items())
            if b == backend and d.get(design) and d.get("repeat")
        ]
        if pairs:
            mixed = [p for p in pairs if p["interleaved"]]
            out[backend] = {
                "pairs": pairs,
                "machines": len({p["machine"] for p in pairs}),
                **_mean_log_ratio(pairs),
                "interleaved_only": {"pairs": len(mixed), **_mean_log_ratio(mixed)} if mixed else None,
            }
    return out


def _pair(host: str, workload: str, design: Sequence[Timed], fresh: Sequence[Timed]) -> dict[str, Any]:
    ratio = statistics.median(r.steady_s for r in design) / statistics.median(r.steady_s for r in fresh)
    return {
        "machine": host,
        "workload": workload,
        "runs": [len(design), len(fresh)],
        "log_ratio": round(math.log(ratio), 3),
        "interleaved": _interleaved([r.started_at for r in design], [r.started_at for r in fresh]),
    }


def _interleaved(one: Sequence[datetime | None], other: Sequence[datetime | None]) -> bool:
    """Whether neither group's runs all started before the other's first; unknown start times tell nothing."""
    a, b = [t for t in one if t is not None], [t for t in other if t is not None]
    if len(a) < len(one) or len(b) < len(other):
        return False
    return min(a) < max(b) and min(b) < max(a)


def _mean_log_ratio(pairs: Sequence[dict]) -> dict[str, Any]:
    """The pairs' mean log ratio, and its interval where there are MIN_REPEATS_FOR_INTERVAL pairs or more."""
    values = [p["log_ratio"] for p in pairs]
    mean = statistics.fmean(values)
    interval = None
    if len(values) >= MIN_REPEATS_FOR_INTERVAL:
        interval = [round(end, 3) for end in mean_interval(values, [p["machine"] for p in pairs])]
    return {
        "mean_log_ratio": round(mean, 3),
        "interval": interval,
        "ratio": round(math.exp(mean), 3),
        "beyond_noise": interval is not None and not interval[0] <= 0 <= interval[1],
    }


def spread_sources(runs: Sequence[Timed]) -> dict[str, dict[str, float | int | None]]:
    """Per backend, and over both: where the fresh repeats' spread lives, in log units (0.10 is about 10 %):
    between processes on one machine, between the machines' medians, and what machines add beyond the processes
    (benchmarks.stats). Where processes on one machine spread as much as machines do, a repeat in a fresh process
    buys as much as one on another machine; where they hardly spread, repeats belong on other machines."""
    by_default = by_default_and_machine(
        (r.workload, r.backend, r.host, r.steady_s) for r in runs if r.design == "repeat"
    )
    out: dict[str, dict[str, float | int | None]] = {}
    for backend in [*sorted({b for _, b in by_default}), "all"]:
        configurations = [m for (_, b), m in by_default.items() if backend in (b, "all")]
        out[backend] = {
            "defaults": len(configurations),
            "processes": sum(len(v) for m in configurations for v in m.values()),
            "within_machine_sd": _rounded(within_machine_sd(configurations)),
            "between_machine_medians_sd": _rounded(between_machine_sd(configurations)),
            "machine_component_sd": _rounded(machine_component_sd(configurations)),
        }
    return out


def by_default_and_machine(
    values: Iterable[tuple[str, str, str, float]],
) -> dict[tuple[str, str], dict[str, list[float]]]:
    """(workload, backend, machine, value) grouped by default, then by machine: the shape benchmarks.stats'
    spread functions take, one mapping per default."""
    out: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for workload, backend, machine, value in values:
        out[workload, backend][machine].append(value)
    return out


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def cache_states(processes: Iterable[dict], complete: Iterable[Timed] = ()) -> list[tuple[dict, str]]:
    """Each process, in the order they ran, with the compile cache it met on its machine for its backend: warm
    where every workload had finished there before, cold where none had run there, mixed between. A stopped
    process's workloads that left a `complete` run did finish (a preloaded parent's children end one by one); one
    it may or may not have reached is settled by the later process's own run of it: finished there if that run
    missed nothing in the cache (a run that looked nothing up compiled nothing a cache could hold), else not; with
    no such run on record the state is unknown. In a process of several workloads, those whose runs there looked
    nothing up (eager PyTorch) have no cache to meet and leave the state to the others."""
    complete = list(complete)
    completed = {(r.run_id, r.workload, r.backend, r.index) for r in complete}
    lookups = {(r.run_id, r.workload, r.backend, r.index): r.cache_lookups for r in complete}
    finished: dict[tuple[str, str], set[str]] = {}
    stopped: dict[tuple[str, str], set[str]] = {}
    out = []
    for p in processes:
        key = (p["machine"], p["backend"])
        done, cut = finished.setdefault(key, set()), stopped.setdefault(key, set())
        workloads = set(p["workloads"])
        cached = {w for w in workloads if lookups.get(_run_key(p, w)) != (0, 0)} or workloads
        uncertain = {w: lookups.get(_run_key(p, w)) for w in cached & (cut - done)}
        if any(counted is None for counted in uncertain.values()):
            state = "unknown"
        else:
            seen = done | {w for w, counted in uncertain.items() if counted and counted[1] == 0}
            state = "warm" if cached <= seen else "cold" if not cached & seen else "mixed"
        out.append((p, state))
        if p["returncode"] == 0:
            done.update(workloads)
            continue
        ended = {w for w in workloads if _run_key(p, w) in completed}
        done.update(ended)
        cut.update(workloads - ended)
    return out


def _run_key(process: dict, workload: str) -> tuple[str, str, str, int]:
    return (process["run_id"], workload, process["backend"], process["repeat"])


def cache_rounds(consoles: Path, complete: Iterable[Timed] = ()) -> dict[str, dict[str, float]]:
    """Per backend: a round of the 2017-2018 scripts' defaults (one fresh process per workload; the reference
    workloads, ResNet-50 and the GPT, measured later on other machines, are no part of it) in wall seconds with a
    cold compile cache (the workload's first process on a machine) and a warm one (its processes after one had
    finished there), the medians over machines, from the manifests gpu_session's repeats phase leaves beside the
    consoles and the platform's `complete` runs (timed_repeats), which tell what a stopped process finished."""
    return _fresh_rounds(cache_states(manifest_processes(consoles), complete))


def _fresh_rounds(states: Sequence[tuple[dict, str]]) -> dict[str, dict[str, float]]:
    walls: dict[str, dict[tuple[str, str], list[float]]] = {"cold": {}, "warm": {}}
    for p, state in states:
        scripts = p["workloads"][0] not in REFERENCE_WORKLOADS
        if scripts and p["design"] == "repeat" and p["epochs"] is None and p["returncode"] == 0 and state in walls:
            walls[state].setdefault((p["workloads"][0], p["backend"]), []).append(p["wall_s"])
    cold, warm = walls["cold"], walls["warm"]
    out: dict[str, dict[str, float]] = {}
    for backend in sorted({b for _, b in cold}):
        items = [k for k in cold if k[1] == backend and k in warm]
        out[backend] = {
            "workloads": len(items),
            "cold_s": round(sum(statistics.median(cold[k]) for k in items), 1),
            "warm_s": round(sum(statistics.median(warm[k]) for k in items), 1),
        }
    return out


def round_processes(processes: Sequence[dict], design: str = "round") -> list[dict]:
    """Every finished top-level process of `design` (round, or preloaded parent) that trained a whole round of its
    backend's defaults (as many workloads as any process of that backend listed), with its machine, wall time and
    the compile cache it met (cache_states)."""
    return _whole_rounds(cache_states(processes), design)


def _round_sizes(states: Sequence[tuple[dict, str]]) -> dict[str, int]:
    """Per backend, the workloads of a whole round: as many as any of its processes listed."""
    sizes: dict[str, int] = {}
    for p, _ in states:
        sizes[p["backend"]] = max(sizes.get(p["backend"], 0), len(p["workloads"]))
    return sizes


def _whole_rounds(states: Sequence[tuple[dict, str]], design: str, epochs: int | None = None) -> list[dict]:
    whole = _round_sizes(states)
    return [
        {"machine": p["machine"], "backend": p["backend"], "wall_s": round(p["wall_s"], 1), "cache": state}
        for p, state in states
        if p["design"] == design
        and p["epochs"] == epochs
        and 1 < len(p["workloads"]) == whole[p["backend"]]
        and p["returncode"] == 0
    ]


def _shared_designs(states: Sequence[tuple[dict, str]]) -> dict[str, tuple[str, int | None]]:
    """The round designs the manifests hold, by name: round, preloaded and staged with the suite's epochs, and
    preloaded_<N>_epochs or staged_<N>_epochs for such rounds whose runs trained N epochs each."""
    fewer = sorted({(p["design"], p["epochs"]) for p, _ in states if p["design"] in FORKED and p["epochs"]})
    return {"round": ("round", None), **{d: (d, None) for d in FORKED}} | {
        f"{design}_{n}_epochs": (design, n) for design, n in fewer
    }


def round_costs(consoles: Path, complete: Iterable[Timed] = ()) -> dict:
    """A round of the defaults, per backend and in all: fresh processes with a cold cache (before) against one
    process per backend (round) and one preloaded parent per backend forking a child per workload (preloaded),
    each with a warm cache (after), the medians of what the manifests recorded. Where a backend has no warm
    preloaded round, a mixed one (some workloads compiled cold) or else one whose cache the manifests cannot tell
    (after a stopped parent; each run's metadata records its own) stands in, and `preloaded_cache` says which.
    Preloaded rounds of fewer epochs per run than the suite's are costed apart, as preloaded_<N>_epochs."""
    states = cache_states(manifest_processes(consoles), complete)  # read once: every design, the same manifests
    fresh = _fresh_rounds(states)
    shared = {name: _whole_rounds(states, *design) for name, design in _shared_designs(states).items()}
    per_backend: dict[str, dict] = {}
    for backend, figures in fresh.items():
        per_backend[backend] = {"fresh_cold_s": figures["cold_s"], "fresh_warm_s": figures["warm_s"]}
        for design, rounds in shared.items():
            for cache in ("cold", "warm", "mixed", "unknown"):
                walls = [r["wall_s"] for r in rounds if r["backend"] == backend and r["cache"] == cache]
                if walls or cache in ("cold", "warm"):
                    per_backend[backend][f"{design}_{cache}_s"] = walls
    before = sum(b["fresh_cold_s"] for b in per_backend.values())
    out: dict = {"per_backend": per_backend, "before_s": round(before, 1)}
    round_after = _after(per_backend, "round", _caches("round"))
    out["after_s"], out["after_over_before"] = _total(round_after, before)
    for name in (n for n in shared if n.startswith(FORKED)):
        preloaded = _after(per_backend, name, _caches(name))
        out[f"{name}_s"], out[f"{name}_over_before"] = _total(preloaded, before)
        out[f"{name}_cache"] = {b: cache for b, (_, cache) in preloaded.items()} if preloaded else None
    out["cheapest"] = cheapest_round(per_backend, shared, before)
    out["same_machine"] = same_machine_rounds(states)
    return out


def _is_whole(process: dict, whole: dict[str, int]) -> bool:
    return len(process["workloads"]) == whole[process["backend"]]


def same_machine_rounds(states: Sequence[tuple[dict, str]]) -> list[dict]:
    """Before and after on one machine: per machine, backend and epochs per run, its whole rounds of fresh processes
    and of each forked design, warm cache only, and the forked design's median against the fresh one's. A fresh
    round is a call's round (the manifest's `round`) whose processes all finished, warm, one per workload of a whole
    round; the machine and its cache are the same for both designs, so the ratio is the design's saving alone."""
    whole = _round_sizes(states)
    fresh: dict[tuple[str, str, int | None, tuple[str, int]], list[tuple[dict, str]]] = defaultdict(list)
    forked: dict[tuple[str, str, int | None, str], list[float]] = defaultdict(list)
    for p, state in states:
        key = (p["machine"], p["backend"], p["epochs"])
        if p["design"] == "repeat" and p["round"] is not None:
            fresh[(*key, (p["run_id"], p["round"]))].append((p, state))
        elif p["design"] in FORKED and state == "warm" and p["returncode"] == 0 and _is_whole(p, whole):
            forked[(*key, p["design"])].append(p["wall_s"])
    fresh_walls: dict[tuple[str, str, int | None], list[float]] = defaultdict(list)
    for (machine, backend, epochs, _), processes in fresh.items():
        done = [p for p, state in processes if p["returncode"] == 0 and state == "warm"]
        if len(done) == len(processes) == whole[backend]:
            fresh_walls[machine, backend, epochs].append(round(sum(p["wall_s"] for p in done), 1))
    out = []
    for (machine, backend, epochs, design), walls in sorted(forked.items(), key=str):
        before = fresh_walls.get((machine, backend, epochs))
        if before:
            after = statistics.median(walls)
            out.append(
                {
                    "machine": machine,
                    "backend": backend,
                    "epochs": epochs,
                    "fresh_warm_s": before,
                    f"{design}_warm_s": [round(w, 1) for w in walls],
                    "over_fresh": round(after / statistics.median(before), 2),
                }
            )
    return out


def cheapest_round(per_backend: dict[str, dict], shared: Iterable[str], before: float) -> dict | None:
    """Per backend, the design whose warm round (a forked design's mixed or unknown-cache one where it has no warm
    one) cost least, and their sum against `before`; a design need not serve every backend (staged serves PyTorch
    alone). Whether that design keeps the verdicts is campaign.today's question. None unless each backend has one."""
    picks: dict[str, dict] = {}
    for backend, figures in per_backend.items():
        costs = [(*found, name) for name in shared if (found := _after_one(figures, name, _caches(name)))]
        if not costs:
            return None
        wall, cache, name = min(costs)
        picks[backend] = {"design": name, "wall_s": round(wall, 1), "cache": cache}
    total = sum(p["wall_s"] for p in picks.values())
    return {"by_backend": picks, "s": round(total, 1), "over_before": round(total / before, 2) if before else None}


def _caches(design: str) -> tuple[str, ...]:
    """The compile-cache states whose rounds stand for a design's cost after, best first."""
    return ("warm", "mixed", "unknown") if design.startswith(FORKED) else ("warm",)


def _after_one(figures: dict, design: str, caches: Sequence[str]) -> tuple[float, str] | None:
    """(median round wall, the cache it met) of the first of `caches` that `design` measured on one backend."""
    cache = next((c for c in caches if figures.get(f"{design}_{c}_s")), None)
    return None if cache is None else (statistics.median(figures[f"{design}_{cache}_s"]), cache)


def _after(per_backend: dict[str, dict], design: str, caches: Sequence[str]) -> dict[str, tuple[float, str]]:
    """backend -> (median round wall, the cache it met), taking the first of `caches` measured; {} unless every
    backend has one."""
    found = {backend: _after_one(figures, design, caches) for backend, figures in per_backend.items()}
    return {b: f for b, f in found.items() if f is not None} if all(found.values()) else {}


def _total(after: dict[str, tuple[float, str]], before: float) -> tuple[float | None, float | None]:
    if not after:
        return None, None
    total = sum(wall for wall, _ in after.values())
    return round(total, 1), round(total / before, 2) if before else None


def designs(platform_dir: Path) -> dict:
    runs = timed_repeats(platform_dir)
    compared = shared_against_fresh(runs)
    preloaded = shared_against_fresh(runs, "preloaded", "preloaded")
    staged = shared_against_fresh(runs, "staged", "staged")
    return {
        "same_machine": {design: same_machine(runs, design) for design in DESIGNS if design != "repeat"},
        "start_up": start_up_summary(start_up(manifest_processes(platform_dir / "console"), runs)),
        "shared_against_fresh": compared,
        "shared_slower_than_fresh_median": sum(c["shared_over_fresh_median"] > 1 for c in compared),
        "shared_outside_fresh_range": sum(not c["inside_fresh_range"] for c in compared),
        "shared_slower_than_alike_host_median": sum((c["shared_over_alike_host_median"] or 0) > 1 for c in compared),
        "defaults_with_alike_hosts": sum(c["shared_over_alike_host_median"] is not None for c in compared),
        "defaults_compared": len(compared),
        "preloaded_against_fresh": preloaded,
        "preloaded_slower_than_fresh_median": sum(c["preloaded_over_fresh_median"] > 1 for c in preloaded),
        "preloaded_outside_fresh_range": sum(not c["inside_fresh_range"] for c in preloaded),
        "staged_against_fresh": staged,
        "staged_slower_than_fresh_median": sum(c["staged_over_fresh_median"] > 1 for c in staged),
        "staged_outside_fresh_range": sum(not c["inside_fresh_range"] for c in staged),
        "round_costs": round_costs(platform_dir / "console", runs),
        "setup_per_round": setup_per_round(runs),
        "spread_sources": spread_sources(runs),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m campaign.designs", description=__doc__.splitlines()[0])
    parser.add_argument("platform", type=Path, help="one GPU's folder of repeats, e.g. logs/reference/NVIDIA-H100")
    args = parser.parse_args(argv)
    if not args.platform.is_dir():
        print(f"error: platform: {args.platform} is not a folder", file=sys.stderr)
        return 2
    print(json.dumps(designs(args.platform), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
