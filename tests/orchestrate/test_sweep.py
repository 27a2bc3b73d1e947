"""The sweep's decisions, as a pure function of (instances, ledger, now, owner, live processes)."""

from __future__ import annotations

import os
import socket

from orchestrate.ledger import STATUS_COMPLETE, STATUS_FAILED, STATUS_RUNNING, RunRecord
from orchestrate.provider import Instance
from orchestrate.sweep import local_process_alive, plan_sweep

NOW = 1_800_000_000.0
ME = "me@laptop"


def instance(run_id: str | None, owner: str = ME, expiry: float | None = NOW + 3600) -> Instance:
    tags = {"project": "keras-cloud-bench", "owner": owner}
    if run_id:
        tags["run-id"] = run_id
    if expiry is not None:
        tags["expiry"] = str(int(expiry))
    return Instance(provider="aws", instance_id=f"i-{run_id}", zone="us-east-1a", ssh=None, tags=tags)


def run(run_id: str, status: str, pid: int = 1, owner: str = ME) -> RunRecord:
    return RunRecord(run_id, "aws-g4dn.xlarge", "aws", "p", "quick", owner, pid, NOW - 100, status=status)


def decide(instances, runs, alive=lambda r: True):
    return {d.instance.instance_id: (d.delete, d.reason) for d in plan_sweep(instances, runs, NOW, ME, alive)}


def test_each_rule() -> None:
    runs = {
        "done": run("done", STATUS_COMPLETE),
        "failed": run("failed", STATUS_FAILED),
        "live": run("live", STATUS_RUNNING, pid=10),
        "orphan": run("orphan", STATUS_RUNNING, pid=11),
    }
    instances = [
        instance("old", expiry=NOW - 5),
        instance("theirs", owner="you@ci"),
        instance("theirs-expired", owner="you@ci", expiry=NOW - 1),
        instance("unknown"),
        instance(None),
        instance("done"),
        instance("failed"),
        instance("live"),
        instance("orphan"),
    ]
    decisions = decide(instances, runs, alive=lambda r: r.pid == 10)
    assert decisions == {
        "i-old": (True, "expired 5 s ago"),
        "i-theirs": (False, "launched by you@ci"),
        "i-theirs-expired": (True, "expired 1 s ago"),
        "i-unknown": (True, "run unknown is not in the ledger"),
        "i-None": (True, "run (untagged) is not in the ledger"),
        "i-done": (True, "run done is complete"),
        "i-failed": (True, "run failed is failed"),
        "i-live": (False, "run live is in progress (pid 10)"),
        "i-orphan": (True, "run orphan's orchestrator (pid 11) is gone"),
    }


def test_a_bad_expiry_tag_does_not_count_as_expired() -> None:
    runs = {"live": run("live", STATUS_RUNNING)}
    broken = instance("live")
    broken.tags["expiry"] = "soon"
    assert decide([broken], runs) == {"i-live": (False, "run live is in progress (pid 1)")}


def test_process_liveness_is_only_judged_on_this_host() -> None:
    alive = local_process_alive(socket.gethostname())
    assert alive(run("r", STATUS_RUNNING, pid=os.getpid(), owner=f"me@{socket.gethostname()}"))
    dead_pid = 2**22 + 12345  # above Linux's default pid_max: never a live process
    assert not alive(run("r", STATUS_RUNNING, pid=dead_pid, owner=f"me@{socket.gethostname()}"))
    assert alive(run("r", STATUS_RUNNING, pid=dead_pid, owner="me@another-host"))
