"""Whole orchestrated runs on the fake clouds: `python -m orchestrate run` launches through the provider, SSHes
to the instance (the test sshd, see guests.py), runs the CPU image's containers on the local Docker engine,
pulls the logs and tears down; `python -m orchestrate sweep` cleans up after a killed orchestrator.

Injected along the way: a zone without capacity, throttling, a Spot preemption in the middle of the suite, the
orchestrator killed between launch and its ledger write, missing credentials. After each, nothing runs in the
fake cloud, no key pair or security group is left, and every finished log is on this machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest
import requests

from orchestrate.testing.sshd import SSHServer
from records.ledger import Ledger, RunRecord
from tests.clouds.aws_faults import Fault, FaultyMotoServer, interrupt_spot_instance
from tests.clouds.environments import aws_environment, gce_environment
from tests.clouds.gce_fake import GCEFake
from tests.clouds.guests import GuestKeys, ec2_running_instance_keys, gce_running_instance_keys
from tests.support.datasets import prefill_keras_cache
from tests.support.docker import build_cpu_image, build_mechanics_image, containers_of_run, remove_containers_of_run

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.sshd]

REPO = Path(__file__).resolve().parents[2]
AWS_REGIONS = ("us-east-1", "us-west-2")


def catalog_text(user: str) -> str:
    """The tests' profiles: zones the fake clouds have, an image moto resolves, the sshd's user."""
    prices = 'on_demand = {{ usd_per_hour = {0}, date = "2025-06-01", source = "test catalog" }}\n'
    prices += 'spot = {{ usd_per_hour = {1}, date = "2025-06-01", source = "test catalog" }}\n'
    return f"""\
[profiles.aws-e2e]
provider = "aws"
description = "moto EC2 instance; its SSH address is the test sshd"
machine_type = "c7i.large"
zones = ["us-east-1a", "us-east-1b"]
image = "resolve:ssm:/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-6.1-x86_64"
ssh_user = "{user}"
{prices.format(0.0893, 0.0301)}
[profiles.gce-e2e]
provider = "gce"
description = "Compute Engine fake VM; its SSH address is the test sshd"
machine_type = "n2-highcpu-2"
zones = ["us-central1-a", "us-central1-b"]
image = "projects/debian-cloud/global/images/family/debian-12"
ssh_user = "{user}"
{prices.format(0.0709, 0.0213)}"""


RUN_FLAGS = ["--suite", "quick", "--workloads", "mnist_mlp", "--epochs", "1", "--train-limit", "256"]
RUN_FLAGS += ["--val-limit", "64", "--plain"]


@dataclass
class Bench:
    """One test's orchestrator setup: environment, catalog, ledger, logs, the host folder, the sshd."""

    env: dict[str, str]
    tmp: Path
    server: SSHServer
    image: str

    @property
    def ledger(self) -> Path:
        return self.tmp / "ledger.jsonl"

    @property
    def logs(self) -> Path:
        return self.tmp / "logs"

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "orchestrate", *args]

    def run_args(self, profile: str, run_id: str, *extra: str) -> list[str]:
        return self.command(
            "run", "--profile", profile, "--run-id", run_id, *RUN_FLAGS, *extra,
            "--image", self.image, "--logs", str(self.logs), "--ledger", str(self.ledger),
            "--remote-dir", str(self.tmp / "host"),
            "--provider-setting", f"ssh_address=127.0.0.1:{self.server.port}",
        )  # fmt: skip

    def start(self, args: list[str]) -> subprocess.Popen[str]:
        with (self.tmp / "orchestrator.log").open("a") as output:  # the child keeps its own descriptor
            return subprocess.Popen(
                args, cwd=REPO, env=self.env, stdout=output, stderr=subprocess.STDOUT, text=True,
                start_new_session=True,
            )  # fmt: skip

    def call(self, args: list[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, cwd=REPO, env=self.env, capture_output=True, text=True, timeout=timeout)

    def output(self) -> str:
        path = self.tmp / "orchestrator.log"
        return path.read_text() if path.exists() else ""

    def record(self, run_id: str) -> RunRecord:
        return Ledger(self.ledger).runs()[run_id]


@pytest.fixture(scope="module")
def cpu_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The project's CPU image, built from this checkout (Docker's cache makes it quick after the first)."""
    return build_cpu_image(tmp_path_factory.mktemp("image") / "build.log")


def make_bench(tmp_path: Path, server: SSHServer, image: str, cloud_env: dict[str, str]) -> Bench:
    prefill_keras_cache(tmp_path / "host" / "cache" / "keras")  # the host's dataset cache, as a warm host has
    catalog = tmp_path / "catalog.toml"
    catalog.write_text(catalog_text(server.user))
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(("AWS_", "GOOGLE_", "KCB_", "CLOUDSDK_"))
    }
    env.update(cloud_env)
    # the tests' profiles come as a user's catalog would ($KCB_CATALOG), beside the project's
    env.update(KCB_CATALOG=str(catalog), KCB_LEDGER=str(tmp_path / "ledger.jsonl"), PYTHONUNBUFFERED="1")
    return Bench(env=env, tmp=tmp_path, server=server, image=image)


def wait_for(condition: Callable[[], object], timeout_s: float, what: str, bench: Bench) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; orchestrator output:\n{bench.output()[-4000:]}")


def finish(process: subprocess.Popen[str], bench: Bench, timeout_s: float = 900) -> int:
    try:
        return process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        raise AssertionError(f"the run did not finish in {timeout_s} s:\n{bench.output()[-4000:]}") from None


def run_logs(bench: Bench, profile: str, run_id: str) -> Path:
    return bench.logs / profile / run_id


def item_results(bench: Bench, profile: str, run_id: str) -> dict[str, dict]:
    """The run's result metadata on this machine, by file stem (the preempted/ folder is not results)."""
    folder = run_logs(bench, profile, run_id)
    return {path.stem: json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))}


def preempt_mid_suite(bench: Bench, run_id: str, profile: str, reclaim: Callable[[], None]) -> None:
    """Once the first item's log is pulled and the second item's container runs, the cloud takes the
    machine: it reclaims the instance, the SSH connections die and the machine's container with them."""
    first_done = lambda: list(run_logs(bench, profile, run_id).glob("mnist_mlp_jax*.json"))  # noqa: E731
    wait_for(first_done, 600, "the first item's pulled log", bench)
    second_running = lambda: f"{run_id}-mnist_mlp-torch" in containers_of_run(run_id)  # noqa: E731
    wait_for(second_running, 300, "the second item's container", bench)
    reclaim()
    bench.server.kill()  # the machine is gone: its sshd and every session with it
    remove_containers_of_run(run_id)  # ...and what ran on it
    end_the_routine(bench, run_id)  # ...and the routine that would have saved its logs at its end
    bench.server.restart()  # the sshd comes back as the relaunched instance's


def end_the_routine(bench: Bench, run_id: str) -> None:
    """A machine's keepsafe routine (orchestrate.keepsafe) dies with the machine; here the machine is this one."""
    pid = bench.tmp / "host" / "runs" / run_id / "keepsafe" / "pid"
    if pid.exists():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(pid.read_text()), signal.SIGTERM)


def assert_preempted_run_resumed(bench: Bench, profile: str, run_id: str) -> RunRecord:
    record = bench.record(run_id)
    assert record.status == "complete", bench.output()[-4000:]
    assert record.preemptions == 1
    assert [i.preempted for i in record.instances] == [True, False]
    jax_runs = [(i.status, i.attempt) for i in record.items if i.backend == "jax"]
    torch_runs = [(i.status, i.attempt) for i in record.items if i.backend == "torch"]
    assert jax_runs == [("complete", 1)]  # finished before the preemption: not run again, log kept
    assert torch_runs == [("preempted", 1), ("complete", 2)]
    results = item_results(bench, profile, run_id)
    assert sorted(results) == ["mnist_mlp_jax_synthetic", "mnist_mlp_torch_synthetic"]
    assert all(meta["status"] == "complete" for meta in results.values())  # no partial timing among results
    for meta in results.values():
        assert meta["run_id"] == run_id and meta["platform"] == profile
    return record


# ---- AWS ------------------------------------------------------------------------------------------------------


@pytest.fixture
def aws_bench(aws: FaultyMotoServer, sshd: SSHServer, cpu_image: str, tmp_path: Path) -> Iterator[Bench]:
    bench = make_bench(tmp_path, sshd, cpu_image, aws_environment(aws.url, tmp_path))
    with GuestKeys(sshd, ec2_running_instance_keys(AWS_REGIONS)):
        yield bench


def ec2(region: str = "us-east-1"):
    return boto3.client("ec2", region_name=region)


def ec2_live(region: str = "us-east-1") -> list[dict]:
    described = ec2(region).describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}]
    )
    return [i for r in described["Reservations"] for i in r["Instances"]]


def assert_nothing_left_in_aws(bench: Bench, run_id: str) -> None:
    for region in AWS_REGIONS:
        assert ec2_live(region) == []
        assert ec2(region).describe_key_pairs()["KeyPairs"] == []
        groups = [g["GroupName"] for g in ec2(region).describe_security_groups()["SecurityGroups"]]
        assert groups == ["default"]
    assert not (bench.tmp / "state" / "keys" / run_id).exists()
    assert containers_of_run(run_id) == []


def test_aws_spot_run_fails_over_retries_and_survives_a_preemption(aws_bench: Bench, aws: FaultyMotoServer):
    run_id = "20250101T000000Z-aw51"
    no_capacity = aws.injector.add(
        Fault("RunInstances", "InsufficientInstanceCapacity",
              "We currently do not have sufficient c7i.large capacity in the Availability Zone you requested "
              "(us-east-1a).", times=None, params={"Placement.AvailabilityZone": "us-east-1a"})
    )  # fmt: skip
    throttled = aws.injector.add(Fault("DescribeInstances", "RequestLimitExceeded", "Request limit exceeded.", 3))
    process = aws_bench.start(aws_bench.run_args("aws-e2e", run_id, "--spot", "--backends", "jax,torch"))
    try:
        preempt_mid_suite(
            aws_bench, run_id, "aws-e2e",
            lambda: interrupt_spot_instance("us-east-1", ec2_live()[0]["InstanceId"]),
        )  # fmt: skip
        assert finish(process, aws_bench) == 0, aws_bench.output()[-4000:]
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        remove_containers_of_run(run_id)
    record = assert_preempted_run_resumed(aws_bench, "aws-e2e", run_id)
    assert [i.zone for i in record.instances] == ["us-east-1b", "us-east-1b"]  # us-east-1a had no capacity
    assert all(i.spot for i in record.instances)
    assert no_capacity.hits >= 2 * 5  # both launches tried us-east-1a first; botocore retried each 500
    assert throttled.hits == 3  # throttled, retried by botocore, and the run went on
    assert "no capacity in us-east-1a" in aws_bench.output()
    assert record.estimated_cost_usd is not None and record.estimated_cost_usd > 0
    cost = aws_bench.call(aws_bench.command("cost", "--ledger", str(aws_bench.ledger)))
    assert f"{record.estimated_cost_usd:.4f}" in cost.stdout  # per run, and per profile below it
    assert any(line.startswith("aws-e2e") for line in cost.stdout.splitlines())
    assert_nothing_left_in_aws(aws_bench, run_id)


def test_aws_sweep_finds_the_instance_of_a_killed_orchestrator(aws_bench: Bench, aws: FaultyMotoServer):
    run_id = "20250101T000000Z-aw52"
    process = aws_bench.start(aws_bench.run_args("aws-e2e", run_id, "--backends", "jax"))
    # SIGKILL the orchestrator once EC2 has created the instance and before the answer reaches it: the
    # instance exists, the ledger cannot know its id.
    aws.injector.after["RunInstances"] = lambda: os.killpg(process.pid, signal.SIGKILL)
    assert finish(process, aws_bench, timeout_s=120) == -signal.SIGKILL
    [instance] = ec2_live()
    assert bench_ledger_instances(aws_bench, run_id) == []

    dry = aws_bench.call(aws_bench.command("sweep", "--dry-run", "--provider", "aws"))
    assert dry.returncode == 0, dry.stderr
    assert f"would delete aws {instance['InstanceId']}" in dry.stdout
    assert "orchestrator" in dry.stdout and "is gone" in dry.stdout
    assert len(ec2_live()) == 1  # a dry run deletes nothing

    swept = aws_bench.call(aws_bench.command("sweep", "--provider", "aws"))
    assert swept.returncode == 0, swept.stderr
    assert f"deleted      aws {instance['InstanceId']}" in swept.stdout
    assert_nothing_left_in_aws(aws_bench, run_id)


def test_aws_sweep_pulls_a_killed_on_demand_runs_last_epochs_before_deleting_its_machine(
    aws: FaultyMotoServer, sshd: SSHServer, tmp_path: Path
) -> None:
    """kill -9 mid-workload: the sweep pulls what the running container wrote (since the last periodic pull),
    stops it, deletes the machine and its resources, and finalises the ledger. Mechanics image (it sleeps)."""
    image = build_mechanics_image(tmp_path / "mechanics")
    bench = make_bench(tmp_path, sshd, image, aws_environment(aws.url, tmp_path))
    run_id = "20250101T000000Z-awkl"
    with GuestKeys(sshd, ec2_running_instance_keys(AWS_REGIONS)):
        args = bench.run_args("aws-e2e", run_id, "--backends", "torch", "--image-source", "present")
        process = bench.start([*args, "--workloads", "mnist_mlp,cifar10_cnn"])
        try:
            wait_for(lambda: f"{run_id}-cifar10_cnn-torch" in containers_of_run(run_id), 120, "item 2", bench)
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
            swept = bench.call(bench.command("sweep", "--provider", "aws"))
        finally:
            remove_containers_of_run(run_id)
    assert swept.returncode == 0, swept.stdout + swept.stderr
    assert f"recovered    run {run_id}: stopped 1 container(s)" in swept.stdout
    assert (run_logs(bench, "aws-e2e", run_id) / "cifar10_cnn_torch.csv").read_text() == "epoch,elapsed\n"
    assert_nothing_left_in_aws(bench, run_id)
    record = bench.record(run_id)
    assert record.status == "failed" and record.recovered_by == "sweep"
    assert [(i.workload, i.status) for i in record.items] == [("mnist_mlp", "complete"), ("cifar10_cnn", "interrupted")]
    assert record.instances[0].terminated_at is not None and record.estimated_cost_usd is not None


CHATTY = "imdb_bidirectional_lstm"  # the mechanics image's chatty item: an epoch every 0.2 s, output without pause


def host_csv(bench: Bench, profile: str, run_id: str) -> Path:
    """The chatty item's CSV on the machine (the test sshd's host folder), as the container writes it."""
    return bench.tmp / "host" / "runs" / run_id / "logs" / profile / run_id / f"{CHATTY}_torch.csv"


def kill_then_let_the_machine_end_itself(
    bench: Bench, profile: str, run_id: str, saved: Callable[[], bool], end: Callable[[], None]
) -> tuple[str, subprocess.CompletedProcess[str]]:
    """The orchestrator killed mid-item; the machine reaches its max lifetime, saves and ends itself, its disk
    with it; then the sweep. The epochs the container had written when it stopped, and the sweep's output."""
    args = bench.run_args(profile, run_id, "--backends", "torch", "--image-source", "present", "--max-lifetime", "1")
    process = bench.start([*args, "--workloads", CHATTY])
    csv = host_csv(bench, profile, run_id)
    try:
        wait_for(
            lambda: csv.exists() and len(csv.read_text().splitlines()) > 10, 120, "the chatty item's epochs", bench
        )
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        wait_for(saved, 120, "the machine to save the run's logs before its end", bench)
        wait_for(lambda: not [c for c in containers_of_run(run_id) if running(c)], 30, "the container to stop", bench)
        written = csv.read_text()
        end()
        shutil.rmtree(bench.tmp / "host" / "runs" / run_id)  # the machine's disk went with it
        swept = bench.call(bench.command("sweep"))
    finally:
        remove_containers_of_run(run_id)
    return written, swept


def running(container: str) -> bool:
    state = subprocess.run(["docker", "inspect", "-f", "{{.State.Running}}", container], capture_output=True, text=True)
    return state.stdout.strip() == "true"


def assert_no_epoch_lost(
    bench: Bench, profile: str, run_id: str, written: str, swept: subprocess.CompletedProcess[str]
):
    assert swept.returncode == 0, swept.stdout + swept.stderr
    assert f"recovered    run {run_id}: unpacked " in swept.stdout, swept.stdout
    pulled = run_logs(bench, profile, run_id)
    assert (pulled / f"{CHATTY}_torch.csv").read_text() == written  # every epoch it finished, none lost
    assert len(written.splitlines()) > 10
    assert json.loads((pulled / f"{CHATTY}_torch.json").read_text())["status"] == "partial"
    record = bench.record(run_id)
    assert record.final and record.recovered_by == "sweep"
    assert [(i.workload, i.status) for i in record.items] == [(CHATTY, "interrupted")]


def test_aws_machine_that_ends_itself_saves_every_epoch_for_the_sweep(
    aws: FaultyMotoServer, sshd: SSHServer, tmp_path: Path
) -> None:
    """The chatty container, its orchestrator killed, its machine at its max lifetime: before the machine ends
    itself it stops the container and puts the run's logs into the project's bucket through a presigned URL; the
    sweep unpacks them. Mechanics image, under a tag of its own (other checkouts rebuild the shared one)."""
    image = build_mechanics_image(tmp_path / "mechanics", tag="kcb-test/lifecycle-mechanics:keepsafe")
    bench = make_bench(tmp_path, sshd, image, aws_environment(aws.url, tmp_path))
    run_id = "20250101T000000Z-awks"
    s3 = boto3.client("s3", region_name="us-east-1")

    def saved() -> bool:
        buckets = [b["Name"] for b in s3.list_buckets()["Buckets"]]
        keys = [o["Key"] for b in buckets for o in s3.list_objects_v2(Bucket=b).get("Contents", [])]
        return f"runs/{run_id}/saved-logs.tar.gz" in keys

    def end() -> None:
        ec2().terminate_instances(InstanceIds=[i["InstanceId"] for i in ec2_live()])

    with GuestKeys(sshd, ec2_running_instance_keys(AWS_REGIONS)):
        written, swept = kill_then_let_the_machine_end_itself(bench, "aws-e2e", run_id, saved, end)
    assert_no_epoch_lost(bench, "aws-e2e", run_id, written, swept)
    assert bench.record(run_id).estimated_cost_usd is not None  # to the end time EC2 recorded
    assert_nothing_left_in_aws(bench, run_id)


def test_aws_missing_credentials_stop_the_run_before_anything_starts(aws_bench: Bench, aws: FaultyMotoServer):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        del aws_bench.env[name]
    done = aws_bench.call(aws_bench.run_args("aws-e2e", "20250101T000000Z-aw53", "--backends", "jax"))
    assert done.returncode == 2
    assert "error: no AWS credentials found" in done.stderr
    assert "kcb-test-secret" not in done.stdout + done.stderr
    assert aws.injector.calls == []  # not one EC2 call
    assert_nothing_left_in_aws(aws_bench, "20250101T000000Z-aw53")


def bench_ledger_instances(bench: Bench, run_id: str) -> list[str]:
    runs = Ledger(bench.ledger).runs()
    return [i.instance_id for i in runs[run_id].instances] if run_id in runs else []


# ---- GCE ------------------------------------------------------------------------------------------------------


@pytest.fixture
def gce_bench(gce_fake: GCEFake, sshd: SSHServer, cpu_image: str, tmp_path: Path) -> Iterator[Bench]:
    bench = make_bench(tmp_path, sshd, cpu_image, gce_environment(gce_fake, tmp_path))
    with GuestKeys(sshd, gce_running_instance_keys(gce_fake)):
        yield bench


def assert_nothing_left_in_gce(bench: Bench, fake: GCEFake, run_id: str) -> None:
    assert fake.all_instances() == []
    assert not (bench.tmp / "state" / "keys" / run_id).exists()
    assert containers_of_run(run_id) == []


def test_gce_spot_run_fails_over_and_survives_a_preemption(gce_bench: Bench, gce_fake: GCEFake):
    run_id = "20250101T000000Z-gc51"
    gce_fake.fail_inserts("us-central1-a", code="ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS")
    process = gce_bench.start(gce_bench.run_args("gce-e2e", run_id, "--spot", "--backends", "jax,torch"))
    try:
        preempt_mid_suite(
            gce_bench, run_id, "gce-e2e",
            lambda: gce_fake.preempt("us-central1-b", gce_fake.live_instances()[0]["name"]),
        )  # fmt: skip
        assert finish(process, gce_bench) == 0, gce_bench.output()[-4000:]
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        remove_containers_of_run(run_id)
    record = assert_preempted_run_resumed(gce_bench, "gce-e2e", run_id)
    assert [i.zone for i in record.instances] == ["us-central1-b", "us-central1-b"]
    assert "no capacity in us-central1-a" in gce_bench.output()
    assert_nothing_left_in_gce(gce_bench, gce_fake, run_id)


def test_gce_sweep_finds_the_vm_of_a_killed_orchestrator(gce_bench: Bench, gce_fake: GCEFake):
    run_id = "20250101T000000Z-gc52"
    process = gce_bench.start(gce_bench.run_args("gce-e2e", run_id, "--backends", "jax"))
    gce_fake.after_insert = lambda: os.killpg(process.pid, signal.SIGKILL)
    assert finish(process, gce_bench, timeout_s=120) == -signal.SIGKILL
    [vm] = gce_fake.live_instances()
    assert bench_ledger_instances(gce_bench, run_id) == []

    dry = gce_bench.call(gce_bench.command("sweep", "--dry-run", "--provider", "gce"))
    assert dry.returncode == 0, dry.stderr
    assert f"would delete gce {vm['name']}" in dry.stdout
    assert len(gce_fake.live_instances()) == 1

    swept = gce_bench.call(gce_bench.command("sweep", "--provider", "gce"))
    assert swept.returncode == 0, swept.stderr
    assert f"deleted      gce {vm['name']}" in swept.stdout
    assert_nothing_left_in_gce(gce_bench, gce_fake, run_id)


def test_gce_machine_that_ends_itself_saves_every_epoch_for_the_sweep(
    gce_fake: GCEFake, sshd: SSHServer, tmp_path: Path
) -> None:
    """As on AWS, through a Cloud Storage resumable upload session (the emulator beside the Compute Engine fake);
    the VM's maxRunDuration runs out and Compute Engine deletes it."""
    image = build_mechanics_image(tmp_path / "mechanics", tag="kcb-test/lifecycle-mechanics:keepsafe")
    bench = make_bench(tmp_path, sshd, image, gce_environment(gce_fake, tmp_path))
    run_id = "20250101T000000Z-gcks"
    key = f"runs/{run_id}/saved-logs.tar.gz"

    def saved() -> bool:
        buckets = requests.get(f"{gce_fake.storage_url}/storage/v1/b", params={"project": gce_fake.project}).json()
        for bucket in buckets.get("items", []):
            listed = requests.get(f"{gce_fake.storage_url}/storage/v1/b/{bucket['name']}/o", timeout=10).json()
            if key in [item["name"] for item in listed.get("items", [])]:
                return True
        return False

    def end() -> None:
        for vm in gce_fake.live_instances():
            gce_fake.reach_max_run_duration(vm["zone"].rsplit("/", 1)[-1], vm["name"])

    with GuestKeys(sshd, gce_running_instance_keys(gce_fake)):
        written, swept = kill_then_let_the_machine_end_itself(bench, "gce-e2e", run_id, saved, end)
    assert_no_epoch_lost(bench, "gce-e2e", run_id, written, swept)
    assert_nothing_left_in_gce(bench, gce_fake, run_id)


def test_gce_missing_credentials_stop_the_run_before_anything_starts(gce_bench: Bench, gce_fake: GCEFake):
    del gce_bench.env["GOOGLE_APPLICATION_CREDENTIALS"]
    done = gce_bench.call(gce_bench.run_args("gce-e2e", "20250101T000000Z-gc53", "--backends", "jax"))
    assert done.returncode == 2
    assert "error: no Google credentials found" in done.stderr
    assert gce_fake.requests == []
    assert_nothing_left_in_gce(gce_bench, gce_fake, "20250101T000000Z-gc53")


def test_an_aws_run_killed_in_its_teardown_is_recorded_as_it_happened(
    aws: FaultyMotoServer, sshd: SSHServer, tmp_path: Path
) -> None:
    """kill -9 right after EC2 accepted the teardown's TerminateInstances: the item completed and the orchestrator
    ended the machine, so the sweep records the run complete and the machine ended by its teardown (billed to the
    time EC2 recorded), not a machine that ended on its own."""
    image = build_mechanics_image(tmp_path / "mechanics")
    bench = make_bench(tmp_path, sshd, image, aws_environment(aws.url, tmp_path))
    run_id = "20250101T000000Z-awtd"
    with GuestKeys(sshd, ec2_running_instance_keys(AWS_REGIONS)):
        process = bench.start(bench.run_args("aws-e2e", run_id, "--backends", "torch", "--image-source", "present"))
        aws.injector.after["TerminateInstances"] = lambda: os.killpg(process.pid, signal.SIGKILL)
        try:
            assert finish(process, bench, timeout_s=300) == -signal.SIGKILL
            swept = bench.call(bench.command("sweep", "--provider", "aws"))
        finally:
            remove_containers_of_run(run_id)
    assert swept.returncode == 0, swept.stdout + swept.stderr
    assert_nothing_left_in_aws(bench, run_id)
    record = bench.record(run_id)
    assert [(i.workload, i.status) for i in record.items] == [("mnist_mlp", "complete")]
    assert record.status == "complete", record.message
    assert "its teardown had ended its machine" in record.message and "on its own" not in record.message
    [machine] = record.instances
    assert machine.terminated_by is None and machine.terminated_at is not None and machine.cost_usd is not None


# ---- the kill -9 campaign -------------------------------------------------------------------------------------


def _ledger_writes(ledger: Path, run_id: str) -> int:
    if not ledger.exists():
        return 0
    return sum(f'"run_id": "{run_id}"' in line for line in ledger.read_text().splitlines())


# The attached run's ledger writes: starting, launched, host recorded, running, workload started, workload done,
# teardown, final. AWS is killed after every one. The writes and the sweep's reading of them are the shared
# lifecycle's, so Compute Engine is killed where what it leaves differs: nothing yet, an instance, a reachable host,
# a finished workload on it, a teardown begun, a final run.
KILL_POINTS = {"aws": range(1, 9), "gce": (1, 2, 3, 6, 7, 8)}


@pytest.mark.parametrize("cloud", ["aws", "gce"])
def test_kill_9_after_each_ledger_write_then_one_sweep_leaves_nothing_and_bills_every_machine(
    cloud: str, request: pytest.FixtureRequest, sshd: SSHServer, tmp_path: Path
) -> None:
    """The fault campaign on the clouds: the orchestrator of an attached run is killed (`kill -9`) right after
    each of its ledger writes, from the first (nothing launched yet) to the last; then one sweep. Each time: no
    machine, key pair, security group or local key left, no container, the run final in the ledger, every
    machine it started billed, every finished epoch here, and no traceback. Mechanics image (it sleeps)."""
    image = build_mechanics_image(tmp_path / "mechanics")
    if cloud == "aws":
        server: FaultyMotoServer = request.getfixturevalue("aws")
        bench = make_bench(tmp_path, sshd, image, aws_environment(server.url, tmp_path))
        keys, profile = GuestKeys(sshd, ec2_running_instance_keys(AWS_REGIONS)), "aws-e2e"
    else:
        fake: GCEFake = request.getfixturevalue("gce_fake")
        bench = make_bench(tmp_path, sshd, image, gce_environment(fake, tmp_path))
        keys, profile = GuestKeys(sshd, gce_running_instance_keys(fake)), "gce-e2e"
    with keys:
        for after in KILL_POINTS[cloud]:
            run_id = f"20250101T000000Z-{cloud}k{after}"
            process = bench.start(bench.run_args(profile, run_id, "--backends", "torch", "--image-source", "present"))
            try:
                written = lambda r=run_id: _ledger_writes(bench.ledger, r) >= after or process.poll() is not None  # noqa: E731,B023
                wait_for(written, 120, f"ledger write {after}", bench)
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
                swept = bench.call(bench.command("sweep", "--provider", cloud))
            finally:
                remove_containers_of_run(run_id)
            said = bench.output() + swept.stdout + swept.stderr
            assert swept.returncode == 0 and "Traceback" not in said, said[-4000:]
            if cloud == "aws":
                assert_nothing_left_in_aws(bench, run_id)
            else:
                assert_nothing_left_in_gce(bench, fake, run_id)
            record = bench.record(run_id)
            assert record.final, (after, record.status, swept.stdout)
            if after >= 6:  # killed once its one workload had finished: the run did what it was asked
                assert record.status == "complete", (after, record.message)
            for machine in record.instances:
                assert machine.terminated_at is not None and machine.cost_usd is not None, (after, machine)
            for item in record.latest_items():
                if item.status == "complete":
                    csv = run_logs(bench, profile, run_id) / f"{item.workload}_{item.backend}.csv"
                    assert csv.read_text().endswith("1,1.0\n"), (after, csv)
