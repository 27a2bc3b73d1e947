"""Detached runs, for real: `orchestrate run --detach` launches through the provider and returns; the fake cloud
hands the instance's boot script to a machine (tests/clouds/machines.py: a container on the local Docker engine)
that runs it: the real CPU image's containers, uploads to the storage double (moto's S3; gcp-storage-emulator for
Cloud Storage), and its own deletion through the fake cloud's API with the machine's own identity. Then
`orchestrate status` / `collect` read the bucket.

Covered: a quick run end to end on both clouds; the orchestrator killed right after the launch, then `collect`
getting every log (and the sweep leaving the machine alone meanwhile); a Spot preemption mid-run, resumed by
`collect` on a new machine (no finished item lost or rerun); a boot script that fails (image missing), which still
uploads its console and deletes its machine; buckets that cannot be written or do not exist (one line, nothing
launched); the orchestrator killed during the image upload, then `sweep` and `collect` (run finalised, the
unfinished multipart upload aborted), or the upload refused (one line, run finalised).
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import boto3
import pytest
from gcp_storage_emulator.server import create_server

from records.ledger import Ledger, RunRecord
from tests.clouds.aws_faults import Fault, FaultyMotoServer, interrupt_spot_instance
from tests.clouds.environments import SERVICE_ACCOUNT, aws_environment, gce_environment
from tests.clouds.gce_fake import GCEFake
from tests.clouds.machines import (
    Machines,
    ec2_boot_scripts,
    ec2_power_off,
    gce_boot_scripts,
    gce_power_off,
    gce_tokens,
)
from tests.clouds.test_cloud_runs import catalog_text
from tests.support.datasets import tiny_mlp_data
from tests.support.docker import BASE_IMAGE, build_cpu_image, containers_of_run, remove_containers_of_run

pytestmark = [pytest.mark.slow, pytest.mark.docker]

REPO = Path(__file__).resolve().parents[2]
AWS_REGIONS = ("us-east-1", "us-west-2")
FLAGS = ["--suite", "quick", "--workloads", "mnist_mlp", "--backends", "jax", "--epochs", "1", "--train-limit", "256"]
FLAGS += ["--val-limit", "64", "--plain", "--detach"]
S3_BUCKET = "kcb-detached-test"
GCS_BUCKET = "kcb-detached-test"


@pytest.fixture(scope="module")
def cpu_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_cpu_image(tmp_path_factory.mktemp("image") / "build.log")


@dataclass
class Detached:
    """One test's orchestrator: environment, catalog, ledger, logs; the cloud's machines."""

    env: dict[str, str]
    tmp: Path
    image: str
    machines: Machines
    profile: str

    @property
    def ledger(self) -> Path:
        return self.tmp / "ledger.jsonl"

    def logs(self, run_id: str) -> Path:
        return self.tmp / "logs" / self.profile / run_id

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "orchestrate", *args]

    def run_args(self, run_id: str, *extra: str, bucket: str | None = "default") -> list[str]:
        where = [] if bucket is None else ["--bucket", self.default_bucket if bucket == "default" else bucket]
        return self.command(
            "run", "--profile", self.profile, "--run-id", run_id, *FLAGS, "--image", self.image,
            "--image-source", "present", "--logs", str(self.tmp / "logs"), "--ledger", str(self.ledger),
            "--upload-interval", "2", *where, *extra,
        )  # fmt: skip

    @property
    def default_bucket(self) -> str:
        return f"s3://{S3_BUCKET}/bench" if self.profile.startswith("aws") else f"gs://{GCS_BUCKET}/bench"

    def call(self, args: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, cwd=REPO, env=self.env, capture_output=True, text=True, timeout=timeout)

    def start(self, args: list[str]) -> subprocess.Popen[str]:
        with (self.tmp / "orchestrator.log").open("a") as output:
            return subprocess.Popen(
                args, cwd=REPO, env=self.env, stdout=output, stderr=subprocess.STDOUT, text=True,
                start_new_session=True,
            )  # fmt: skip

    def collect(self, run_id: str) -> subprocess.CompletedProcess[str]:
        return self.call(self.command("collect", run_id, "--ledger", str(self.ledger)))

    def record(self, run_id: str) -> RunRecord:
        return Ledger(self.ledger).runs()[run_id]

    def consoles(self) -> str:
        return "\n".join(f"--- {i}:\n{self.machines.console(i)[-3000:]}" for i in self.machines.booted)


def wait_for(condition: Callable[[], object], timeout_s: float, what: str, bench: Detached) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}; machines' consoles:\n{bench.consoles()}")


def environment(tmp: Path, cloud_env: dict[str, str]) -> dict[str, str]:
    catalog = tmp / "catalog.toml"
    catalog.write_text(catalog_text("kcb"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GOOGLE_", "KCB_", "CLOUDSDK_"))}
    env.update(cloud_env)
    env.update(KCB_CATALOG=str(catalog), KCB_LEDGER=str(tmp / "ledger.jsonl"), PYTHONUNBUFFERED="1")
    return env


def assert_collected(bench: Detached, run_id: str, backends: tuple[str, ...] = ("jax",), epochs: int = 1) -> RunRecord:
    """Every item's results and console in the attached layout, the ledger final and billed from the machine's
    own times."""
    folder = bench.logs(run_id)
    for backend in backends:
        meta = json.loads((folder / f"mnist_mlp_{backend}_synthetic.json").read_text())
        assert meta["status"] == "complete" and meta["run_id"] == run_id and meta["platform"] == bench.profile
        assert (folder / f"mnist_mlp_{backend}_synthetic.csv").read_text().count("\n") == 1 + epochs  # + header
        assert (folder / "orchestrate" / f"mnist_mlp_{backend}.console.log").stat().st_size > 0
    record = bench.record(run_id)
    last = folder / "orchestrate" / f"machine-attempt-{len(record.instances)}.log"
    assert last.read_text().count("deleting") == 1
    assert record.status == "complete", (record.message, bench.consoles())
    assert json.loads((folder / "orchestrate" / "run.json").read_text())["status"] == "complete"
    assert all(i.terminated_at is not None and i.terminated_at > i.launched_at for i in record.instances)
    assert record.estimated_cost_usd is not None and record.estimated_cost_usd > 0
    assert record.image_digest
    return record


# ---- AWS -----------------------------------------------------------------------------------------------------


def aws_live(region: str = "us-east-1") -> list[dict]:
    described = boto3.client("ec2", region_name=region).describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}]
    )
    return [i for r in described["Reservations"] for i in r["Instances"]]


def s3_keys(prefix: str) -> list[str]:
    listed = boto3.client("s3", region_name="us-east-1").list_objects_v2(Bucket=S3_BUCKET, Prefix=prefix)
    return [item["Key"] for item in listed.get("Contents", [])]


@pytest.fixture
def aws_detached(aws: FaultyMotoServer, cpu_image: str, tmp_path: Path) -> Iterator[Detached]:
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=S3_BUCKET)
    machines = Machines("aws", ec2_boot_scripts(AWS_REGIONS), ec2_power_off, tmp_path / "machines")
    env = environment(tmp_path, aws_environment(aws.url, tmp_path))
    with machines:
        yield Detached(env, tmp_path, cpu_image, machines, "aws-e2e")


def assert_nothing_left_in_aws(run_id: str) -> None:
    for region in AWS_REGIONS:
        assert aws_live(region) == []
    iam = boto3.client("iam", region_name="us-east-1")
    assert iam.list_roles(PathPrefix="/keras-cloud-bench/")["Roles"] == []
    assert iam.list_instance_profiles(PathPrefix="/keras-cloud-bench/")["InstanceProfiles"] == []
    assert containers_of_run(run_id) == []


def test_aws_detached_run_end_to_end(aws_detached: Detached, aws: FaultyMotoServer) -> None:
    bench, run_id = aws_detached, "20250101T000000Z-dt01"
    try:
        launched = bench.call(bench.run_args(run_id))
        assert launched.returncode == 0, launched.stdout + launched.stderr
        assert f"Run {run_id}: detached on i-" in launched.stdout
        [instance] = aws_live()  # the orchestrator has returned; the machine works on
        assert bench.record(run_id).status == "detached"
        # the machine's role may write its run's objects and terminate its run's instances, nothing else
        role = boto3.client("iam", region_name="us-east-1").get_role_policy(
            RoleName=f"kcb-{run_id}", PolicyName="detached-run"
        )["PolicyDocument"]
        statements = {s["Sid"]: s for s in role["Statement"]}
        assert statements["RunObjects"]["Resource"] == f"arn:aws:s3:::{S3_BUCKET}/bench/runs/{run_id}/*"
        assert statements["TerminateItself"]["Condition"] == {"StringEquals": {"aws:ResourceTag/run-id": run_id}}
        assert "KeyName" not in json.dumps(aws.injector.calls)  # no SSH key, no ingress: nobody logs in
        wait_for(lambda: not aws_live(), 600, "the machine to finish and delete itself", bench)
        status = bench.call(bench.command("status", run_id, "--ledger", str(bench.ledger)))
        reported = status.stdout + status.stderr + bench.consoles()  # a machine that ended unreported says why there
        assert status.returncode == 0 and ": complete" in status.stdout, reported
        assert "1 of 1 items done" in status.stdout
        collected = bench.collect(run_id)
        assert collected.returncode == 0, collected.stdout + collected.stderr
    finally:
        remove_containers_of_run(run_id)
    record = assert_collected(bench, run_id)
    assert [i.instance_id for i in record.instances] == [instance["InstanceId"]]
    terminations = [c for c in aws.injector.calls if c.get("Action") == "TerminateInstances"]
    assert terminations == [terminations[0]] and terminations[0]["InstanceId.1"] == instance["InstanceId"]
    assert "kcb-machine-role-secret" not in bench.consoles()  # credentials are never printed
    again = bench.collect(run_id)  # idempotent: nothing new to fetch, the ledger stays as it was
    assert again.returncode == 0 and "0 file(s) fetched" in again.stdout, again.stdout
    assert_nothing_left_in_aws(run_id)


def test_aws_detached_run_carries_a_workload_file_and_a_data_folder_to_the_machine(aws_detached: Detached) -> None:
    """The user's workload file and data folder wait in the bucket as the run's payload (payload.tar); the machine
    unpacks and checks it, mounts both into the image's containers, and the run trains on the carried file."""
    bench, run_id = aws_detached, "20250101T000000Z-dtwf"
    example = REPO / "examples" / "workloads" / "tiny_mlp.py"
    data = tiny_mlp_data(bench.tmp / "mydata")
    try:
        args = bench.run_args(run_id, "--workload-file", str(example), "--data-dir", str(data))
        launched = bench.call(["tiny_mlp" if a == "mnist_mlp" else a for a in args])  # --workloads: the file's alone
        assert launched.returncode == 0, launched.stdout + launched.stderr
        assert "tiny_mlp.py: workload tiny_mlp" in launched.stdout  # checked here before the launch
        assert f"bench/runs/{run_id}/payload.tar" in s3_keys(f"bench/runs/{run_id}/")
        wait_for(lambda: not aws_live(), 600, "the machine to finish and delete itself", bench)
        collected = bench.collect(run_id)
        assert collected.returncode == 0, collected.stdout + collected.stderr
    finally:
        remove_containers_of_run(run_id)
    assert bench.record(run_id).status == "complete", bench.record(run_id).message
    meta = json.loads((bench.logs(run_id) / "tiny_mlp_jax.json").read_text())  # no _synthetic: the carried data
    assert meta["status"] == "complete" and meta["epochs_completed"] == 1
    assert meta["data"]["source"] == "real" and meta["data"]["files"] == [{"name": "tiny_mlp.npz"}]
    assert meta["plugin"]["file"] == "tiny_mlp.py"
    assert meta["plugin"]["sha256"] == hashlib.sha256(example.read_bytes()).hexdigest()
    assert meta["run_spec"]["sha256"] == bench.record(run_id).spec and meta["run_spec"]["payload_files"] == 3
    assert_nothing_left_in_aws(run_id)


# A second AWS profile of another instance type, which the fake cloud has no capacity for.
NO_CAPACITY_PROFILE = """\
[profiles.aws-e2e-big]
provider = "aws"
machine_type = "c7i.xlarge"
zones = ["us-east-1a", "us-east-1b"]
image = "resolve:ssm:/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-6.1-x86_64"
on_demand = { usd_per_hour = 0.1785, date = "2025-06-01", source = "test catalog" }
"""


def test_aws_detached_fanout_launches_every_profile_and_survives_one_without_capacity(
    aws_detached: Detached, aws: FaultyMotoServer
) -> None:
    bench, base = aws_detached, "20250101T000000Z-dtf0"
    (bench.tmp / "big.toml").write_text(NO_CAPACITY_PROFILE)
    no_capacity = aws.injector.add(
        Fault(
            "RunInstances",
            "InsufficientInstanceCapacity",
            "no c7i.xlarge capacity",
            None,
            {"InstanceType": "c7i.xlarge"},
        )
    )
    # No committed run estimates JAX on a c7i CPU, so the guard counts that run at its profile's cap: $1.07 in all.
    args = bench.run_args(base, "--catalog", str(bench.tmp / "big.toml"), "--max-cost", "2")
    args[args.index("--profile") : args.index("--profile") + 2] = ["--profiles", "aws-e2e,aws-e2e-big"]
    run_id = f"{base}-aws-e2e"
    try:
        launched = bench.call(args)
        out = launched.stdout + launched.stderr
        assert launched.returncode == 1, out  # one profile could not launch; the other works on alone
        assert f"Fan-out {base}: 2 profiles, detached" in out
        assert bench.record(run_id).status == "detached"
        assert bench.record(f"{base}-aws-e2e-big").status == "failed" and no_capacity.hits >= 2  # both zones
        assert f"orchestrate collect {run_id}" in out and f"--runs '{base}-*'" in out
        wait_for(lambda: not aws_live(), 600, "the machine to finish and delete itself", bench)
        collected = bench.collect(run_id)
        assert collected.returncode == 0, collected.stdout + collected.stderr
    finally:
        remove_containers_of_run(run_id)
    assert_collected(bench, run_id)
    assert_nothing_left_in_aws(run_id)


def test_a_detached_fanout_launches_nothing_when_one_profile_cannot_run_detached(aws_detached: Detached) -> None:
    bench = aws_detached
    args = bench.run_args("20250101T000000Z-dtf1")
    args[args.index("--profile") : args.index("--profile") + 2] = ["--profiles", "aws-e2e,local"]
    refused = bench.call(args)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "local is local" in refused.stderr and "boot scripts" in refused.stderr
    assert aws_live() == [] and not bench.ledger.exists()


def test_aws_orchestrator_killed_after_launch_then_collect_gets_every_log(aws_detached: Detached, aws) -> None:
    bench, run_id = aws_detached, "20250101T000000Z-dt02"
    process = bench.start(bench.run_args(run_id, "--backends", "jax,torch"))
    aws.injector.after["RunInstances"] = lambda: os.killpg(process.pid, signal.SIGKILL)
    try:
        assert process.wait(timeout=120) == -signal.SIGKILL
        assert bench.record(run_id).instances == []  # it died before it could record the machine
        wait_for(lambda: aws_live(), 60, "the machine", bench)
        looked = bench.call(bench.command("sweep", "--provider", "aws", "--dry-run", "--ledger", str(bench.ledger)))
        [said] = [line for line in looked.stdout.splitlines() if run_id in line and "recovered" in line]
        assert f"would adopt {aws_live()[0]['InstanceId']}: its orchestrator died after launching it" in said, said
        swept = bench.call(bench.command("sweep", "--provider", "aws", "--ledger", str(bench.ledger)))
        assert swept.returncode == 0, swept.stderr
        assert f"detached run {run_id} works on its own" in swept.stdout  # kept: no orchestrator needed
        wait_for(lambda: not aws_live(), 900, "the machine to finish and delete itself", bench)
        collected = bench.collect(run_id)
        assert collected.returncode == 0, collected.stdout + collected.stderr
    finally:
        remove_containers_of_run(run_id)
    record = assert_collected(bench, run_id, ("jax", "torch"))
    assert len(record.instances) == 1  # learnt from the machine's own status
    assert_nothing_left_in_aws(run_id)


def test_aws_orchestrator_killed_after_creating_the_runs_role_then_one_sweep_cleans_up(
    aws_detached: Detached, aws: FaultyMotoServer
) -> None:
    """kill -9 once IAM has created the run's role and before any machine: the sweep finalises the run (no machine)
    and its role goes in the same pass; the sweep never also calls the run one that works on its own."""
    bench, run_id = aws_detached, "20250101T000000Z-dt03"
    process = bench.start(bench.run_args(run_id, "--backends", "jax"))
    aws.injector.after["CreateRole"] = lambda: os.killpg(process.pid, signal.SIGKILL)
    assert process.wait(timeout=120) == -signal.SIGKILL
    assert bench.record(run_id).status == "detached" and aws.injector.count("RunInstances") == 0
    swept = bench.call(bench.command("sweep", "--provider", "aws", "--ledger", str(bench.ledger)))
    out = swept.stdout + swept.stderr
    assert swept.returncode == 0 and "Traceback" not in out, out
    said = [line for line in swept.stdout.splitlines() if run_id in line]
    assert said == [f"recovered    run {run_id}: no machine was launched: its orchestrator stopped before the launch"]
    assert bench.record(run_id).status == "failed"
    assert_nothing_left_in_aws(run_id)


def test_aws_spot_preemption_mid_run_resumes_on_a_new_machine(aws_detached: Detached) -> None:
    bench, run_id = aws_detached, "20250101T000000Z-dt03"
    prefix = f"bench/runs/{run_id}/"
    try:
        # three epochs: the second item runs long enough to be caught in the middle
        launched = bench.call(bench.run_args(run_id, "--backends", "jax,torch", "--spot", "--epochs", "3"))
        assert launched.returncode == 0, launched.stdout + launched.stderr
        # the first item's files are up, and the second item's running files too: the cloud takes the machine
        wait_for(lambda: f"{prefix}files/mnist_mlp_jax_synthetic.json" in s3_keys(prefix), 600, "item 1", bench)
        running = f"{prefix}partial/attempt-1/orchestrate/mnist_mlp_torch.console.log"
        wait_for(lambda: running in s3_keys(prefix), 300, "item 2's first upload", bench)
        [first] = aws_live()
        interrupt_spot_instance("us-east-1", first["InstanceId"])
        wait_for(lambda: not bench.machines.machines, 30, "the machine to go", bench)
        status = bench.call(bench.command("status", run_id, "--ledger", str(bench.ledger)))
        assert "preempted before the run ended" in status.stdout, status.stdout
        resumed = bench.collect(run_id)
        assert resumed.returncode == 0 and "relaunched on" in resumed.stdout, resumed.stdout + resumed.stderr
        wait_for(lambda: len(bench.machines.booted) == 2 and not aws_live(), 900, "the relaunch to finish", bench)
        collected = bench.collect(run_id)
        assert collected.returncode == 0, collected.stdout + collected.stderr
    finally:
        remove_containers_of_run(run_id)
    record = assert_collected(bench, run_id, ("jax", "torch"), epochs=3)
    assert record.preemptions == 1 and [i.preempted for i in record.instances] == [True, False]
    runs = [(i.backend, i.status, i.attempt) for i in record.items]
    assert runs == [("jax", "complete", 1), ("torch", "preempted", 1), ("torch", "complete", 2)]  # jax not rerun
    partial = bench.logs(run_id) / "preempted" / "attempt-1"
    assert (partial / "mnist_mlp_torch.console.log").exists()  # kept aside, never among the results
    first = (bench.logs(run_id) / "orchestrate" / "machine-attempt-1.log").read_text()
    assert "item mnist_mlp_torch: started" in first and "deleting" not in first  # up to its last heartbeat
    assert_nothing_left_in_aws(run_id)


def test_aws_boot_script_that_fails_still_uploads_its_console_and_deletes_its_machine(
    aws_detached: Detached, aws: FaultyMotoServer
) -> None:
    bench, run_id = aws_detached, "20250101T000000Z-dt04"
    bench.image = "kcb-test/no-such-image:1"
    launched = bench.call(bench.run_args(run_id))
    assert launched.returncode == 0, launched.stdout + launched.stderr
    wait_for(lambda: not aws_live(), 300, "the machine to give up and delete itself", bench)
    collected = bench.collect(run_id)
    assert collected.returncode == 1, collected.stdout + collected.stderr
    record = bench.record(run_id)
    assert record.status == "failed" and "kcb-test/no-such-image:1" in record.message
    console = (bench.logs(run_id) / "orchestrate" / "machine-attempt-1.log").read_text()
    assert "is not on" in console and "deleting" in console
    assert [c["InstanceId.1"] for c in aws.injector.calls if c.get("Action") == "TerminateInstances"]
    assert_nothing_left_in_aws(run_id)


def test_aws_image_travels_through_the_bucket_and_the_machine_loads_it(
    aws_detached: Detached, aws: FaultyMotoServer
) -> None:
    """`--image-source load`: the orchestrator `docker save`s the image into the run's prefix and the machine
    `docker load`s it. The machine shares this Docker engine, so the tag is removed once the image is saved (at
    RunInstances): only the machine's load can bring it back. The image is the small base image under a second
    tag (the one the run names, not its first): what is tested is the transfer; its items cannot run the suite
    and the run says so."""
    bench, run_id, tag = aws_detached, "20250101T000000Z-dt08", "kcb-test/load-me:1"
    subprocess.run(["docker", "tag", BASE_IMAGE, tag], check=True)
    untag = ["docker", "rmi", tag]
    aws.injector.after["RunInstances"] = lambda: subprocess.run(untag, check=True, capture_output=True)
    try:
        launched = bench.call(bench.run_args(run_id, "--image", tag, "--image-source", "load"))
        assert launched.returncode == 0, launched.stdout + launched.stderr
        assert f"bench/runs/{run_id}/image.tar" in s3_keys(f"bench/runs/{run_id}/")
        wait_for(lambda: not aws_live(), 300, "the machine to finish and delete itself", bench)
        assert subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0  # loaded
        collected = bench.collect(run_id)
    finally:
        subprocess.run(untag, capture_output=True)
        remove_containers_of_run(run_id)
    assert collected.returncode == 1, collected.stdout + collected.stderr  # the base image has no runner
    console = (bench.logs(run_id) / "orchestrate" / "machine-attempt-1.log").read_text()
    assert f"image {tag} ready (load)" in console, console
    assert bench.record(run_id).status == "failed"
    assert_nothing_left_in_aws(run_id)


def unfinished_uploads(prefix: str) -> list[str]:
    listed = boto3.client("s3", region_name="us-east-1").list_multipart_uploads(Bucket=S3_BUCKET, Prefix=prefix)
    return [upload["Key"] for upload in listed.get("Uploads", [])]


def test_aws_orchestrator_killed_during_the_image_upload_then_the_sweep_finalises_and_aborts_it(
    aws_detached: Detached, aws: FaultyMotoServer
) -> None:
    """kill -9 while `--image-source load` uploads the image (a multipart upload: the base image is ~200 MB): the
    ledger says `detached` with no machine and the bucket holds an unfinished upload, billed until aborted, and the
    run's payload.tar (`--data-dir`, uploaded before the image). The sweep (as `collect` would) finalises the run as
    never launched, aborts the upload and deletes payload.tar. The kill comes from moto, once it has stored the first
    part of the image, so the upload is certainly unfinished."""
    bench, run_id, tag = aws_detached, "20250101T000000Z-dt10", "kcb-test/upload-me:1"
    prefix, scratch = f"bench/runs/{run_id}/", bench.tmp / "orchestrator-tmp"
    scratch.mkdir()
    bench.env["TMPDIR"] = str(scratch)  # where `docker save` spools the image
    subprocess.run(["docker", "tag", BASE_IMAGE, tag], check=True)
    moto, parts = aws.injector.app, []

    def kill_at_the_first_part(environ: dict, start_response: Callable) -> object:
        answer = moto(environ, start_response)
        image_part = environ["PATH_INFO"] == f"/{S3_BUCKET}/{prefix}image.tar" and "partNumber=" in environ.get(
            "QUERY_STRING", ""
        )
        if environ["REQUEST_METHOD"] == "PUT" and image_part:
            parts.append(environ["QUERY_STRING"])
            if len(parts) == 1:
                os.killpg(process.pid, signal.SIGKILL)
        return answer

    aws.injector.app = kill_at_the_first_part
    try:
        data = ["--data-dir", str(tiny_mlp_data(bench.tmp / "mydata"))]
        process = bench.start(bench.run_args(run_id, "--image", tag, "--image-source", "load", *data))
        assert process.wait(timeout=180) == -signal.SIGKILL, (bench.tmp / "orchestrator.log").read_text()
    finally:
        aws.injector.app = moto
        subprocess.run(["docker", "rmi", tag], capture_output=True)
    assert parts and bench.record(run_id).status == "detached" and bench.record(run_id).instances == []
    assert unfinished_uploads(prefix) == [prefix + "image.tar"] and prefix + "image.tar" not in s3_keys(prefix)
    assert prefix + "payload.tar" in s3_keys(prefix)
    looked = bench.call(bench.command("sweep", "--provider", "aws", "--dry-run", "--ledger", str(bench.ledger)))
    assert f"run {run_id}: would finalise it: its orchestrator died before it launched a machine" in looked.stdout, (
        looked.stdout
    )
    assert bench.record(run_id).status == "detached" and unfinished_uploads(prefix) == [prefix + "image.tar"]
    swept = bench.call(bench.command("sweep", "--provider", "aws", "--ledger", str(bench.ledger)))
    out = swept.stdout + swept.stderr
    assert swept.returncode == 0 and "Traceback" not in out, out
    [line] = [line for line in swept.stdout.splitlines() if run_id in line]
    assert line.startswith(f"recovered    run {run_id}: no machine was launched"), out
    assert "aborted its unfinished upload of image.tar" in line and "deleted its unused payload.tar" in line, out
    record = bench.record(run_id)
    assert record.status == "failed" and record.instances == [] and record.ended_at is not None
    assert unfinished_uploads(prefix) == [] and s3_keys(prefix) == [prefix + "spec.json"]
    again = bench.collect(run_id)  # what the sweep finalised, collect leaves as it is
    assert again.returncode == 1 and f"Run {run_id}: already failed" in again.stdout, again.stdout + again.stderr
    swept = bench.call(bench.command("sweep", "--provider", "aws", "--ledger", str(bench.ledger)))
    assert swept.returncode == 0 and "nothing of this project is running" in swept.stdout, swept.stdout
    assert_nothing_left_in_aws(run_id)
    assert aws.injector.count("RunInstances") == 0
    assert list(scratch.iterdir()) == []  # the spooled image went with the process


def test_aws_image_upload_that_fails_ends_the_run_in_the_ledger_in_one_line(
    aws_detached: Detached, aws: FaultyMotoServer
) -> None:
    bench, run_id, tag = aws_detached, "20250101T000000Z-dt11", "kcb-test/upload-me:2"
    prefix = f"bench/runs/{run_id}/"
    denied = aws.injector.add(
        Fault("s3:PUT", "AccessDenied", "Access Denied", times=None, params={"Path": f"/{S3_BUCKET}/{prefix}image.tar"})
    )
    subprocess.run(["docker", "tag", BASE_IMAGE, tag], check=True)
    try:
        failed = bench.call(bench.run_args(run_id, "--image", tag, "--image-source", "load"))
    finally:
        subprocess.run(["docker", "rmi", tag], capture_output=True)
    assert failed.returncode == 2 and denied.hits >= 1, failed.stdout + failed.stderr
    [line] = [line for line in failed.stderr.splitlines() if "error" in line]  # after the progress note
    assert "Traceback" not in failed.stderr, failed.stderr
    assert line.startswith(f"error: s3://{S3_BUCKET}/bench/: uploading ") and "AccessDenied" in line, line
    record = bench.record(run_id)
    assert record.status == "failed" and record.message.startswith("nothing was launched: ") and record.ended_at
    assert unfinished_uploads(prefix) == []  # boto3 aborts the upload it gives up
    assert aws.injector.count("RunInstances") == 0 and aws_live() == []


def test_the_projects_own_s3_bucket_aborts_uploads_left_unfinished(aws: FaultyMotoServer) -> None:
    from orchestrate.providers.aws.storage import UNFINISHED_UPLOAD_DAYS, S3Store
    from orchestrate.storage import StorageURL

    S3Store(StorageURL("s3", "kcb-own-bucket-test")).ensure_bucket(create=True, location="us-west-2")
    s3 = boto3.client("s3", region_name="us-west-2")
    [rule] = s3.get_bucket_lifecycle_configuration(Bucket="kcb-own-bucket-test")["Rules"]
    assert rule["Status"] == "Enabled" and rule["Filter"] == {"Prefix": ""}
    assert rule["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": UNFINISHED_UPLOAD_DAYS}
    assert s3.get_bucket_tagging(Bucket="kcb-own-bucket-test")["TagSet"] == [
        {"Key": "project", "Value": "keras-cloud-bench"}
    ]


def test_load_of_an_image_this_engine_lacks_is_refused_before_anything(aws_detached: Detached) -> None:
    bench = aws_detached
    refused = bench.call(
        bench.run_args("20250101T000000Z-dt09", "--image", "kcb-test/absent:1", "--image-source", "load")
    )
    assert refused.returncode == 2 and "kcb-test/absent:1 is not in this machine's Docker engine" in refused.stderr
    assert aws_live() == [] and "20250101T000000Z-dt09" not in Ledger(bench.ledger).runs()


def test_aws_bucket_that_cannot_be_written_stops_the_run_before_launch(aws_detached: Detached, aws) -> None:
    bench, run_id = aws_detached, "20250101T000000Z-dt05"
    aws.injector.add(Fault("s3:PUT", "AccessDenied", "Access Denied", times=None))
    denied = bench.call(bench.run_args(run_id))
    assert denied.returncode == 2, denied.stdout + denied.stderr
    [line] = denied.stderr.strip().splitlines()
    assert line.startswith(f"error: s3://{S3_BUCKET}/bench/: writing bench/runs/{run_id}/") and "AccessDenied" in line
    missing = bench.call(bench.run_args("20250101T000000Z-dt06", bucket="s3://kcb-no-such-bucket"))
    assert missing.returncode == 2 and "bucket kcb-no-such-bucket does not exist" in missing.stderr
    bad = bench.call(bench.run_args("20250101T000000Z-dt07", bucket="s3://Not_A.Bucket"))
    assert bad.returncode == 2 and "error: --bucket 's3://Not_A.Bucket': bucket name" in bad.stderr
    assert aws.injector.count("RunInstances") == 0 and aws_live() == []


# ---- GCE -----------------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def gcs() -> Iterator[str]:
    port = free_port()
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket=GCS_BUCKET)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def gce_detached(gce: GCEFake, gcs: str, cpu_image: str, tmp_path: Path) -> Iterator[Detached]:
    machines = Machines(
        "gce", gce_boot_scripts(gce), gce_power_off(gce), tmp_path / "machines", token_for=gce_tokens(gce)
    )
    env = environment(tmp_path, {**gce_environment(gce, tmp_path), "KCB_GCS_API_ENDPOINT": gcs})
    with machines:
        yield Detached(env, tmp_path, cpu_image, machines, "gce-e2e")


def test_gce_detached_run_end_to_end(gce_detached: Detached, gce: GCEFake) -> None:
    bench, run_id = gce_detached, "20250101T000000Z-dg01"
    account = f"--provider-setting=service_account={SERVICE_ACCOUNT}"
    try:
        launched = bench.call(bench.run_args(run_id, account))
        assert launched.returncode == 0, launched.stdout + launched.stderr
        [vm] = gce.live_instances()
        assert vm["serviceAccounts"][0]["email"] == SERVICE_ACCOUNT
        assert not any(i["key"] == "ssh-keys" for i in vm["metadata"]["items"])  # nobody logs in
        wait_for(lambda: not gce.live_instances(), 600, "the VM to finish and delete itself", bench)
        collected = bench.call(bench.command("collect", run_id, "--ledger", str(bench.ledger), account))
        assert collected.returncode == 0, collected.stdout + collected.stderr
    finally:
        remove_containers_of_run(run_id)
    assert_collected(bench, run_id)
    assert gce.deleted_by == {vm["name"]: f"vm:{SERVICE_ACCOUNT}"}  # it deleted itself, with its own token
    assert gce.all_instances() == [] and containers_of_run(run_id) == []


def test_gce_vm_token_may_delete_only_its_own_vm(gce: GCEFake) -> None:
    """The fake's least privilege: a VM's token deletes nothing its instance policy does not grant."""
    import requests

    token = gce.vm_token(SERVICE_ACCOUNT)
    url = f"{gce.url}/compute/v1/projects/{gce.project}/zones/us-central1-a/instances/someone-elses"
    answer = requests.delete(url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert answer.status_code == 403
    listing = requests.get(url.rsplit("/", 1)[0], headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert listing.status_code == 403


def test_gce_missing_bucket_stops_the_run_before_launch(gce_detached: Detached, gce: GCEFake) -> None:
    bench = gce_detached
    missing = bench.call(bench.run_args("20250101T000000Z-dg05", bucket="gs://kcb-no-such-bucket"))
    assert missing.returncode == 2, missing.stdout + missing.stderr
    [line] = missing.stderr.strip().splitlines()
    assert line.startswith("error: bucket kcb-no-such-bucket does not exist")
    wrong = bench.call(bench.run_args("20250101T000000Z-dg06", bucket="s3://kcb-detached-test"))
    assert wrong.returncode == 2 and "a gce machine writes to a gs:// bucket" in wrong.stderr
    assert not any(method == "POST" for method, _ in gce.requests) and gce.all_instances() == []


class RefusingUploads(http.server.ThreadingHTTPServer):
    """In front of the storage emulator (which enforces no IAM): every object upload is answered as Cloud Storage
    answers an account without storage.objects.create; everything else is passed on."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.refused = 0
        super().__init__(("127.0.0.1", 0), _RefusingHandler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _RefusingHandler(http.server.BaseHTTPRequestHandler):
    server: RefusingUploads

    def do_GET(self) -> None:
        self._forward()

    def do_POST(self) -> None:
        if self.path.startswith("/upload/storage/v1/b/"):
            self.server.refused += 1
            self._reply(403, {"error": {"code": 403, "message": f"{SERVICE_ACCOUNT} does not have "
                                        "storage.objects.create access to the Google Cloud Storage object.",
                                        "errors": [{"reason": "forbidden", "domain": "global"}]}})  # fmt: skip
            return
        self._forward()

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
        request = urllib.request.Request(self.server.upstream + self.path, body, headers, method=self.command)
        try:
            with urllib.request.urlopen(request) as answer:
                status, data, kind = answer.status, answer.read(), answer.headers.get("Content-Type", "")
        except urllib.error.HTTPError as error:
            status, data, kind = error.code, error.read(), error.headers.get("Content-Type", "")
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _reply(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_gce_bucket_that_cannot_be_written_stops_the_run_before_launch(
    gce_detached: Detached, gce: GCEFake, gcs: str
) -> None:
    bench, proxy = gce_detached, RefusingUploads(gcs)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        bench.env["KCB_GCS_API_ENDPOINT"] = proxy.url
        denied = bench.call(bench.run_args("20250101T000000Z-dg07"))
    finally:
        proxy.shutdown()
    assert denied.returncode == 2, denied.stdout + denied.stderr
    [line] = denied.stderr.strip().splitlines()
    assert line.startswith("error: ") and "403" in line and "storage.objects.create" in line, line
    assert proxy.refused >= 1
    assert not any(method == "POST" for method, _ in gce.requests) and gce.all_instances() == []


# ---- the pieces, without a cloud ---------------------------------------------------------------------------


def test_sweep_keeps_a_detached_machine_until_its_expiry_and_after_its_run_is_finalised_deletes_it() -> None:
    from orchestrate.provider import Instance
    from orchestrate.sweep import plan_sweep

    now, me = 1_800_000_000.0, "me@laptop"

    def machine(run_id: str, expiry: float, mode: str = "detached") -> Instance:
        tags = {"project": "keras-cloud-bench", "owner": me, "run-id": run_id, "expiry": str(int(expiry))}
        return Instance("aws", f"i-{run_id}", "us-east-1a", None, tags={**tags, "mode": mode})

    def run(run_id: str, status: str) -> RunRecord:
        return RunRecord(run_id, "aws-e2e", "aws", "aws-e2e", "quick", me, 0, now - 100, status=status)

    runs = {"live": run("live", "detached"), "done": run("done", "complete")}
    instances = [
        machine("live", now + 600),  # its orchestrator (pid 0) is long gone: kept anyway
        machine("scheduled", now + 600),  # launched by a schedule, in no ledger: kept
        machine("live-expired", now - 5),
        machine("done", now + 600),  # collected, yet still running: its self-delete failed
    ]
    decisions = {d.instance.instance_id: d.delete for d in plan_sweep(instances, runs, now, me, lambda r: False)}
    assert decisions == {"i-live": False, "i-scheduled": False, "i-live-expired": True, "i-done": True}


def test_collect_leaves_a_run_without_a_machine_alone_while_its_orchestrator_still_uploads() -> None:
    """The ledger's record comes before the image upload, which may take minutes: a `collect` meanwhile must
    neither abort the upload nor finalise the run."""
    from orchestrate.detached_runs import _never_launched

    class Untouchable:
        def __getattr__(self, name: str) -> object:
            raise AssertionError(f"{name} called on a run that is still launching")

    here = f"me@{socket.gethostname()}"
    record = RunRecord("r1", "aws-e2e", "aws", "aws-e2e", "quick", here, os.getpid(), time.time(), status="detached")
    nothing = Untouchable()
    said = _never_launched(record, nothing, "runs/r1/", nothing, nothing, print)  # type: ignore[arg-type]
    assert said.startswith(f"still launching: its orchestrator (pid {os.getpid()}") and record.status == "detached"


def test_boot_script_checks_its_spec_and_round_trips_it() -> None:
    from orchestrate.detached import DetachedError, DetachedSpec, boot_script
    from orchestrate.plan import WorkItem
    from orchestrate.runspec import plan_spec

    items = tuple(WorkItem(w, b) for w in ("mnist_mlp", "imdb_fasttext") for b in ("jax", "torch", "tensorflow"))
    run = plan_spec(None, "aws-e2e", "quick", "registry.example/kcb:cpu", False, items)
    spec = DetachedSpec("aws", "s3://bucket/p", run, endpoints={})
    script = boot_script(spec)
    assert script.startswith("#!/bin/sh\n") and "shutdown -h +240" in script and len(script) < 16 * 1024
    assert "AWS_SECRET" not in script and "Token" not in script  # credentials come from the metadata server
    assert DetachedSpec.from_json(spec.to_json()) == spec
    gpu = plan_spec(None, "gce-t4", "quick", "r/x:gpu", True, items)
    scheduled = boot_script(DetachedSpec("gce", "gs://bkt", gpu, endpoints={}))
    assert "(named at boot)" in scheduled and "shutdown -h +" not in scheduled  # GCE: maxRunDuration
    bad = [
        ({"provider": "ssh"}, "provider 'ssh'"),
        ({"storage_url": "gs://bkt"}, "writes to a s3:// bucket"),
        ({"storage_url": "s3://Bad.Name"}, "bucket name 'Bad.Name'"),
        ({"image_source": "stream"}, "image source 'stream'"),
        ({"run": replace(run, run_id="a;b")}, "run_id 'a;b'"),
        ({"run": replace(run, items=())}, "items: nothing to run"),
    ]
    for change, message in bad:
        with pytest.raises(DetachedError, match=re.escape(message)):
            boot_script(replace(spec, **change))
