"""The sweep's decisions, as a pure function of (instances, ledger, now, owner, live processes)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from orchestrate.provider import Instance
from orchestrate.sweep import local_process_alive, plan_sweep
from records.ledger import STATUS_COMPLETE, STATUS_FAILED, STATUS_RUNNING, RunRecord

ROOT = Path(__file__).resolve().parents[2]
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


# ---- isolation: one broken provider is one line, the others are still swept -----------------------------------

PLUGINS = """
from orchestrate.provider import Instance, InstanceState, Provider


class Base(Provider):
    def check_credentials(self): pass
    def launch(self, request): raise NotImplementedError
    def wait_until_running(self, instance, timeout_s): return instance
    def state(self, instance): return InstanceState.TERMINATED
    def terminate(self, instance): print(f"terminated {instance.instance_id} via {self.ssh_address}")
    def list_instances(self):
        tags = {"project": "keras-cloud-bench", "run-id": "gone", "owner": "x@y", "expiry": "1"}
        return [Instance(self.name, "vm-1", None, None, tags=tags)]


class Good(Base):
    name = "goodcloud"
    settings = ("ssh_address",)

    def __init__(self, ssh_address="default"):
        self.ssh_address = ssh_address

    @classmethod
    def from_settings(cls, settings):
        return cls(**settings)


class BadSettings(Base):
    name = "badsettings"

    @classmethod
    def from_settings(cls, settings):
        raise ValueError("no config file")


class BadList(Good):
    name = "badlist"

    def list_instances(self):
        raise RuntimeError("API changed")


class BadRelease(Good):
    name = "badrelease"

    def list_instances(self):
        return []

    def leftover_runs(self):
        return {"gone": {"project": "keras-cloud-bench", "run-id": "gone", "owner": "x@y", "expiry": "1"}}

    def release_run(self, run_id):
        raise KeyError("security-group")
"""


def test_one_broken_plugin_does_not_stop_the_sweep_of_the_others(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "kcb_sweep_plugins.py").write_text(PLUGINS)
    dist = site / "kcb_sweep_plugins-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: kcb_sweep_plugins\nVersion: 0.1\n")
    entries = {"goodcloud": "Good", "badsettings": "BadSettings", "badlist": "BadList", "badimport": "Missing"}
    entries["badrelease"] = "BadRelease"
    (dist / "entry_points.txt").write_text(
        "[keras_cloud_bench.providers]\n" + "".join(f"{n} = kcb_sweep_plugins:{c}\n" for n, c in entries.items())
    )
    env = {
        "PYTHONPATH": f"{site}:{ROOT}",
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": str(tmp_path / "absent"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "absent"),
        "NO_GCE_CHECK": "true",
        "CLOUDSDK_CONFIG": str(tmp_path / "absent"),
        "KCB_STATE_DIR": str(tmp_path / "state"),
    }
    args = ["sweep", "--ledger", str(tmp_path / "ledger.jsonl"), "--provider-setting", "goodcloud:ssh_address=10.0.0.9"]
    done = subprocess.run(
        [sys.executable, "-m", "orchestrate", *args], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT
    )
    assert done.returncode == 1
    assert "terminated vm-1 via 10.0.0.9" in done.stdout  # the working plug-in was swept, with its setting
    assert "deleted      goodcloud vm-1 (run gone): expired" in done.stdout
    assert "skipped      aws: no AWS credentials found" in done.stdout  # the built-in ones went on too
    errors = done.stderr.strip().splitlines()
    # a bug in a plug-in (not its own ProviderError) is named with its type: `KeyError: 'x'`, not a bare `'x'`
    assert "error: could not release badrelease resources of run gone: KeyError: 'security-group'" in errors
    errors = [line for line in errors if "could not release" not in line]
    assert [line.split(":")[1].strip() for line in errors] == ["badimport", "badlist", "badsettings"], errors
    assert "API changed" in done.stderr and "no config file" in done.stderr and "cannot be loaded" in done.stderr


def test_a_run_killed_before_it_reached_its_host_is_finalised(tmp_path: Path, capsys) -> None:
    """kill -9 while connecting: no container, no folder; the ledger must still stop saying `running`."""
    from orchestrate.cli import main, owner_id
    from records.ledger import Ledger

    ledger = Ledger(tmp_path / "ledger.jsonl")
    dead_pid = 2**22 + 12345  # above Linux's default pid_max: never a live process
    ledger.append(RunRecord("r-conn", "ssh", "ssh", "ssh", "quick", owner_id(), dead_pid, NOW, STATUS_RUNNING))
    ledger.append(RunRecord("r-live", "ssh", "ssh", "ssh", "quick", owner_id(), os.getpid(), NOW, STATUS_RUNNING))
    assert main(["sweep", "--provider", "ssh", "--ledger", str(ledger.path)]) == 0
    out = capsys.readouterr().out
    assert "recovered    run r-conn: it never prepared its host: nothing there" in out
    runs = ledger.runs()
    assert runs["r-conn"].status == STATUS_FAILED and runs["r-conn"].recovered_by == "sweep"
    assert runs["r-live"].status == STATUS_RUNNING  # its orchestrator is alive: left alone


def test_bad_sweep_and_ledger_inputs_are_one_line_and_exit_2(tmp_path: Path) -> None:
    """An unknown --provider, and a --ledger that names a folder, for each command that reads the ledger."""
    commands = [
        (["sweep", "--provider", "nosuch"], "error: --provider nosuch: no such provider; registered: "),
        (["sweep", "--ledger", str(tmp_path)], f"error: --ledger {tmp_path}: is a folder; give the ledger's file"),
        (["cost", "--ledger", str(tmp_path)], f"error: --ledger {tmp_path}: is a folder"),
        (["status", "r1", "--ledger", str(tmp_path)], f"error: --ledger {tmp_path}: is a folder"),
        (["run", "--profile", "local", "--ledger", str(tmp_path)], f"error: --ledger {tmp_path}: is a folder"),
    ]
    for argv, message in commands:
        done = subprocess.run(
            [sys.executable, "-m", "orchestrate", *argv], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        assert (done.returncode, done.stdout) == (2, ""), argv
        assert done.stderr.startswith(message) and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path: Path) -> None:
    """`orchestrate cost | head -1`: the rest of the table has nowhere to go, and that is not an error to show."""
    from records.ledger import Ledger

    ledger = Ledger(tmp_path / "ledger.jsonl")
    for index in range(3000):  # more than a pipe's buffer
        ledger.append(run(f"r{index}", STATUS_COMPLETE))
    done = subprocess.run(
        f"{sys.executable} -m orchestrate cost --ledger {ledger.path} | head -1",
        shell=True, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.stdout.startswith("run ") and done.stderr == ""
