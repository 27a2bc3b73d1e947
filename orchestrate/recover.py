"""Recover the runs whose orchestrator died (`kill -9`, power loss) on hosts that outlive a run (ssh, local).

Their containers keep running and their results stay on the host; the ledger still says `running`. For each
such run of this user on this machine, found through the ledger, the sweep connects to the host the run recorded,
stops the containers carrying the run's `run-id` label (the runner records a partial run), pulls the run's folder
into the local logs, removes the folder, and finalises the ledger: an item whose metadata says `complete`
finished, the others were interrupted.
"""

from __future__ import annotations

import json
from pathlib import Path

from orchestrate.containers import run_containers, stop_containers
from orchestrate.hostprep import run_dir
from orchestrate.keepsafe import HOST_KEY, fetch_saved
from orchestrate.keepsafe import stop as stop_saving
from orchestrate.plan import WorkItem
from orchestrate.provider import SSHTarget
from orchestrate.remote import Host, LocalHost, RemoteError, SSHHost, wait_for_ssh
from orchestrate.sweep import SweepContext, SweepReport, finalise, why
from records.ledger import STATUS_COMPLETE, RunRecord

CONNECT_TIMEOUT_S = 30.0


def recover_dead_runs(provider: str, runs_locally: bool, context: SweepContext, report: SweepReport) -> None:
    """Recover every dead run of `provider` (a persistent-host provider) this user started on this machine."""
    for run in context.ledger.runs().values():
        if run.provider != provider or run.final or run.owner != context.owner or context.alive(run):
            continue
        if context.dry_run:
            report.recovered.append((run.run_id, "would stop its containers, pull its logs and finalise it"))
            continue
        try:
            done = recover_run(run, runs_locally)
        except (RemoteError, OSError, KeyError, ValueError) as exc:
            report.errors.append(f"could not recover run {run.run_id}: {why(exc)}")
            continue
        report.recovered.append((run.run_id, done))
        finalise(run, context, f"recovered by the sweep: {done}", billable=False)


def recover_run(run: RunRecord, runs_locally: bool, fresh_host: bool = False) -> str:
    """Stop the run's containers, pull its files, remove its folder; update its items. What was done, in words.

    `fresh_host`: a rented machine about to be deleted (its host key was never known: accepted as is)."""
    if not run.host or not run.logs_dir:
        return "it never prepared its host: nothing there"
    host = _host(run, runs_locally, fresh_host)
    try:
        docker, folder = run.host.get("docker"), run_dir(run.host["root"], run.run_id)
        stopped: list[str] = []
        if docker:  # none on a batch cluster's login node: the scheduler stops the tasks' containers (scancel)
            names = [name for name, _ in run_containers(host, docker, run.run_id)]
            stopped, failures = stop_containers(host, docker, names)
            if failures:
                raise RemoteError("; ".join(failures))
        if run.host.get(HOST_KEY):  # the machine's routine would save the logs at its end: they are pulled now
            stop_saving(host, folder)
        copied = host.fetch_tree(f"{folder}/logs", Path(run.logs_dir).parents[1])
        host.run(f"rm -rf {host.quote(folder)}")
    finally:
        host.close()
    _settle_items(run)
    return f"stopped {len(stopped)} container(s), pulled {len(copied)} file(s), removed {folder} on {host.description}"


def recover_saved(run: RunRecord) -> str | None:
    """The logs a rented machine saved before it ended itself (orchestrate.keepsafe) into the run's logs, and its
    items settled from them; what was done, or None when it saved none."""
    done = fetch_saved(run)
    if done is not None:
        _settle_items(run)
    return done


def _host(run: RunRecord, runs_locally: bool, fresh_host: bool) -> Host:
    if runs_locally:
        return LocalHost()
    where = run.host
    port = where.get("port")
    target = SSHTarget(
        host=where["host"], user=where.get("user"), port=int(port) if port else None, key_filename=where.get("key")
    )
    config = where.get("ssh_config")
    host = SSHHost(target, ssh_config=Path(config) if config else None, verify_known_hosts=not fresh_host)
    wait_for_ssh(host, CONNECT_TIMEOUT_S)
    return host


def _settle_items(run: RunRecord) -> None:
    """An item the dead orchestrator saw running finished if the runner's metadata says so."""
    folder = Path(run.logs_dir or "")
    for record in run.items:
        if record.status != "running":
            continue
        item = WorkItem(record.workload, record.backend, record.repeat)
        statuses = [_status(path) for path in sorted(folder.glob("*.json")) if item.owns_log(path.name)]
        record.status = STATUS_COMPLETE if statuses and all(s == STATUS_COMPLETE for s in statuses) else "interrupted"
        record.exit_code = 0 if record.status == STATUS_COMPLETE else None
        record.logs = [str(path) for path in sorted(folder.glob("*")) if item.owns_log(path.name)]


def _status(path: Path) -> str | None:
    try:
        return json.loads(path.read_text()).get("status")
    except (OSError, ValueError, AttributeError):
        return None
