"""The sweep after a crash, against moto's EC2 server and the Compute Engine fake: per-run resources are found
without any instance left, machines it deletes are recorded in the ledger, and `cost` stops showing them running."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import boto3
import pytest

from orchestrate.cli import main, owner_id
from orchestrate.provider import Instance, LaunchRequest
from orchestrate.providers.aws import AWSProvider
from orchestrate.providers.cloud import ensure_run_key, run_key_path
from orchestrate.providers.gce import GCEProvider
from records.ledger import InstanceRecord, Ledger, RunRecord
from tests.clouds.aws_faults import FaultyMotoServer
from tests.clouds.gce_fake import GCEFake
from tests.clouds.test_aws_provider import assert_nothing_left, launch_request
from tests.clouds.test_gce_provider import launch_request as gce_request

DEAD_PID = 2**22 + 12345  # above Linux's default pid_max: never a live process


def dead_run(run_id: str, provider: str, profile: str) -> RunRecord:
    """What the ledger holds after `kill -9` of the orchestrator mid-run."""
    return RunRecord(run_id, profile, provider, profile, "quick", owner_id(), DEAD_PID, time.time() - 600, "running")


def my_launch_request(run_id: str) -> LaunchRequest:
    """A launch by this user, as the sweep's owner rule sees it."""
    request = launch_request(run_id=run_id)
    return replace(request, tags={**request.tags, "owner": owner_id()})


def sweep(ledger: Path, provider: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["sweep", "--provider", provider, "--ledger", str(ledger)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_aws_resources_without_an_instance_are_swept(
    aws: FaultyMotoServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The machine ended itself (or was terminated) and the orchestrator died before `release_run`: the key pair,
    the security group and the local private key are still there, with no instance to lead to them."""
    request = my_launch_request("20250101T000000Z-left")
    provider = AWSProvider()
    instance = provider.launch(request)
    provider.terminate(instance)
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append(dead_run(request.run_id, "aws", "aws-g4dn.xlarge"))
    assert run_key_path(request.run_id).exists()

    code, out = sweep(ledger.path, "aws", capsys)
    assert code == 0, out
    assert f"deleted      aws resources of run {request.run_id}: run {request.run_id}'s orchestrator" in out
    assert_nothing_left("us-east-1")
    assert not run_key_path(request.run_id).exists()
    record = ledger.runs()[request.run_id]
    assert record.status == "failed" and record.recovered_by == "sweep"
    code, out = sweep(ledger.path, "aws", capsys)
    assert out.strip() == "nothing of this project is running"


def launched_then_orphaned(request: LaunchRequest, tmp_path: Path) -> tuple[Instance, Ledger]:
    """A live AWS machine whose orchestrator died 5 minutes after launching it, as the ledger recorded it."""
    instance = AWSProvider().launch(request)
    run = dead_run(request.run_id, "aws", "aws-g4dn.xlarge")
    run.instances.append(InstanceRecord("aws", instance.instance_id, instance.zone, False, time.time() - 300))
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append(run)
    return instance, ledger


def test_aws_instances_the_sweep_deletes_are_billed_in_the_ledger(
    aws: FaultyMotoServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    request = my_launch_request("20250101T000000Z-bill")
    instance, ledger = launched_then_orphaned(request, tmp_path)

    code, out = sweep(ledger.path, "aws", capsys)
    assert code == 0, out
    assert f"deleted      aws {instance.instance_id} in us-east-1a (run {request.run_id})" in out
    assert_nothing_left("us-east-1")
    record = ledger.runs()[request.run_id]
    [billed] = record.instances
    assert billed.terminated_at is not None and billed.billed_seconds is not None and billed.billed_seconds >= 300
    assert record.estimated_cost_usd is not None and record.estimated_cost_usd > 0
    assert record.status == "failed"
    main(["cost", "--ledger", str(ledger.path)])
    assert "running" not in capsys.readouterr().out


def test_gce_local_key_files_of_dead_runs_are_swept(
    gce: GCEFake, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Killed before launch: nothing at Google, only the run's private key here."""
    run_id = "20250101T000000Z-gkey"
    ensure_run_key(run_id)
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append(dead_run(run_id, "gce", "gce-t4"))
    code, out = sweep(ledger.path, "gce", capsys)
    assert code == 0, out
    assert f"deleted      gce resources of run {run_id}" in out
    assert not run_key_path(run_id).exists()
    assert ledger.runs()[run_id].status == "failed"


def test_an_aws_machine_that_ended_itself_is_billed_to_the_time_ec2_recorded(
    aws: FaultyMotoServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The machine ended itself (its max lifetime, a power-off) and its orchestrator is gone: no live instance
    leads the sweep to it, only its key pair. The sweep bills it up to the time in EC2's StateTransitionReason."""
    request = my_launch_request("20250101T000000Z-self")
    instance, ledger = launched_then_orphaned(request, tmp_path)
    before = time.time()
    boto3.client("ec2", region_name="us-east-1").terminate_instances(InstanceIds=[instance.instance_id])  # itself
    after = time.time()

    code, out = sweep(ledger.path, "aws", capsys)
    assert code == 0, out
    assert f"recovered    run {request.run_id}: billed {instance.instance_id} to " in out
    assert "when aws recorded its end" in out
    record = ledger.runs()[request.run_id]
    [billed] = record.instances
    assert billed.terminated_by == "provider" and billed.terminated_at is not None
    assert int(before) - 1 <= billed.terminated_at <= after + 1  # EC2's time, to the second
    assert billed.billed_seconds is not None and 295 <= billed.billed_seconds <= 310
    assert record.estimated_cost_usd is not None and record.status == "failed"
    assert_nothing_left("us-east-1")
    main(["cost", "--ledger", str(ledger.path)])
    assert "(a machine ended itself: billed to its provider's end time)" in capsys.readouterr().out


def test_a_gce_vm_that_powered_off_is_billed_to_its_last_stop(
    gce: GCEFake, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A VM that shut itself down stays, TERMINATED: the sweep deletes it and bills it to its lastStopTimestamp,
    not to the sweep's own time."""
    run_id = "20250101T000000Z-goff"
    request = replace(gce_request(), run_id=run_id, tags={"owner": owner_id(), "expiry": "1900000000"})
    provider = GCEProvider()
    instance = provider.wait_until_running(provider.launch(request), 30)
    run = dead_run(run_id, "gce", "gce-t4")
    run.instances.append(InstanceRecord("gce", instance.instance_id, instance.zone, False, time.time() - 300))
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append(run)
    gce.power_off(instance.zone or "", instance.instance_id)
    stopped = time.time()
    time.sleep(2)  # the sweep comes later: its own time must not be billed

    code, out = sweep(ledger.path, "gce", capsys)
    assert code == 0, out
    assert f"deleted      gce {instance.instance_id} in {instance.zone} (run {run_id})" in out
    [billed] = ledger.runs()[run_id].instances
    assert billed.terminated_by == "provider" and billed.terminated_at is not None
    assert stopped - 1 <= billed.terminated_at <= stopped + 1
    assert gce.live_instances() == [] and not run_key_path(run_id).exists()


def test_a_gce_vm_deleted_by_an_orchestrator_killed_before_it_wrote_so_is_billed_to_the_delete_operation(
    gce: GCEFake, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The orchestrator deleted its VM and died before the ledger learned it: nothing is listed, but the zone's
    finished `delete` operation says when the VM ended, and the sweep bills it to that time."""
    run_id = "20250101T000000Z-gdel"
    request = replace(gce_request(), run_id=run_id, tags={"owner": owner_id(), "expiry": "1900000000"})
    provider = GCEProvider()
    instance = provider.wait_until_running(provider.launch(request), 30)
    launched = time.time() - 300
    provider.terminate(instance)
    deleted = time.time()
    run = dead_run(run_id, "gce", "gce-t4")
    run.instances.append(InstanceRecord("gce", instance.instance_id, instance.zone, False, launched,
                                        expires_at=time.time() + 3600))  # fmt: skip
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append(run)
    time.sleep(1.5)  # the sweep comes later: its own time must not be billed

    code, out = sweep(ledger.path, "gce", capsys)
    assert code == 0, out
    assert f"billed {instance.instance_id} to " in out and "when gce recorded its end" in out
    [billed] = ledger.runs()[run_id].instances
    assert billed.terminated_by == "provider" and billed.terminated_at is not None
    assert deleted - 1 <= billed.terminated_at <= deleted + 1
    assert ledger.runs()[run_id].estimated_cost_usd is not None


def test_a_gce_vm_that_deleted_itself_at_its_expiry_is_billed_to_its_expiry(
    gce: GCEFake, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Compute Engine deletes a VM at its max run duration and keeps no time of it: the sweep bills the VM of a dead
    run up to its expiry, the most it can have run, and says so."""
    run_id = "20250101T000000Z-gexp"
    request = replace(gce_request(), run_id=run_id, tags={"owner": owner_id(), "expiry": "1900000000"})
    provider = GCEProvider()
    instance = provider.wait_until_running(provider.launch(request), 30)
    gce.reach_max_run_duration(instance.zone or "", instance.instance_id)
    while gce.all_instances():  # STOPPING for a moment, then gone
        time.sleep(0.05)
    run = dead_run(run_id, "gce", "gce-t4")
    launched = time.time() - 600
    record = InstanceRecord("gce", instance.instance_id, instance.zone, False, launched, expires_at=launched + 540)
    run.instances.append(record)
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append(run)

    code, out = sweep(ledger.path, "gce", capsys)
    assert code == 0, out
    assert f"billed {instance.instance_id} to its expiry, " in out and "an upper bound: gce kept no end time" in out
    [billed] = ledger.runs()[run_id].instances
    assert (billed.terminated_by, billed.terminated_at, billed.billed_seconds) == ("expiry", launched + 540, 540)
    assert ledger.runs()[run_id].estimated_cost_usd is not None
    main(["cost", "--ledger", str(ledger.path)])
    assert "(a machine ended itself: billed to its expiry, an upper bound)" in capsys.readouterr().out
