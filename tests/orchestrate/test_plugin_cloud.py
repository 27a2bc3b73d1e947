"""A cloud from a separate package: `tests/plugins/kcb_foldercloud`, installed as a user installs a plug-in (a
distribution with entry points for its provider and its catalog), runs attached, detached and scheduled through
the public CLI, and passes the contracts `orchestrate.testing` ships, with no edit to this project."""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrate.testing.sshd import SSHServer
from records.ledger import Ledger
from tests.support.docker import build_mechanics_image, remove_containers_of_run

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "tests" / "plugins" / "kcb_foldercloud"
RUN_ID = "20260101T000000Z-fold"


class FolderCloud:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp, self.site, self.root = tmp_path, tmp_path / "site", tmp_path / "cloud"
        shutil.copytree(PLUGIN, self.site / "kcb_foldercloud", ignore=shutil.ignore_patterns("__pycache__"))
        dist = self.site / "kcb_foldercloud-0.1.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: kcb-foldercloud\nVersion: 0.1\n")
        (dist / "entry_points.txt").write_text(
            "[keras_cloud_bench.providers]\nfoldercloud = kcb_foldercloud:FolderCloudProvider\n"
            "[keras_cloud_bench.catalogs]\nfoldercloud = kcb_foldercloud:CATALOG\n"
        )
        self.ledger = tmp_path / "ledger.jsonl"
        self.env = {
            **os.environ,
            "PYTHONPATH": f"{self.site}:{ROOT}",
            "FOLDERCLOUD_ROOT": str(self.root),
            "KCB_STATE_DIR": str(tmp_path / "state"),
        }

    def orchestrate(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "orchestrate", *args]
        return subprocess.run(command, cwd=self.tmp, env=self.env, capture_output=True, text=True, timeout=300)

    def boot(self, boot_script: str, instance_id: str) -> subprocess.CompletedProcess[str]:
        """Be the machine: unpack what the boot script writes and run the agent as it does (without powering off
        this machine, which the script does at the end)."""
        work = self.tmp / "machine" / instance_id
        work.mkdir(parents=True)
        for marker, name in re.findall(r"base64 -d <<'(KCB_\w+)' \| gunzip > (\S+)\n", boot_script):
            block = boot_script.split(f"<<'{marker}' | gunzip > {name}\n", 1)[1].split(f"\n{marker}\n", 1)[0]
            (work / name).write_bytes(gzip.decompress(base64.b64decode(block)))
        # a machine whose Docker engine has no images: `docker image inspect` fails, nothing is installed or run
        bin_dir = self.tmp / "machine" / "bin"
        bin_dir.mkdir(exist_ok=True)
        (bin_dir / "docker").write_text("#!/bin/sh\nexit 1\n")
        (bin_dir / "docker").chmod(0o755)
        env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FOLDERCLOUD_INSTANCE": instance_id}
        return subprocess.run(
            [sys.executable, "agent.py", "spec.json"], cwd=work, env=env, capture_output=True, text=True, timeout=300
        )


@pytest.fixture
def cloud(tmp_path: Path) -> FolderCloud:
    return FolderCloud(tmp_path)


def test_the_plugin_passes_the_contracts_orchestrate_testing_ships(cloud: FolderCloud) -> None:
    tests = cloud.tmp / "plugin_tests"
    tests.mkdir()
    shutil.copy(PLUGIN / "plugin_tests.py", tests / "test_foldercloud.py")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tests), str(tests)],
        cwd=cloud.tmp, env=cloud.env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0 and " passed" in done.stdout, done.stdout[-3000:]


def test_attached_run_is_planned_on_the_plugins_cloud(cloud: FolderCloud) -> None:
    plan = cloud.orchestrate(
        "run", "--profile", "folder-cpu", "--suite", "quick", "--workloads", "mnist_mlp", "--backends", "jax",
        "--dry-run", "--ledger", str(cloud.ledger), "--logs", str(cloud.tmp / "logs"),
    )  # fmt: skip
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "folder-cpu" in plan.stdout and "foldercloud" in plan.stdout


def test_spot_is_refused_on_a_cloud_that_offers_no_spot_machines(cloud: FolderCloud) -> None:
    plan = cloud.orchestrate(
        "run", "--profile", "folder-cpu", "--suite", "quick", "--workloads", "mnist_mlp", "--backends", "jax",
        "--spot", "--dry-run", "--ledger", str(cloud.ledger),
    )  # fmt: skip
    assert plan.returncode == 2, plan.stdout + plan.stderr
    assert plan.stderr.strip().splitlines() == [
        "error: --spot: provider foldercloud offers no spot machines (offered by aws, gce)"
    ]


def test_detach_names_the_plugin_among_the_providers_that_detach(cloud: FolderCloud) -> None:
    refused = cloud.orchestrate(
        "run", "--profile", "local", "--workloads", "mnist_mlp", "--backends", "jax", "--detach", "--dry-run",
        "--ledger", str(cloud.ledger),
    )  # fmt: skip
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.strip().splitlines() == [
        "error: --detach needs a provider that runs boot scripts or batch jobs (aws, foldercloud, gce, slurm); "
        "local is local"
    ]


def test_a_plugins_schedule_price_that_is_no_price_is_one_line(cloud: FolderCloud) -> None:
    prices = cloud.site / "kcb_foldercloud" / "prices.toml"
    prices.write_text(prices.read_text().replace("usd = 0.10", "usd = nan"))
    refused = cloud.orchestrate(
        "schedule", "create", "--profile", "folder-cpu", "--cron", "0 4 * * 1", "--name", "weekly",
        "--image", "registry.example/kcb:cpu", "--ledger", str(cloud.ledger), "--dry-run",
    )  # fmt: skip
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.strip().splitlines() == [
        f"error: {prices}: clouds.foldercloud: field 'scheduler_job': usd must be a finite number > 0, got nan"
    ]


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.sshd
def test_attached_run_trains_on_the_plugins_machine_and_tears_it_down(cloud: FolderCloud, sshd: SSHServer) -> None:
    """The whole attached life on the plug-in's cloud: launch, SSH to the machine (the test sshd, at the address its
    settings give), the image's containers, the logs pulled, the machine terminated and billed, the run final."""
    image = build_mechanics_image(cloud.tmp / "mechanics")
    run_id = "20260101T000000Z-foat"
    try:
        done = cloud.orchestrate(
            "run", "--profile", "folder-cpu", "--suite", "quick", "--workloads", "mnist_mlp", "--backends", "torch",
            "--image", image, "--image-source", "present", "--run-id", run_id, "--plain",
            "--ledger", str(cloud.ledger), "--logs", str(cloud.tmp / "logs"), "--remote-dir", str(cloud.tmp / "host"),
            "--provider-setting", "ssh_host=127.0.0.1", "--provider-setting", f"ssh_port={sshd.port}",
            "--provider-setting", f"ssh_user={sshd.user}", "--provider-setting", f"ssh_key={sshd.key_path}",
        )  # fmt: skip
    finally:
        remove_containers_of_run(run_id)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [csv] = (cloud.tmp / "logs" / "folder-cpu" / run_id).glob("mnist_mlp_torch*.csv")
    assert csv.read_text().endswith("1,1.0\n")  # the image's epoch, pulled from the machine
    record = Ledger(cloud.ledger).runs()[run_id]
    assert record.status == "complete" and record.final
    [machine] = record.instances
    assert machine.provider == "foldercloud" and machine.terminated_at is not None and machine.cost_usd is not None
    [state] = [json.loads(p.read_text())["state"] for p in (cloud.root / "machines").glob("*.json")]
    assert state == "terminated"


def test_detached_run_launches_reports_and_is_collected(cloud: FolderCloud) -> None:
    launched = cloud.orchestrate(
        "run", "--profile", "folder-cpu", "--suite", "quick", "--workloads", "mnist_mlp", "--backends", "jax",
        "--detach", "--image", "kcb-test/absent-on-the-machine:1", "--image-source", "present", "--run-id", RUN_ID,
        "--ledger", str(cloud.ledger), "--logs", str(cloud.tmp / "logs"),
    )  # fmt: skip
    assert launched.returncode == 0, launched.stdout + launched.stderr
    [machine] = (cloud.root / "machines").glob("*.json")
    bucket = "folder://keras-cloud-bench-folder-fold-1/"
    assert f"{bucket}runs/{RUN_ID}/" in launched.stdout
    assert (cloud.root / "buckets" / "keras-cloud-bench-folder-fold-1" / "runs" / RUN_ID / "spec.json").is_file()

    booted = cloud.boot(json.loads(machine.read_text())["boot_script"], machine.stem)
    assert booted.returncode == 1, booted.stdout + booted.stderr  # the image is not on the machine: a failed run
    assert json.loads(machine.read_text())["state"] == "terminated"  # it deleted itself

    status = cloud.orchestrate("status", RUN_ID, "--ledger", str(cloud.ledger))
    assert status.returncode == 0 and "0 of 1 items done" in status.stdout, status.stdout + status.stderr
    collected = cloud.orchestrate("collect", RUN_ID, "--ledger", str(cloud.ledger))
    assert collected.returncode == 1, collected.stdout + collected.stderr  # the run failed
    record = Ledger(cloud.ledger).runs()[RUN_ID]
    assert record.status == "failed" and "kcb-test/absent-on-the-machine:1 is not on" in record.message


def test_a_collected_runs_torn_last_line_keeps_its_billed_time_through_sweep_and_collect(cloud: FolderCloud) -> None:
    """The final ledger line of a collected detached run is cut (a full disk) and its logs folder, with run.json,
    is gone: the sweep settles the run again from its bucket, and a later collect leaves it as it was."""
    logs = cloud.tmp / "logs"
    launched = cloud.orchestrate(
        "run", "--profile", "folder-cpu", "--suite", "quick", "--workloads", "mnist_mlp", "--backends", "jax",
        "--detach", "--image", "kcb-test/absent-on-the-machine:1", "--image-source", "present", "--run-id", RUN_ID,
        "--ledger", str(cloud.ledger), "--logs", str(logs),
    )  # fmt: skip
    assert launched.returncode == 0, launched.stdout + launched.stderr
    [machine] = (cloud.root / "machines").glob("*.json")
    cloud.boot(json.loads(machine.read_text())["boot_script"], machine.stem)
    cloud.orchestrate("collect", RUN_ID, "--ledger", str(cloud.ledger))
    billed = Ledger(cloud.ledger).runs()[RUN_ID]
    assert billed.status == "failed" and billed.billed_seconds > 0 and billed.estimated_cost_usd

    *earlier, last = cloud.ledger.read_bytes().splitlines(keepends=True)
    cloud.ledger.write_bytes(b"".join(earlier) + last[:200])
    shutil.rmtree(logs)
    swept = cloud.orchestrate("sweep", "--ledger", str(cloud.ledger), "--provider", "foldercloud")
    assert swept.returncode == 0, swept.stdout + swept.stderr
    assert f"recovered    run {RUN_ID}: " in swept.stdout
    for step in ("sweep", "collect"):
        record = Ledger(cloud.ledger).runs()[RUN_ID]
        assert (record.status, record.billed_seconds, record.estimated_cost_usd) == (
            billed.status,
            billed.billed_seconds,
            billed.estimated_cost_usd,
        ), step
        cloud.orchestrate("collect", RUN_ID, "--ledger", str(cloud.ledger))


def test_schedule_is_created_listed_and_deleted_on_the_plugins_cloud(cloud: FolderCloud) -> None:
    created = cloud.orchestrate(
        "schedule", "create", "--profile", "folder-cpu", "--cron", "0 4 * * 1", "--name", "weekly",
        "--image", "registry.example/kcb:cpu", "--ledger", str(cloud.ledger), "--logs", str(cloud.tmp / "logs"),
    )  # fmt: skip
    assert created.returncode == 0, created.stdout + created.stderr
    assert "foldercloud scheduler in fold-1" in created.stdout and "Schedule weekly created" in created.stdout
    job = json.loads((cloud.root / "schedules" / "weekly.json").read_text())
    assert job["storage"] == "folder://keras-cloud-bench-folder-fold-1/schedules/weekly/"
    assert "gunzip > cloud.py" in job["boot_script"]  # the cloud's side of the agent, beside it

    listed = cloud.orchestrate("schedule", "list", "--provider", "foldercloud")
    assert listed.returncode == 0 and re.search(r"weekly\s+foldercloud", listed.stdout), listed.stdout + listed.stderr
    deleted = cloud.orchestrate("schedule", "delete", "weekly", "--provider", "foldercloud")
    assert deleted.returncode == 0 and "deleted foldercloud job weekly" in deleted.stdout, deleted.stdout
    assert not (cloud.root / "schedules" / "weekly.json").exists()
