"""Process designs of the GPU defaults' repeats: what each process pays outside its runs, and whether runs trained
in one process per round measure what fresh processes measure.

gpu_session's repeats phase trains each repeat in a fresh process (`--processes repeat`) or each backend's
workloads of a round in one process (`--processes round`), which pays the interpreter, the framework's import and
the device's set-up once a round instead of once a workload. That saving is worth having only where the shared
process's runs agree with fresh ones; until they are shown to, the report keeps them apart (`fresh_repeat`).

    python -m report.designs logs/reference/NVIDIA-H100     # JSON: start-up per design, round runs vs fresh
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from benchmarks.logs import find_logs, read_epoch_log
from benchmarks.metadata import RunMetadata, Status

REPEATS_PREFIX = "gpu-repeats-"


def fresh_repeat(meta: RunMetadata) -> bool:
    """A repeat of a GPU default trained alone in its process: the runs the report pools."""
    return meta.run_id.startswith(REPEATS_PREFIX) and not shared_process(meta)


def round_process_repeat(meta: RunMetadata) -> bool:
    """A repeat of a GPU default trained in one process per round (`--processes round`). A suite's runs share a
    process by design and are not repeats: they are neither."""
    return meta.run_id.startswith(REPEATS_PREFIX) and shared_process(meta)


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
    shared: bool


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
        span = (datetime.fromisoformat(meta.ended_at) - datetime.fromisoformat(meta.started_at)).total_seconds()
        host = str(meta.hardware.get("host_id") or meta.run_id)
        out.append(
            Timed(
                meta.run_id,
                meta.workload,
                meta.backend,
                meta.repeat.index,
                host,
                span,
                statistics.median(steady),
                shared_process(meta),
            )
        )
    return out


def manifest_processes(consoles: Path) -> list[dict]:
    """Every runner process gpu_session's repeats phase recorded in the manifests beside the consoles, in the
    order they ran, as {machine, run_id, backend, repeat, workloads, returncode, wall_s}; a manifest's name up to
    "-part" names its machine. A process listed without a return code of its own (the earlier manifests' suite
    entries) counts as finished."""
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
                            "returncode": p.get("returncode", 0),
                            "wall_s": p["wall_s"],
                        }
                    )
    return out


def start_up(processes: Iterable[dict], runs: Sequence[Timed]) -> list[dict]:
    """Per process whose every workload left a complete run: its wall time less the runs' spans, i.e. what it paid
    outside its runs. A run matches by folder, workload, backend and repeat index where exactly one process claims
    that key (calls number their repeats from where the committed logs stood, so two calls on one machine between
    collections claim the same numbers, and collect renumbers the later runs); a run longer than the process
    never matches it."""
    processes = list(processes)
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
                "design": "round" if len(p["workloads"]) > 1 else "repeat",
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


def shared_against_fresh(runs: Sequence[Timed]) -> list[dict]:
    """Per default trained in a shared process: its steady-epoch medians beside the fresh processes' (all
    machines, and the shared runs' own machines alone, which separates the design from the host)."""
    out = []
    for workload, backend in sorted({(r.workload, r.backend) for r in runs if r.shared}):
        same = [r for r in runs if (r.workload, r.backend) == (workload, backend)]
        shared = [r.steady_s for r in same if r.shared]
        hosts = {r.host for r in same if r.shared}
        fresh = sorted(r.steady_s for r in same if not r.shared)
        if not fresh:
            continue
        median = statistics.median(fresh)
        out.append(
            {
                "workload": workload,
                "backend": backend,
                "shared_s": [round(v, 3) for v in shared],
                "fresh_n": len(fresh),
                "fresh_median_s": round(median, 3),
                "fresh_range_s": [round(fresh[0], 3), round(fresh[-1], 3)],
                "fresh_same_host_s": [round(r.steady_s, 3) for r in same if not r.shared and r.host in hosts],
                "shared_over_fresh_median": round(statistics.median(shared) / median, 2),
                "inside_fresh_range": all(fresh[0] <= v <= fresh[-1] for v in shared),
            }
        )
    return out


def designs(platform_dir: Path) -> dict:
    runs = timed_repeats(platform_dir)
    compared = shared_against_fresh(runs)
    return {
        "start_up": start_up_summary(start_up(manifest_processes(platform_dir / "console"), runs)),
        "shared_against_fresh": compared,
        "shared_slower_than_fresh_median": sum(c["shared_over_fresh_median"] > 1 for c in compared),
        "shared_outside_fresh_range": sum(not c["inside_fresh_range"] for c in compared),
        "defaults_compared": len(compared),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m report.designs", description=__doc__.splitlines()[0])
    parser.add_argument("platform", type=Path, help="one GPU's folder of repeats, e.g. logs/reference/NVIDIA-H100")
    args = parser.parse_args(argv)
    if not args.platform.is_dir():
        print(f"error: platform: {args.platform} is not a folder", file=sys.stderr)
        return 2
    print(json.dumps(designs(args.platform), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
