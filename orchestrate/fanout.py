"""`orchestrate run --profiles a,b,c`: one suite on several machine profiles at once, as SkyPilot's
`sky bench launch --gpus V100,T4` does: one combined estimate first, every candidate launched concurrently, then
duration, dollars spent, seconds and dollars per epoch, and the whole suite's time and cost extrapolated for each.

Each profile's run is an ordinary `python -m orchestrate run --profile P` child process with its own run id
(`<base>-<profile>`), ledger entries and teardown. Child processes, not threads, because a run turns SIGINT and
SIGTERM into its own teardown, and Python delivers signals to the main thread only: here the parent forwards
SIGTERM to every child and waits for each teardown. One child failing (no capacity, a quota, an unreachable host)
does not stop the others.

Each child owns its life: it runs in a session of its own and writes its output to a file of its own
(`fanouts/<base>/<profile>.log` beside the ledger), which the parent shows line by line. So a parent killed
outright (`kill -9`, a closed terminal) takes nothing with it: each child finishes, tears down and writes its
ledger entry, and `orchestrate collect <base>` makes the combined table and report from the fan-out's manifest
(`fanouts/<base>.json`) once they are done.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.suites import get_suite
from benchmarks.workloads import WORKLOADS
from estimator.suite import SuiteEstimate, estimate_suite
from estimator.workload_plan import planned_spec
from orchestrate.plan import RunPlan
from orchestrate.runspec import estimate_shape
from records.catalog import CatalogError, Profile, get_profile, runs_as
from records.ledger import STATUS_COMPLETE, RunRecord
from records.loading import Run, load_runs

SUMMARY = "fanout.md"
TAIL_INTERVAL_S = 0.2


@dataclass(frozen=True)
class Candidate:
    """One profile of a fan-out: the name asked for, and the profile that runs (its replacement if retired)."""

    requested: str
    profile: Profile
    retired_on: str | None = None  # of the requested profile, when it was replaced

    @property
    def mapping(self) -> str | None:
        if self.requested == self.profile.name:
            return None
        return f"{self.requested} (retired {self.retired_on}) -> {self.profile.name}"


def resolve_candidates(catalog: Mapping[str, Profile], text: str, allow_retired: bool) -> list[Candidate]:
    """The profiles named in `--profiles`; a retired one maps to its catalog `replacement` (today's nearest
    machine) unless `--allow-retired`. A profile named twice, directly or through a replacement, runs once."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise CatalogError(f"--profiles {text!r}: expected comma-separated profile names")
    candidates: list[Candidate] = []
    for name in names:
        profile = runs_as(catalog, name, allow_retired)  # the same rule as `run --profile`
        candidate = Candidate(name, profile, catalog[name].retired_on if profile.name != name else None)
        if all(c.profile.name != candidate.profile.name for c in candidates):
            candidates.append(candidate)
    return candidates


def fanout_run_id(base: str, profile: str) -> str:
    return f"{base}-{profile}"


def candidates_of(catalog: Mapping[str, Profile], members: Iterable[Member]) -> list[Candidate]:
    """The candidates a manifest's members ran as (their profiles read from the catalog again)."""
    return [Candidate(m.requested, get_profile(catalog, m.profile, allow_retired=True), m.retired_on) for m in members]


# ---- the combined estimate -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CandidateEstimate:
    candidate: Candidate
    seconds: float  # estimated machine time (start and runs), 0 when nothing could be estimated
    low: float
    high: float
    cost: float | None  # None: no price (a host of one's own costs nothing here; a profile without a price)
    cost_low: float | None
    cost_high: float | None
    cap: float | None  # a rented machine's max lifetime at its price: it ends itself then (a host of one's own: None)
    outlives_machine: bool  # the high end is beyond --max-lifetime: the machine would end itself mid-suite
    unestimated: int  # planned runs with no measured or published run to estimate from
    planned: int  # planned runs
    missing_price: str | None = None  # a rented machine's market the catalog has no price for: its cost is unknown
    runs_s: float = 0.0  # the planned runs' estimated time, the machine's start left out (for own or rent)

    @property
    def rank(self) -> tuple[bool, bool, float]:
        """Cheapest first, then (no price) quickest; a profile with runs not estimated after every estimated one:
        its figures leave those runs out, so they are no rank."""
        return self.unestimated > 0, self.cost is None, self.seconds if self.cost is None else self.cost


def estimate_plan(plan: RunPlan) -> SuiteEstimate:
    """The plan's estimate (estimator.suite): its items, shaped by its runner options, after its payload's transfer."""
    items = [(i.workload, i.backend) for i in plan.items]
    carried = plan.spec.payload.size if plan.spec.payload is not None else 0
    shape = estimate_shape(plan.runner, plan.profile, plan.nodes, plan.processes_per_node)
    return estimate_suite(plan.profile, plan.suite, items, plan.logs_dir, shape, carried, plan.workloads)


def estimate_candidate(candidate: Candidate, plan: RunPlan, billable: bool) -> CandidateEstimate:
    profile = plan.profile
    estimate = estimate_plan(plan)
    # A host of one's own with a catalog price (a pod rented by the hour, reached over SSH) is priced like a rented
    # machine, as its dry run alone prices it; only a rented one ends itself at --max-lifetime.
    priced = profile.hourly_price(plan.spot) is not None
    market = "spot" if plan.spot else "on-demand"

    def cost(seconds: float) -> float | None:
        return profile.cost_usd(seconds, spot=plan.spot) if priced else None

    return CandidateEstimate(
        candidate=candidate,
        seconds=estimate.seconds,
        low=estimate.low,
        high=estimate.high,
        cost=cost(estimate.seconds),
        cost_low=cost(estimate.low),
        cost_high=cost(estimate.high),
        cap=cost(plan.max_lifetime_s) if billable else None,
        outlives_machine=billable and estimate.high > plan.max_lifetime_s,
        unestimated=estimate.unestimated,
        planned=estimate.planned,
        missing_price=market if billable and not priced else None,
        runs_s=estimate.runs,
    )


def worst_case_usd(estimate: CandidateEstimate) -> float | None:
    """What `--max-cost` is checked against, the table's "worst case": the high end of the estimate's range, never
    above a rented machine's cost at --max-lifetime (it ends itself then); where part of the suite could not be
    estimated (the estimate is then a lower bound), that max-lifetime cost, or unknown (None) on a priced host
    that nothing ends. An unpriced host of one's own costs nothing here."""
    if estimate.cost is None:
        return None if estimate.missing_price else 0.0
    if estimate.unestimated:
        return estimate.cap
    high = estimate.cost_high or 0.0
    return high if estimate.cap is None else min(high, estimate.cap)


WORST_CASE = (
    "worst case: the high end of the range; where runs are not estimated, the cost at --max-lifetime, when a rented "
    "machine ends itself; --max-cost is checked against the total"
)


def unpriced(estimates: Sequence[CandidateEstimate]) -> str | None:
    """The profiles whose worst case is unknown, as `no spot price for gce-t4, gce-l4`: a rented machine whose
    price the catalog lacks, or a priced host of one's own (nothing ends it) with runs not estimated; None when
    every one has a worst case. An unknown cost is never $0: no worst case can be summed over them."""
    by_market: dict[str, list[str]] = {}
    for e in estimates:
        if e.missing_price:
            by_market.setdefault(f"no {e.missing_price} price for", []).append(e.candidate.profile.name)
        elif worst_case_usd(e) is None:
            by_market.setdefault("runs not estimated on", []).append(e.candidate.profile.name)
    if not by_market:
        return None
    return " and ".join(f"{why} {', '.join(names)}" for why, names in by_market.items())


def estimate_table(estimates: Sequence[CandidateEstimate]) -> list[str]:
    """One row per profile, cheapest first; a profile with runs not estimated comes after the others, its time and
    cost marked "at least" (never a run counted as nothing and ranked cheap), and so is the total."""
    header = f"  {'profile':<24} {'machine time (range)':<28} {'cost (range)':<24} {'worst case':>10}"
    lines = [header]
    for e in sorted(estimates, key=lambda e: e.rank):
        time, cost = _figures(e.seconds, e.low, e.high, e.cost, e.cost_low, e.cost_high, lower_bound=e.unestimated > 0)
        cost = f"no {e.missing_price} price" if e.missing_price else cost
        worst = worst_case_usd(e)
        cell = "unknown" if worst is None else "-" if e.cost is None else f"${worst:.2f}"
        note = f"  {e.unestimated} of {e.planned} run(s) not estimated" if e.unestimated else ""
        note += "  may end itself mid-suite (raise --max-lifetime)" if e.outlives_machine else ""
        lines.append(f"  {e.candidate.profile.name:<24} {time:<28} {cost:<24} {cell:>10}{note}")
    lines += [_total_row(estimates), f"  {WORST_CASE}"]
    return lines


def _figures(
    seconds: float, low: float, high: float, cost: float | None, cost_low: float | None, cost_high: float | None,
    lower_bound: bool,
) -> tuple[str, str]:  # fmt: skip
    """The time and cost cells: a figure and its range, or "at least" a figure with no high end."""
    if lower_bound:
        return f"at least {seconds / 60:.1f} min", "-" if cost is None else f"at least ${cost:.2f}"
    time = f"{seconds / 60:.1f} min ({low / 60:.1f}-{high / 60:.1f})"
    return time, "-" if cost is None else f"${cost:.2f} (${cost_low or 0.0:.2f}-${cost_high or 0.0:.2f})"


def _total_row(estimates: Sequence[CandidateEstimate]) -> str:
    priced = [e for e in estimates if e.cost is not None]
    unestimated = sum(e.unestimated for e in estimates)

    def total(values: Iterable[float | None]) -> float | None:
        return sum(v or 0.0 for v in values) if priced else None

    time, cost = _figures(
        sum(e.seconds for e in estimates), sum(e.low for e in estimates), sum(e.high for e in estimates),
        total(e.cost for e in priced), total(e.cost_low for e in priced), total(e.cost_high for e in priced),
        lower_bound=unestimated > 0,
    )  # fmt: skip
    missing = unpriced(estimates)
    known = [w for e in estimates if (w := worst_case_usd(e)) is not None]
    worst = "unknown" if missing else f"${sum(known):.2f}" if priced else "-"
    note = ""
    if missing:
        others = f" (the others up to ${sum(known):.2f})" if any(known) else ""
        note += f"  worst case unknown: {missing}{others}; --max-cost refuses an unknown cost"
    if unestimated:
        planned = sum(e.planned for e in estimates)
        note += (
            f"{';' if note else ' '} time and cost are a lower bound: {unestimated} of {planned} run(s) not estimated"
        )
    return f"  {'total':<24} {time:<28} {cost:<24} {worst:>10}{note}"


MEASURE_SUITE, MEASURE_REPEATS = "short", 3  # slices long enough for steady epochs, repeats for an interval


def close_call(estimates: Sequence[CandidateEstimate]) -> list[CandidateEstimate]:
    """The candidates an estimate cannot choose between: the cheapest (the quickest where none is priced) and every
    one whose range overlaps its range; [] where the leader stands clear or nothing was estimated."""
    ranked = [e for e in sorted(estimates, key=lambda e: e.rank) if not e.unestimated]
    if len(ranked) < 2:
        return []
    leader = ranked[0]
    if leader.cost is not None:
        close = [e for e in ranked if e.cost_low is not None and e.cost_low <= (leader.cost_high or 0.0)]
    else:
        close = [e for e in ranked if e.low <= leader.high]
    return close if len(close) > 1 else []


def close_call_lines(
    close: Sequence[CandidateEstimate], measuring: Sequence[CandidateEstimate], command: str
) -> list[str]:
    """What to do when the ranges overlap: the fan-out that measures the user's model on those machines, with what
    that measurement costs (`measuring`: its estimate on each)."""

    def span(e: CandidateEstimate) -> str:
        if e.cost is None:
            return f"{e.low / 60:.1f}-{e.high / 60:.1f} min"
        return f"${e.cost_low or 0.0:.2f}-${e.cost_high or 0.0:.2f}"

    ranges = ", ".join(f"{e.candidate.profile.name} {span(e)}" for e in close)
    cost, cap = sum(e.cost or 0.0 for e in measuring), measure_cap(measuring)
    priced = any(e.cost is not None for e in measuring)
    price = f"about ${cost:.2f}, worst case ${cap:.2f}, its --max-cost" if priced else "no price"
    lines = [
        f"  too close to call: {ranges} overlap within their ranges. Measure the model on them "
        f"({MEASURE_SUITE} slices, {MEASURE_REPEATS} repeats; {price}):",
        f"    {command}",
        "  after it, the estimate for these machines rests on those runs (the measured basis)",
    ]
    dearest = max((e.cost_high or 0.0) for e in close)
    if cap > dearest > 0:
        lines.append(
            f"  the measurement may cost more than the suite on the dearest of them (${dearest:.2f}): running the "
            f"suite on {close[0].candidate.profile.name}, the cheapest by the estimate, risks less"
        )
    return lines


def measure_cap(measuring: Sequence[CandidateEstimate]) -> float:
    """The --max-cost of the measuring fan-out: its worst case, rounded up to the cent."""
    return math.ceil(sum(w or 0.0 for w in map(worst_case_usd, measuring)) * 100) / 100


# ---- the manifest: what `collect <base>` needs once the fan-out process is gone ---------------------------------


@dataclass(frozen=True)
class Member:
    """One profile's run of a fan-out."""

    requested: str
    profile: str
    retired_on: str | None
    run_id: str
    run_logs: str  # the run's log folder
    suite: str
    planned: int  # container runs planned
    spot: bool
    output: str  # the file the run's own output goes to


@dataclass(frozen=True)
class Manifest:
    """A fan-out as launched: its members and where its report goes. Paths are absolute: `collect` may run from
    another folder."""

    base: str
    members: tuple[Member, ...]
    logs: str
    report_out: str
    study: str | None
    ledger: str | None
    catalogs: tuple[str, ...]

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def load(cls, path: Path) -> Manifest:
        data = json.loads(path.read_text())
        members = tuple(Member(**member) for member in data.pop("members"))
        return cls(**data | {"members": members, "catalogs": tuple(data["catalogs"])})


def manifest_path(ledger: Path, base: str) -> Path:
    return ledger.parent / "fanouts" / f"{base}.json"


def member_of(candidate: Candidate, plan: RunPlan, manifest: Path) -> Member:
    return Member(
        requested=candidate.requested,
        profile=candidate.profile.name,
        retired_on=candidate.retired_on,
        run_id=plan.run_id,
        run_logs=str(plan.run_logs.resolve()),
        suite=plan.suite,
        planned=len(plan.items),
        spot=plan.spot,
        output=str(manifest.with_suffix("").resolve() / f"{candidate.profile.name}.log"),
    )


# ---- launching the candidates ------------------------------------------------------------------------------


@dataclass
class Child:
    member: Member
    process: subprocess.Popen[bytes]
    reader: threading.Thread


def run_all(members: Sequence[Member], argv_of: Callable[[Member], list[str]]) -> tuple[dict[str, int], bool]:
    """Start every member's run at once and wait for each; each child's output is shown line by line, prefixed
    by its profile. SIGINT or SIGTERM here, from the first launch on, is passed on as SIGTERM to every child
    started, whose run then tears itself down. Returns each started run's exit code and whether a signal
    arrived."""
    children: list[Child] = []
    interrupted = threading.Event()

    def forward(signum: int, frame: object) -> None:
        interrupted.set()
        for child in children:
            if child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        width = max(len(m.profile) for m in members)
        for member in members:
            if interrupted.is_set():
                break
            children.append(_start(member, argv_of(member), f"[{member.profile:<{width}}] "))
        if interrupted.is_set():  # a signal during a start: make sure the child just started hears it too
            forward(signal.SIGTERM, None)
        for child in children:
            child.process.wait()
            child.reader.join()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return {child.member.run_id: child.process.returncode for child in children}, interrupted.is_set()


def _start(member: Member, argv: list[str], prefix: str) -> Child:
    path = Path(member.output)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as output:
        # in this process's working folder, so that relative --logs, --ledger and --catalog name the same files;
        # a session and an output file of its own, so this process's death (a signal, a closed pipe) never
        # reaches the child: its signals come only through `forward`
        process = subprocess.Popen(
            [sys.executable, "-m", "orchestrate", "run", *argv],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )
    reader = threading.Thread(target=_follow, args=(path, process, prefix), daemon=True)
    reader.start()
    return Child(member, process, reader)


def _follow(path: Path, process: subprocess.Popen[bytes], prefix: str) -> None:
    """Show the lines the child appends to its output file until it exits, then the rest."""
    with path.open("rb") as stream:  # from its start: the child may have written before this thread began
        pending = b""
        while True:
            running = process.poll() is None
            pending += stream.read()
            *lines, pending = pending.split(b"\n")
            for line in lines:
                _show(prefix + line.decode(errors="replace") + "\n")
            if not running:
                break
            time.sleep(TAIL_INTERVAL_S)
        if pending:
            _show(prefix + pending.decode(errors="replace") + "\n")


def _show(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except (OSError, ValueError):  # nobody reads this process's output: the child's own file keeps it
        pass


# ---- the results, SkyPilot-bench style ---------------------------------------------------------------------


@dataclass(frozen=True)
class CandidateResult:
    candidate: Candidate
    run_id: str
    spot: bool
    exit_code: int
    record: RunRecord | None
    epochs: int
    training_s: float
    extrapolated_s: float | None  # the whole suite, every workload at the suite's epochs
    unextrapolated: int  # planned runs that produced no epoch to extrapolate from

    @property
    def status(self) -> str:
        return self.record.status if self.record else "not started"

    @property
    def duration_s(self) -> float | None:
        if self.record is None or self.record.ended_at is None:
            return None
        return self.record.ended_at - self.record.started_at

    @property
    def spent_usd(self) -> float | None:
        return None if self.record is None else self.record.estimated_cost_usd

    @property
    def seconds_per_epoch(self) -> float | None:
        return self.training_s / self.epochs if self.epochs else None

    @property
    def usd_per_hour(self) -> float | None:
        if self.spent_usd is None:  # not billed: a host of one's own
            return None
        price = self.candidate.profile.hourly_price(self.spot)
        return None if price is None else price.usd_per_hour

    def extrapolated_total(self) -> float | None:
        """The suite's whole run: this run's own overhead (boot, image, data loading) plus its training time
        extrapolated to every workload's suite epochs."""
        if self.extrapolated_s is None or self.duration_s is None:
            return None
        return max(self.duration_s - self.training_s, 0.0) + self.extrapolated_s


def collect_result(
    candidate: Candidate, member: Member, records: Mapping[str, RunRecord], exit_code: int | None
) -> CandidateResult:
    """A member's outcome from its ledger record and its logs. `exit_code` None: the run was not watched to its
    end (`collect <base>`), so it is read from the record's status."""
    run_logs = Path(member.run_logs)
    runs = load_runs(run_logs).runs if run_logs.is_dir() else []
    epochs = sum(run.epochs_completed for run in runs)
    extrapolated = [_extrapolate(run, member.suite) for run in runs]
    known = [s for s in extrapolated if s is not None]
    record = records.get(member.run_id)
    if exit_code is None:
        exit_code = 0 if record is not None and record.status == STATUS_COMPLETE and not record.teardown_failures else 1
    return CandidateResult(
        candidate=candidate,
        run_id=member.run_id,
        spot=member.spot,
        exit_code=exit_code,
        record=record,
        epochs=epochs,
        training_s=sum(run.total_s for run in runs),
        extrapolated_s=sum(known) if known else None,
        unextrapolated=member.planned - len(known),
    )


def _extrapolate(run: Run, suite: str) -> float | None:
    """First epoch plus the suite's remaining epochs at the steady (else the first) epoch's pace."""
    first = run.first_epoch_s
    if first is None:
        return None
    steady = run.steady_median_s or first
    return first + (suite_epochs(suite, run) - 1) * steady


def suite_epochs(suite: str, run: Run) -> int:
    """The epochs `suite` runs the run's workload with: a built-in one's from its SPEC (read, not imported); a
    user's workload's, as its run planned them."""
    if run.workload not in WORKLOADS:
        return run.epochs_planned or run.epochs_completed
    cut_name = get_suite(suite).cut
    spec = planned_spec(run.workload)
    cut = spec.cuts.get(cut_name) if cut_name else None
    return spec.epochs if cut is None else cut.epochs


def results_table(results: Iterable[CandidateResult]) -> list[str]:
    head = (
        f"  {'profile':<24} {'status':<12} {'duration':>9} {'spent $':>8} {'epochs':>6} {'s/epoch':>8} "
        f"{'$/epoch':>9} {'est. total':>11} {'est. $':>8}"
    )
    lines = [head]
    for r in results:
        price = r.usd_per_hour
        per_epoch = r.seconds_per_epoch
        total = r.extrapolated_total()
        est_usd = r.candidate.profile.cost_usd(total, spot=r.spot) if total is not None and price is not None else None
        lines.append(
            f"  {r.candidate.profile.name:<24} {r.status:<12} {_seconds(r.duration_s):>9} {_money(r.spent_usd, 4):>8} "
            f"{r.epochs:>6} {_seconds(per_epoch):>8} "
            f"{_money(price * per_epoch / 3600 if price is not None and per_epoch else None, 5):>9} "
            f"{_minutes(total):>11} {_money(est_usd, 2):>8}"
            + (f"  ({r.unextrapolated} run(s) without an epoch: not extrapolated)" if r.unextrapolated else "")
        )
    return lines


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def _minutes(value: float | None) -> str:
    return "-" if value is None else f"{value / 60:.1f}min"


def _money(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


# ---- one report across the candidates ------------------------------------------------------------------------


def write_summary(path: Path, lines: Sequence[str], candidates: Sequence[Candidate]) -> None:
    """The table and the retired-to-current mapping beside the report, so the report's reader sees which
    machine stood in for which published configuration."""
    mappings = [c.mapping for c in candidates if c.mapping]
    text = ["# Fan-out", "", "```", *lines, "```", ""]
    if mappings:
        text += ["Retired profiles were replaced by the catalog's `replacement`:", ""]
        text += [f"- {m}" for m in mappings] + [""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(text))


def report_commands(
    logs: Path,
    base: str,
    out: Path,
    study: str | None,
    ledger: Path | None,
    candidates: Sequence[Candidate] = (),
) -> list[list[str]]:
    """`python -m report` over the fan-out's runs only (their ids share the base): the HTML report, and the same
    as markdown after the fan-out summary; both name which profile stood in for which (`--replacement`)."""
    common = [sys.executable, "-m", "report", str(logs), "--runs", f"{base}-*"]
    common += [f"--replacement={c.requested}={c.profile.name}" for c in candidates if c.mapping]
    common += ["--study", study] if study else []
    common += ["--ledger", str(ledger)] if ledger is not None else []
    markdown = ["--markdown", str(out / "report.md"), "--preamble", str(out / SUMMARY)]
    return [[*common, "--out", str(out)], [*common, *markdown]]
