"""From one profile's run options to a validated `RunPlan`, and the plan as printed before anything starts: the
steps an attached run, a detached run and every run of a fan-out share."""

from __future__ import annotations

import datetime as dt
import statistics
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from benchmarks.cli import new_run_id
from benchmarks.harness.backends import ALL_BACKENDS
from benchmarks.harness.processes import MULTI_PROCESS_BACKENDS
from benchmarks.repeats import planned_rounds
from benchmarks.suites import get_suite
from benchmarks.work import WorkItem
from benchmarks.workload_set import Workloads
from estimator.owned import Owned, OwnedDataError, load_owned
from estimator.owning import Rented, owning_lines
from estimator.suite import suite_lines
from orchestrate.capabilities import BatchQueue, offered, offering
from orchestrate.cli.common import UsageError, check_name, credentials, key_value, owner_id, row
from orchestrate.cli.request import MAX_LIFETIME_MIN, MAX_REPEATS, RunOptions
from orchestrate.data_dir import CONTAINER_DIR as DATA_IN_CONTAINER
from orchestrate.data_dir import read_data_dir
from orchestrate.fanout import estimate_plan, estimate_shape
from orchestrate.images import default_build_spec, default_image_ref
from orchestrate.plan import RunPlan
from orchestrate.provider import Capability, Provider, ProviderError
from orchestrate.providers.ssh import SSHProvider
from orchestrate.registry import load_provider_class
from orchestrate.remote import SSHHost
from orchestrate.runspec import check_runner_options, runner_options
from orchestrate.workload_files import check_workload_files, measure_step_costs, run_workloads, suite_workloads
from records.catalog import Profile, load_catalogs, retired_notice, runs_as
from records.ledger import STATUS_COMPLETE, Ledger

STALE_PRICE_DAYS = 365
# `--remote-dir`: `~`, `~/path` or `/path` of plain characters; it reaches a remote shell and `docker -v`.
REMOTE_DIR_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+@")
SSH_FLAGS = {"host": "host", "port": "port", "identity_file": "identity"}  # provider setting -> run option


def profile_to_run(name: str, options: RunOptions) -> Profile:
    """The profile, or its replacement when retired (as in a fan-out), said before anything is checked or launched."""
    catalog = load_catalogs(options.catalog)
    profile = runs_as(catalog, name, options.allow_retired)
    if profile.name != name:
        print(retired_notice(catalog[name]))
    return profile


def make_provider(profile: Profile, options: RunOptions) -> Provider:
    settings = dict(key_value(text) for text in options.provider_setting)
    cls = load_provider_class(profile.provider)
    for key, option in SSH_FLAGS.items():
        value = getattr(options, option)
        if value is not None:
            if key not in cls.settings:  # ssh's settings, and those of any provider that declares them
                raise UsageError(
                    f"--{key.split('_')[0]} applies to providers with a {key} setting, like ssh; "
                    f"{profile.name} is {profile.provider}"
                )
            settings[key] = value
    if options.ssh_config is not None and not options.ssh_config.is_file():
        raise UsageError(f"--ssh-config {options.ssh_config}: no such file")
    if options.ssh_config is not None and "ssh_config" in cls.settings:  # a provider that logs in itself (slurm)
        settings.setdefault("ssh_config", str(options.ssh_config))
    provider = cls.from_settings(settings)
    provider.validate_profile(profile)
    return provider


def priced_per_task(profile: Profile, provider: Provider, nodes: int = 1) -> Profile:
    """A batch provider's profile priced per task allocation (a GPU-hour price x the task's GPUs x its nodes), so
    that the plan, the estimate and the bill all price one task as one machine."""
    return provider.allocation_price(profile, nodes) if isinstance(provider, BatchQueue) else profile


def make_plan(options: RunOptions, profile: Profile, provider: Provider, workloads: Workloads) -> RunPlan:
    """`workloads`: the run's (orchestrate.workload_files.run_workloads), checked by `check_workloads` once its
    plans are made."""
    suite = get_suite(options.suite)
    backends = suite.subset("backend", options.backends)
    planned = suite_workloads(suite, options.workloads, workloads)
    spot = profile.use_spot if options.spot is None else options.spot
    if spot and not provider.has(Capability.BILLABLE):
        raise UsageError(f"--spot applies to rented machines; {profile.name} is a {profile.provider} host")
    if spot and not offered(provider, Capability.SPOT):
        raise UsageError(
            f"--spot: provider {profile.provider} offers no spot machines (offered by {offering(Capability.SPOT)})"
        )
    platform = options.platform or profile.name
    check_name("--platform", platform)
    check_name("--run-id", options.run_id)
    _check_limits(options)
    nodes, per_node = _nodes(options, profile, provider, backends)
    runner = runner_options(options)
    check_runner_options(runner, profile, backends, exact=provider.has(Capability.BILLABLE), nodes=nodes)
    if nodes > 1:  # each process trains on one device, and the runner counts the job's processes
        runner = {**runner, "gpus": str(nodes * per_node)}
    data = read_data_dir(options.data_dir) if options.data_dir is not None else None
    owned_machines(options.owned)  # checked before anything starts; read again where the estimate is printed
    image = options.image or default_image_ref(profile.docker_image)
    return RunPlan(
        run_id=options.run_id or new_run_id(),
        profile=priced_per_task(profile, provider, nodes),
        platform=platform,
        suite=suite.name,
        # round robin: repeat 1 of every item, then repeat 2..., so a slow drift does not favour one item
        items=planned_rounds([WorkItem(w, b) for b in backends for w in planned], options.repeats),
        spot=spot,
        image_ref=image,
        image_source=options.image_source,
        build=default_build_spec(profile.docker_image, image),
        logs_dir=options.logs,
        owner=owner_id(),
        remote_dir=options.remote_dir,
        runner=runner,
        nodes=nodes,
        processes_per_node=per_node,
        repeats=options.repeats,
        ssh_config=options.ssh_config,
        ssh_timeout_s=options.ssh_timeout,
        boot_timeout_s=options.boot_timeout,
        max_lifetime_s=options.max_lifetime * 60,
        max_preemptions=options.max_preemptions,
        install_host_software=options.install_host_software,
        workloads=workloads,
        data_dir=data,
    )


def check_workloads(plan: RunPlan) -> None:
    """The user's workload files trained one step here on the CPU, once a run's every other input is known good
    (the slowest check last), each said in one line; nothing to do without one."""
    backends = list(dict.fromkeys(item.backend for item in plan.items))
    for line in check_workload_files(plan.workloads, backends):
        row("workload", line)


def _check_limits(options: RunOptions) -> None:
    """Flags whose bad values would otherwise surface only once a machine runs."""
    if options.max_lifetime > MAX_LIFETIME_MIN:
        raise UsageError(f"--max-lifetime {options.max_lifetime}: at most {MAX_LIFETIME_MIN} minutes (a week)")
    if options.repeats > MAX_REPEATS:
        raise UsageError(f"--repeats {options.repeats}: at most {MAX_REPEATS}")
    remote = options.remote_dir
    if not (remote == "~" or remote.startswith(("~/", "/"))) or not set(remote[1:]) <= REMOTE_DIR_CHARS:
        raise UsageError(f"--remote-dir {remote!r}: use ~, ~/path or /path of letters, digits and / . _ - + @ only")
    if ".." in remote.split("/"):
        raise UsageError(f"--remote-dir {remote!r}: '..' is not allowed")


def _nodes(options: RunOptions, profile: Profile, provider: Provider, backends: Sequence[str]) -> tuple[int, int]:
    """`--nodes` and the processes per node (one per GPU: `--gpus`, else the profile's; one per node on CPUs),
    checked against what needs no cluster: a batch scheduler's profile, backends that train across processes. The
    cluster's own limits are asked by `readiness`."""
    if options.nodes is None:
        return 1, 1
    if not offered(provider, Capability.BATCH):
        raise UsageError(
            f"--nodes applies to batch schedulers ({offering(Capability.BATCH)}); {profile.name} is {profile.provider}"
        )
    if options.nodes == 1:
        return 1, 1
    single = [backend for backend in backends if backend not in MULTI_PROCESS_BACKENDS]
    if single:
        raise UsageError(
            f"--nodes {options.nodes}: backend {', '.join(single)} cannot train across processes; "
            f"choose --backends {','.join(sorted(MULTI_PROCESS_BACKENDS))}"
        )
    if not profile.has_gpu:
        return options.nodes, 1
    gpus = options.gpus
    return options.nodes, profile.accelerator_count if gpus is None or gpus == "all" else int(gpus)


def readiness(plan: RunPlan, provider: Provider) -> str:
    """ "ok", or why a real run would not start (a dry run shows it): the credentials, and for a host the user
    names, that its name resolves: a typo fails here, not after the SSH wait (`--ssh-timeout`)."""
    status = credentials(provider)
    if status == "ok" and isinstance(provider, SSHProvider):
        return SSHHost(provider.target, ssh_config=plan.ssh_config).unresolvable() or "ok"
    if status == "ok" and isinstance(provider, BatchQueue):
        try:
            provider.check_nodes(plan.profile, plan.nodes)
        except ProviderError as exc:
            return str(exc)
    return status


def refuse_existing_run(plan: RunPlan, ledger: Ledger) -> None:
    """A run id names one run: reusing it would overwrite (and then delete) the results already under it."""
    if plan.run_id in ledger.runs():
        raise UsageError(f"--run-id {plan.run_id}: a run of that id is in the ledger {ledger.path}; choose another")
    if plan.run_logs.exists():
        raise UsageError(f"--run-id {plan.run_id}: {plan.run_logs} already exists; choose another")


def with_validation_time(plan: RunPlan, started: float) -> RunPlan:
    return replace(plan, validated_at=(started, time.time()))


def checked_plan(options: RunOptions, profile: Profile, provider: Provider, started: float) -> tuple[RunPlan, str]:
    """An attached run's or a batch job's plan after every check made before anything starts, printed, and the
    readiness of its credentials ("ok", or why not)."""
    plan = make_plan(options, profile, provider, run_workloads(options.workload_file))
    refuse_existing_run(plan, Ledger(options.ledger))
    check_workloads(plan)
    status = readiness(plan, provider)
    plan = with_validation_time(plan, started)
    print_plan(plan, provider, status, Ledger(options.ledger), dry_run=options.dry_run)
    return plan, status


def print_plan(plan: RunPlan, provider: Provider, credentials: str, ledger: Ledger, dry_run: bool) -> None:
    profile = plan.profile
    head = "Plan (dry run: nothing is launched)" if dry_run else "Plan"
    print(f"{head} for run {plan.run_id}")
    where = profile.description or profile.name
    if provider.has(Capability.FRESH_HOST):
        zones = ", ".join(profile.zones) or "provider default"
        row("machine", f"{profile.name}: {where}")
        row("", f"{profile.provider} {profile.machine_type}, zones {zones} ({provider.describe()})")
    else:
        row("machine", f"{profile.name}: {provider.describe()}")
    gpus = "--gpus all, " if profile.has_gpu else ""
    row("image", f"{plan.image_ref} ({gpus}source: {plan.image_source})")
    backends = sorted({i.backend for i in plan.items}, key=ALL_BACKENDS.index)
    workloads = list(dict.fromkeys(i.workload for i in plan.items))
    repeats = f" x {plan.repeats} repeats" if plan.repeats > 1 else ""
    row(
        "suite",
        f"{plan.suite}: {len(workloads)} workloads x {len(backends)} backends{repeats} = {len(plan.items)} runs",
    )
    width = max(len(w) for w in workloads)
    print(f"    {'workload':<{width}}  {'  '.join(backends)}")
    for workload in workloads:
        cells = "  ".join(f"{'x':<{len(b)}}" for b in backends)
        print(f"    {workload:<{width}}  {cells}")
    if plan.nodes > 1:
        each = "GPU" if profile.has_gpu else "node"
        row(
            "nodes",
            f"{plan.nodes} nodes x {plan.processes_per_node} process(es) per run (one per {each}); before the clock: "
            "the image on every node, an all-reduce check across the processes",
        )
    if plan.data_dir is not None:  # carried at the prepare stage (the estimate: with the image's transfer)
        row("data", f"{plan.data_dir.describe()}, read-only at {DATA_IN_CONTAINER} in every container")
    if plan.spec.payload is not None:
        row("payload", plan.spec.payload.describe())
    row("logs", str(plan.run_logs))
    row("spec", f"sha256 {plan.spec.sha256[:12]} ({len(plan.spec.items)} items)")
    runner = plan.spec.items[0].argv
    shown = ("--epochs", "--train-limit", "--val-limit", "--gpus", "--batch-policy")
    flags = [f"{flag} {runner[i + 1]}" for i, flag in enumerate(runner) if flag in shown]
    extra = f"; runner {' '.join(flags)}" if flags else ""
    row("limits", f"SSH wait {plan.ssh_timeout_s:g} s; max lifetime {plan.max_lifetime_s // 60} min{extra}")
    if provider.has(Capability.BILLABLE):
        _print_cost(plan, ledger)
    row("credentials", credentials)


def step_costs_for(plan: RunPlan) -> None:
    """The workload files' step costs, for the estimate's physics basis (measured once per file content)."""
    data = plan.data_dir.path if plan.data_dir else None
    for line in measure_step_costs(plan.workloads.files, plan.logs_dir, data):
        row("step costs", line)


def print_estimate(plan: RunPlan, owned: Path | None = None) -> None:
    """A dry run's time and cost estimate: one for attached and detached runs alike (and, per run, schedules); then
    own or rent for the same runs (the buyable catalog's machines and the `--owned` ones)."""
    step_costs_for(plan)
    estimate = estimate_plan(plan)
    print("\n".join(suite_lines(estimate, plan.profile, plan.spot, plan.max_lifetime_s)))
    price = plan.profile.hourly_price(plan.spot)
    if price is not None and not estimate.unestimated:
        items = [(i.workload, i.backend) for i in plan.items]
        rented = [Rented(plan.profile, price.usd_per_hour, estimate.runs)]
        shape = estimate_shape(plan.runner, plan.profile)
        owning = owning_lines(rented, plan.suite, items, plan.logs_dir, shape, owned_machines(owned), plan.workloads)
        print("\n".join(owning))


def owned_machines(path: Path | None) -> dict[str, Owned]:
    """The machines of `--owned FILE.toml`, or a one-line usage error naming the file and the field."""
    if path is None:
        return {}
    try:
        return load_owned(path)
    except OwnedDataError as error:
        raise UsageError(f"--owned {error}") from None


def _print_cost(plan: RunPlan, ledger: Ledger) -> None:
    profile = plan.profile
    price = profile.hourly_price(plan.spot)
    market = "spot/preemptible" if plan.spot else "on-demand"
    if price is None:
        row("cost", f"unknown: the catalog has no {market} price for {profile.name}")
        return
    age_days = (dt.date.today() - dt.date.fromisoformat(price.date)).days
    stale = f" -- {age_days // 365} years old, check current prices" if age_days > STALE_PRICE_DAYS else ""
    row("price", f"${price.usd_per_hour:.4f}/h {market} (as of {price.date}{stale})")
    row("", f"source: {price.source}")
    billing = f"billed per {profile.billing_increment_s} s, minimum {profile.billing_minimum_s} s"
    cap = profile.cost_usd(plan.max_lifetime_s, spot=plan.spot) or 0.0
    history = [
        r.billed_seconds
        for r in ledger.runs().values()
        if r.profile == profile.name and r.suite == plan.suite and r.status == STATUS_COMPLETE and r.billed_seconds
    ]
    if history:
        typical = statistics.median(history)
        estimate = profile.cost_usd(typical, spot=plan.spot) or 0.0
        row("cost", f"about ${estimate:.2f}: median of {len(history)} earlier complete {plan.suite} runs")
        row("", f"({typical / 60:.0f} min); at most ${cap:.2f} at the max lifetime; {billing}")
    else:
        row("cost", f"at most ${cap:.2f} (the max lifetime at this price); {billing}")
        row("", f"no earlier complete {plan.suite} run on {profile.name} in the ledger to estimate from")
