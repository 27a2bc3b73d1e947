"""`run --profiles a,b,...`: a fan-out (orchestrate.fanout). Every input of every profile is checked, and the
combined estimate held against `--max-cost`, before the first machine is launched; each profile's run is a child
`run` whose command line is its child request's."""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from benchmarks.cli import new_run_id
from benchmarks.repeats import planned_rounds
from benchmarks.work import WorkItem
from estimator.owned import Owned
from estimator.owning import Rented, owning_lines
from estimator.published import load_studies
from orchestrate.cli.common import UsageError, check_name, key_value
from orchestrate.cli.planning import (
    SSH_FLAGS,
    check_workloads,
    make_plan,
    make_provider,
    owned_machines,
    readiness,
    refuse_existing_run,
    step_costs_for,
)
from orchestrate.cli.request import AttachedRun, DetachedRun, Fanout, RunOptions
from orchestrate.cli.run_detached import check_detachable
from orchestrate.fanout import (
    MEASURE_REPEATS,
    MEASURE_SUITE,
    SUMMARY,
    Candidate,
    CandidateEstimate,
    CandidateResult,
    Manifest,
    Member,
    candidates_of,
    close_call,
    close_call_lines,
    collect_result,
    estimate_candidate,
    estimate_shape,
    estimate_table,
    fanout_run_id,
    manifest_path,
    measure_cap,
    member_of,
    report_commands,
    resolve_candidates,
    results_table,
    run_all,
    unpriced,
    worst_case_usd,
    write_summary,
)
from orchestrate.plan import RunPlan
from orchestrate.provider import Capability
from orchestrate.registry import load_provider_class
from orchestrate.workload_files import run_workloads
from records.catalog import load_catalogs
from records.ledger import Ledger, RunRecord


@dataclass(frozen=True)
class Planned:
    """One profile's run as checked before the launch."""

    plan: RunPlan
    billable: bool
    credentials: str


def run(request: Fanout) -> int:
    options = request.options
    base = options.run_id or new_run_id()
    check_name("--run-id", base)
    names = _expand_study(request.profiles, options.suite)
    candidates = resolve_candidates(load_catalogs(options.catalog), names, options.allow_retired)
    _check_settings_apply(request, candidates)
    ledger = Ledger(options.ledger)
    children = {fanout_run_id(base, c.profile.name): child_request(request, c, base) for c in candidates}
    plans: dict[str, Planned] = {}
    workloads = run_workloads(options.workload_file)
    for candidate in candidates:
        child = children[fanout_run_id(base, candidate.profile.name)]
        provider = make_provider(candidate.profile, child.options)
        plan = make_plan(child.options, candidate.profile, provider, workloads)
        refuse_existing_run(plan, ledger)
        if request.detach is not None:
            check_detachable(candidate.profile, provider, request.detach.bucket)
        plans[candidate.profile.name] = Planned(plan, provider.has(Capability.BILLABLE), readiness(plan, provider))
    check_workloads(next(iter(plans.values())).plan)  # once: every profile's run carries the same files
    step_costs_for(plans[candidates[0].profile.name].plan)  # the same files on every profile
    estimates = [estimate_candidate(c, plans[c.profile.name].plan, plans[c.profile.name].billable) for c in candidates]
    _print_fanout_plan(base, candidates, plans, estimates, options.dry_run)
    if options.dry_run:
        _print_close_call(request, plans, estimates)
        _print_owning(plans[candidates[0].profile.name].plan, estimates, owned_machines(options.owned))
    missing = unpriced(estimates)
    if request.max_cost is not None and missing is not None:
        unknown = f"the catalog has {missing}, so the fan-out's cost is unknown"
        raise UsageError(f"--max-cost {request.max_cost:g}: {unknown}; {_price_remedy(estimates)}; nothing launched")
    worst = sum(w or 0.0 for w in map(worst_case_usd, estimates))
    if request.max_cost is not None and worst > request.max_cost:
        raise UsageError(f"--max-cost {request.max_cost:g}: the fan-out may cost up to ${worst:.2f}; nothing launched")
    if options.dry_run:
        return 0
    for name, planned in plans.items():
        if planned.credentials != "ok":
            raise UsageError(f"{name}: {planned.credentials}; nothing launched")
    manifest = _fanout_manifest(request, base, candidates, plans, manifest_path(ledger.path, base))
    manifest.save(manifest_path(ledger.path, base))
    codes, interrupted = run_all(manifest.members, lambda m: children[m.run_id].argv())
    records = Ledger(options.ledger).runs()
    if request.detach is not None:
        return _print_detached_fanout(request, base, candidates, codes, records, interrupted)
    by_run = {fanout_run_id(base, c.profile.name): c for c in candidates}
    members = [m for m in manifest.members if m.run_id in codes]
    status = _fanout_results(manifest, [by_run[m.run_id] for m in members], members, records, codes)
    return 130 if interrupted else status


def child_request(request: Fanout, candidate: Candidate, base: str) -> AttachedRun | DetachedRun:
    """One profile's run: its own run id, and only the settings its provider has."""
    settings = load_provider_class(candidate.profile.provider).settings
    options = replace(
        request.options,
        run_id=fanout_run_id(base, candidate.profile.name),
        provider_setting=tuple(t for t in request.options.provider_setting if key_value(t)[0] in settings),
        allow_retired=candidate.profile.retired,
        plain=True,  # the child's output goes to a file, line by line
        host=request.options.host if "host" in settings else None,
        port=request.options.port if "port" in settings else None,
        identity=request.options.identity if "identity_file" in settings else None,
    )
    return request.child(candidate.profile.name, options)


def collect_fanout(base: str, ledger: Ledger) -> int:
    """`collect <base>`: the table and report of a fan-out whose own process did not see its runs end."""
    manifest = Manifest.load(manifest_path(ledger.path, base))
    records = ledger.runs()
    live = [m.run_id for m in manifest.members if m.run_id in records and not records[m.run_id].final]
    if live:
        print(f"Fan-out {base}: not ended yet: {', '.join(live)}; collect again once they have (`collect RUN_ID` "
              "finalises a detached run, `sweep` a run whose orchestrator died)")  # fmt: skip
        return 1
    started = [m for m in manifest.members if m.run_id in records]
    candidates = candidates_of(load_catalogs([Path(c) for c in manifest.catalogs]), started)
    return _fanout_results(manifest, candidates, started, records, {})


def _fanout_manifest(
    request: Fanout, base: str, candidates: Sequence[Candidate], plans: Mapping[str, Planned], path: Path
) -> Manifest:
    """What `collect <base>` needs to make the fan-out's table and report if this process does not live to."""
    options = request.options
    ledger = options.ledger.resolve() if options.ledger is not None else None
    return Manifest(
        base=base,
        members=tuple(member_of(c, plans[c.profile.name].plan, path) for c in candidates),
        logs=str(options.logs.resolve()),
        report_out=str((request.report_out or Path("report-out") / base).resolve()),
        study=options.suite if options.suite in load_studies() else None,
        ledger=str(ledger) if ledger is not None else None,
        catalogs=tuple(str(path.resolve()) for path in options.catalog),
    )


def _fanout_results(
    manifest: Manifest,
    candidates: Sequence[Candidate],
    members: Sequence[Member],
    records: Mapping[str, RunRecord],
    codes: Mapping[str, int],
) -> int:
    """The table across the members' runs, then one report over them; 0 when every run and the report did."""
    results = [collect_result(c, m, records, codes.get(m.run_id)) for c, m in zip(candidates, members, strict=True)]
    lines = results_table(results)
    print(f"\nFan-out {manifest.base}: {len(results)} profiles\n" + "\n".join(lines))
    report_status = _fanout_report(manifest, candidates, lines, results)
    return 0 if all(r.exit_code == 0 for r in results) and report_status == 0 else 1


def _print_detached_fanout(
    request: Fanout,
    base: str,
    candidates: Sequence[Candidate],
    codes: Mapping[str, int],
    records: Mapping[str, RunRecord],
    interrupted: bool,
) -> int:
    """Each profile's run works on alone: where it is, and the commands that follow it and make the report."""
    options = request.options
    print(f"\nFan-out {base}: {len(codes)} profiles, detached")
    launched = []
    by_run = {fanout_run_id(base, c.profile.name): c for c in candidates}
    for run_id in codes:
        record = records.get(run_id)
        status = record.status if record is not None else "not started"
        note = (
            f"{record.storage}runs/{run_id}/" if status == "detached" and record else (record.message if record else "")
        )
        print(f"  {by_run[run_id].profile.name:<24} {run_id:<40} {status:<10} {note}")
        if status == "detached":
            launched.append(run_id)
    if launched:
        out = request.report_out or Path("report-out") / base
        study = options.suite if options.suite in load_studies() else None
        print("\nFollow and collect each (collect again until it says complete), then the report across them:")
        ledger = ["--ledger", str(options.ledger)] if options.ledger is not None else []
        for run_id in launched:
            print("  " + shlex.join([sys.executable, "-m", "orchestrate", "collect", run_id, *ledger]))
        report = report_commands(options.logs, base, out, study, options.ledger, candidates)[0]
        print("  " + shlex.join(report))
    if interrupted:
        return 130
    return 0 if len(launched) == len(codes) else 1


def _print_close_call(request: Fanout, plans: Mapping[str, Planned], estimates: Sequence[CandidateEstimate]) -> None:
    """Where the estimate cannot choose, the fan-out that measures the model on the close candidates, its cost."""
    close = close_call(estimates)
    if not close:
        return
    measuring = []
    for e in close:
        planned = plans[e.candidate.profile.name]
        once = list(dict.fromkeys(WorkItem(i.workload, i.backend) for i in planned.plan.items))
        runner = {k: v for k, v in planned.plan.runner.items() if k not in ("epochs", "train_limit", "val_limit")}
        plan = replace(planned.plan, suite=MEASURE_SUITE, items=tuple(planned_rounds(once, MEASURE_REPEATS)),
                       runner=runner, repeats=MEASURE_REPEATS)  # fmt: skip
        measuring.append(estimate_candidate(e.candidate, plan, planned.billable))
    options = _measuring_options(request.options, plans[close[0].candidate.profile.name].plan, close)
    profiles = ",".join(e.candidate.profile.name for e in close)
    cap = f"{measure_cap(measuring):.2f}"
    command = shlex.join(["python", "-m", "orchestrate", "run", "--profiles", profiles,
                          *options.argv(changed_only=True), "--max-cost", cap])  # fmt: skip
    print("\n".join(close_call_lines(close, measuring, command)))


def _measuring_options(given: RunOptions, plan: RunPlan, close: Sequence[CandidateEstimate]) -> RunOptions:
    """The fan-out's options for measuring the same runs on the close profiles: short slices, repeats, and only the
    settings their providers take."""
    accepted = {key for e in close for key in load_provider_class(e.candidate.profile.provider).settings}
    files = {f.name for f in plan.workloads.files}
    built_in = ",".join(dict.fromkeys(i.workload for i in plan.items if i.workload not in files))
    return replace(
        given,
        suite=MEASURE_SUITE,
        repeats=MEASURE_REPEATS,
        dry_run=False,
        run_id=None,
        epochs=None,
        train_limit=None,
        val_limit=None,
        workloads=built_in or None,
        backends=",".join(dict.fromkeys(i.backend for i in plan.items)),
        provider_setting=tuple(t for t in given.provider_setting if key_value(t)[0] in accepted),
        host=given.host if "host" in accepted else None,
        port=given.port if "port" in accepted else None,
        identity=given.identity if "identity_file" in accepted else None,
    )


def _print_owning(plan: RunPlan, estimates: Sequence[CandidateEstimate], owned: Mapping[str, Owned]) -> None:
    """Own or rent for the fan-out's runs: each machine to own against each priced profile whose runs were all
    estimated (the same runs on every profile)."""
    rented = [
        Rented(e.candidate.profile, price.usd_per_hour, e.runs_s)
        for e in sorted(estimates, key=lambda e: e.rank)
        if e.cost is not None and not e.unestimated and (price := e.candidate.profile.hourly_price(plan.spot))
    ]
    items = [(i.workload, i.backend) for i in plan.items]
    shape = estimate_shape(plan.runner, plan.profile)
    print("\n".join(owning_lines(rented, plan.suite, items, plan.logs_dir, shape, owned, plan.workloads)))


def _price_remedy(estimates: Sequence[CandidateEstimate]) -> str:
    """How to supply a missing price: a profile of one's own with a dated price (a catalog adds profiles, it never
    changes one), or the on-demand market where only the spot price is missing."""
    remedy = "add the profile under a new name with a dated price to a catalog of your own (docs/estimate.md)"
    on_demand_known = [e for e in estimates if e.missing_price == "spot" and e.candidate.profile.on_demand is not None]
    return remedy + (" or drop --spot" if on_demand_known else "")


def _check_settings_apply(request: Fanout, candidates: Sequence[Candidate]) -> None:
    """In a fan-out a setting goes to the profiles whose provider has it, so one that none has is a typo."""
    options = request.options
    accepted = {key for c in candidates for key in load_provider_class(c.profile.provider).settings}
    given = [key for key, option in SSH_FLAGS.items() if getattr(options, option) is not None]
    given += [key_value(text)[0] for text in options.provider_setting]
    for key in given:
        if key not in accepted:
            names = ", ".join(c.profile.name for c in candidates)
            raise UsageError(f"setting {key!r} applies to none of the profiles {names}")


def _print_fanout_plan(
    base: str,
    candidates: Sequence[Candidate],
    plans: Mapping[str, Planned],
    estimates: Sequence[CandidateEstimate],
    dry_run: bool,
) -> None:
    first = plans[candidates[0].profile.name].plan
    head = "Fan-out (dry run: nothing is launched)" if dry_run else "Fan-out"
    print(f"{head} of suite {first.suite} on {len(candidates)} profiles, run ids {base}-<profile>")
    width = max(len(c.profile.name) for c in candidates)
    for candidate in candidates:
        plan, credentials = plans[candidate.profile.name].plan, plans[candidate.profile.name].credentials
        mapping = f"; stands in for {candidate.mapping}" if candidate.mapping else ""
        print(f"  {candidate.profile.name:<{width}}  {len(plan.items)} runs, image {plan.image_ref}{mapping}")
        if credentials != "ok":
            print(f"  {'':<{width}}  credentials: {credentials}")
    print("\n".join(estimate_table(estimates)))


def _fanout_report(
    manifest: Manifest, candidates: Sequence[Candidate], lines: Sequence[str], results: Sequence[CandidateResult]
) -> int:
    """One report across every profile's runs, plus the table and the retired-profile mapping beside it."""
    out = Path(manifest.report_out)
    write_summary(out / SUMMARY, lines, candidates)
    if not any(r.epochs for r in results):
        print(f"no epoch was logged by any profile: no report (summary in {out / SUMMARY})")
        return 1
    ledger = Path(manifest.ledger) if manifest.ledger is not None else None
    commands = report_commands(Path(manifest.logs), manifest.base, out, manifest.study, ledger, candidates)
    return max(subprocess.run(command, check=False).returncode for command in commands)


def _expand_study(text: str, suite: str) -> str:
    """`--profiles study`: one profile per configuration of the study the suite is (the first profile the
    study says reproduces it); retired ones are then mapped like any other."""
    names = [name.strip() for name in text.split(",")]
    if "study" not in names:
        return text
    study = load_studies().get(suite)
    if study is None:
        raise UsageError(
            f"--profiles study: --suite {suite} is not a published study (python -m report --list-studies)"
        )
    matched = [config.matches[0] for config in study.configs if config.matches]
    matched += [profiles[0] for profiles in study.raw.get("matches", {}).values() if profiles]
    expanded = [part for name in names for part in (matched if name == "study" else [name])]
    return ",".join(expanded)
