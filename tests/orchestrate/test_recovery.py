"""Recovery after a crash on hosts that outlive a run (ssh, local), through the real CLI, sshd and Docker engine:
`kill -9` of the orchestrator, then `sweep`; exact run-id matching at teardown; a teardown step that raises; a
slow-stopping container under SIGTERM; a run id that already exists.

Lifecycle MECHANICS only: the containers are the purpose-built mechanics image (tests/support/docker.py), which
writes the runner's file names and sleeps; it benchmarks nothing.
"""

from __future__ import annotations

import io
import json
import signal
import subprocess
from pathlib import Path
from typing import ClassVar

import pytest

from orchestrate.lifecycle import Lifecycle
from orchestrate.plan import WorkItem
from orchestrate.progress import Reporter
from orchestrate.provider import PROJECT_TAG, Capability, Instance
from orchestrate.providers.local import LocalProvider
from orchestrate.testing.sshd import SSHServer
from records.ledger import Ledger, RunRecord
from tests.orchestrate.orchestrate_helpers import (
    Workspace,
    ledger_items,
    orchestrate,
    plan_on_image,
    ssh_run_args,
    start_orchestrate,
    wait_for,
)
from tests.support.docker import build_mechanics_image, containers_of_run, remove_containers_of_run

pytestmark = [pytest.mark.docker, pytest.mark.sshd]


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_mechanics_image(tmp_path_factory.mktemp("mechanics"))


def local_run_args(ws: Workspace, run_id: str, *extra: str) -> list[str]:
    return [
        "run", "--profile", "local", "--logs", str(ws.logs), "--ledger", str(ws.ledger),
        "--remote-dir", str(ws.remote_dir), "--run-id", run_id, "--plain", *extra,
    ]  # fmt: skip


@pytest.mark.parametrize("where", ["ssh", "local"])
def test_sweep_recovers_a_run_whose_orchestrator_was_killed(
    where: str, sshd: SSHServer, image: str, tmp_path: Path
) -> None:
    """kill -9 mid-run: the container goes on, the ledger says running. The sweep stops the container by its label,
    pulls what it wrote, removes the run's folder and finalises the ledger; the run id cannot be reused."""
    ws = Workspace(tmp_path)
    run_id = f"20260101T000000Z-kill-{where}"
    selection = ("--workloads", "mnist_mlp,cifar10_cnn", "--backends", "torch")
    make_args = (
        (lambda *a: ssh_run_args(sshd, ws, run_id, *a))
        if where == "ssh"
        else (lambda *a: local_run_args(ws, run_id, *a))
    )
    process = start_orchestrate(*make_args(*selection, "--image", image, "--image-source", "present"),
                                output=tmp_path / "out.txt")  # fmt: skip
    try:
        wait_for(lambda: [i["status"] for i in ledger_items(ws.ledger, run_id)] == ["complete", "running"], 120, "2")
        wait_for(lambda: containers_of_run(run_id), 30, "the second container")
        process.kill()
        process.wait(timeout=30)
        assert containers_of_run(run_id)  # orphaned: still running
        assert ws.run_record(run_id).status == "running"

        swept = orchestrate("sweep", "--provider", where, "--ledger", str(ws.ledger), timeout=120)
        assert swept.returncode == 0, swept.stdout + swept.stderr
        assert f"recovered    run {run_id}: stopped 1 container(s)" in swept.stdout
        assert containers_of_run(run_id) == []
    finally:
        if process.poll() is None:
            process.kill()
        remove_containers_of_run(run_id)
    run_logs = ws.run_logs(where, run_id)
    assert (run_logs / "cifar10_cnn_torch.csv").read_text() == "epoch,elapsed\n"  # the in-flight one
    assert json.loads((run_logs / "mnist_mlp_torch.json").read_text())["status"] == "complete"
    record = ws.run_record(run_id)
    assert record.status == "failed" and record.recovered_by == "sweep" and record.ended_at
    assert record.message.startswith(f"orchestrator (pid {process.pid}) gone; recovered by the sweep")
    assert [(i.workload, i.status) for i in record.items] == [
        ("mnist_mlp", "complete"),
        ("cifar10_cnn", "interrupted"),
    ]
    assert not (ws.remote_dir / "runs" / run_id).exists()
    again = orchestrate("sweep", "--provider", where, "--ledger", str(ws.ledger), timeout=120)
    assert again.stdout.strip() == "nothing of this project is running"

    rerun = orchestrate(*make_args(*selection, "--image", image), timeout=120)
    assert rerun.returncode == 2
    assert rerun.stderr.startswith(f"error: --run-id {run_id}: a run of that id is in the ledger")


def test_a_run_id_folder_already_on_the_host_is_refused_not_overwritten(image: str, tmp_path: Path) -> None:
    """Another ledger (another checkout, a lost ledger): the host's folder is the last guard."""
    run_id = "20260101T000000Z-host"
    orphan = tmp_path / "host" / "runs" / run_id / "logs" / "local" / run_id / "mnist_mlp_torch.csv"
    orphan.parent.mkdir(parents=True)
    orphan.write_text("epoch,elapsed\n1,1.0\n")
    plan = plan_on_image(tmp_path, image, run_id, (WorkItem("mnist_mlp", "torch"),))
    outcome = Lifecycle(plan, LocalProvider(), Ledger(tmp_path / "l.jsonl"), Reporter(io.StringIO())).run()
    assert outcome.record.status == "failed"
    assert f"run id {run_id} already has a folder on this machine" in outcome.record.message
    assert orphan.read_text() == "epoch,elapsed\n1,1.0\n"  # kept


def test_teardown_stops_only_the_exact_run_ids_containers(image: str, tmp_path: Path) -> None:
    """Tearing down run `relp` must not stop run `relp-2`'s container, whose name starts with `relp-`."""
    other = "relp-2"
    subprocess.run(
        ["docker", "run", "-d", "--rm", "--name", f"{other}-cifar10_cnn-torch", "--label", f"project={PROJECT_TAG}",
         "--label", f"run-id={other}", image, "cifar10_cnn", "--backend", "torch", "--out", "/tmp"],
        check=True, capture_output=True,
    )  # fmt: skip
    try:
        plan = plan_on_image(tmp_path, image, "relp", (WorkItem("mnist_mlp", "torch"),))
        outcome = Lifecycle(plan, LocalProvider(), Ledger(tmp_path / "l.jsonl"), Reporter(io.StringIO())).run()
        assert outcome.record.status == "complete", outcome.record.message
        assert containers_of_run(other) == [f"{other}-cifar10_cnn-torch"]
        assert not any(other in line for line in outcome.torn_down)
    finally:
        remove_containers_of_run(other)


class BrokenTerminate(LocalProvider):
    """Test double: this machine as a billable one whose `terminate` fails with a bug, not a ProviderError."""

    host_capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.BILLABLE, Capability.PERSISTENT_HOST, Capability.RUNS_LOCALLY}
    )
    released: ClassVar[list[str]] = []

    def terminate(self, instance: Instance) -> None:
        raise KeyError("instance-state")

    def release_run(self, run_id: str) -> None:
        self.released.append(run_id)


def test_an_unexpected_teardown_exception_is_recorded_and_teardown_goes_on(image: str, tmp_path: Path) -> None:
    plan = plan_on_image(tmp_path, image, "20260101T000000Z-term", (WorkItem("mnist_mlp", "torch"),))
    from dataclasses import replace

    from records.catalog import Price

    price = Price(3.6, "2026-01-01", "test double: no real price")
    plan = replace(plan, profile=replace(plan.profile, on_demand=price, billing_minimum_s=60))
    outcome = Lifecycle(plan, BrokenTerminate(), Ledger(tmp_path / "l.jsonl"), Reporter(io.StringIO())).run()
    assert outcome.exit_code == 1
    assert outcome.teardown_failures == [f"could not terminate local:{__import__('socket').gethostname()}: "
                                         "KeyError: 'instance-state'"]  # fmt: skip
    assert BrokenTerminate.released == [plan.run_id]  # the steps after it still ran
    saved = RunRecord.from_json(json.loads((plan.orchestrator_dir / "run.json").read_text()))
    assert saved.teardown_failures == outcome.teardown_failures
    assert Ledger(tmp_path / "l.jsonl").runs()[plan.run_id].teardown_failures == outcome.teardown_failures
    [instance] = saved.instances
    assert instance.terminated_at is None and instance.billed_seconds is None  # not stamped, not billed 60 s
    assert saved.estimated_cost_usd is None


def test_sigterm_with_a_slow_stopping_container_exits_130(image: str, tmp_path: Path) -> None:
    """The local container ignores SIGTERM (docker stop waits its grace period): still an interrupt, exit 130."""
    ws = Workspace(tmp_path)
    run_id = "20260101T000000Z-slow"
    args = local_run_args(ws, run_id, "--workloads", "lstm_text_generation", "--backends", "torch", "--image", image)
    process = start_orchestrate(*args, "--image-source", "present", output=tmp_path / "out.txt")
    try:
        wait_for(lambda: containers_of_run(run_id), 120, "the container")
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
        leftovers = containers_of_run(run_id)
        remove_containers_of_run(run_id)
    out = (tmp_path / "out.txt").read_text()
    assert code == 130, out
    assert "internal error" not in out and f"Run {run_id}: interrupted: interrupted by SIGTERM" in out
    assert leftovers == []
