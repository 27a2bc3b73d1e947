"""Faults, through the real CLI, sshd, Docker engine and CPU image: each ends with a clear message, the finished
workloads' logs kept, and nothing left running. Bad inputs fail before anything starts."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from benchmarks.logs import read_epoch_log
from orchestrate.lifecycle import Lifecycle
from orchestrate.plan import WorkItem
from orchestrate.progress import Reporter
from orchestrate.providers.local import LocalProvider
from orchestrate.testing.sshd import SSHServer, free_port
from records.ledger import Ledger
from tests.orchestrate.orchestrate_helpers import (
    ROOT,
    TINY,
    Workspace,
    ledger_items,
    orchestrate,
    plan_on_image,
    ssh_run_args,
    start_orchestrate,
    wait_for,
)
from tests.orchestrate.test_registry import install_outside_package
from tests.support.docker import (
    build_cpu_image,
    build_mechanics_image,
    containers_of_run,
    remove_containers_of_run,
)

pytestmark = [pytest.mark.docker, pytest.mark.sshd]


@pytest.fixture(scope="module")
def cpu_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_cpu_image(tmp_path_factory.mktemp("image") / "image-cpu.log")


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    workspace = Workspace(tmp_path)
    workspace.prefill()
    return workspace


def _interrupt_when(
    process: subprocess.Popen[bytes], run_id: str, ready: Callable[[], None], sig: signal.Signals, timeout: float
) -> tuple[int, list[str]]:
    """Once `ready` returns, send `sig` and wait for the exit code. Whatever happens, kill a survivor and remove
    the run's containers; return the exit code and the containers that were still there."""
    try:
        ready()
        process.send_signal(sig)
        code = process.wait(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
        leftovers = containers_of_run(run_id)
        remove_containers_of_run(run_id)
    return code, leftovers


def test_unreachable_host_fails_clearly_and_leaves_a_record(ws: Workspace) -> None:
    run_id = "20260101T000000Z-unre"
    port = str(free_port())  # nothing listens there
    done = orchestrate(
        "run", "--profile", "ssh", "--host", "bench@127.0.0.1", "--port", port, "--ssh-timeout", "3",
        "--logs", str(ws.logs), "--ledger", str(ws.ledger), "--run-id", run_id, "--plain",
    )  # fmt: skip
    assert done.returncode == 1
    assert f"cannot reach bench@127.0.0.1:{port} over SSH within 3 s" in done.stdout
    record = ws.run_record(run_id)
    assert record.status == "failed" and "cannot reach" in record.message
    assert [s.name for s in record.stages] == ["validate", "launch", "connect", "teardown"]
    assert all(s.ended_at is not None for s in record.stages)


@pytest.mark.slow
def test_a_container_failing_mid_suite_keeps_the_others(sshd: SSHServer, ws: Workspace, cpu_image: str) -> None:
    """mnist_mlp fails for real (--strict-data and no mnist.npz here: the runner exits 3); the next runs."""
    run_id = "20260101T000000Z-fail"
    args = ssh_run_args(sshd, ws, run_id, "--workloads", "mnist_mlp,lstm_text_generation", "--backends", "jax")
    try:
        done = orchestrate(*args, "--image", cpu_image, "--strict-data", *TINY)
    finally:
        remove_containers_of_run(run_id)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 of 2 container runs failed: mnist_mlp [jax] (failed)" in done.stdout
    assert "mnist.npz" in done.stderr  # the failing run's own error, shown with its result line
    record = ws.run_record(run_id)
    assert [(i.workload, i.status, i.exit_code) for i in record.items] == [
        ("mnist_mlp", "failed", 3),
        ("lstm_text_generation", "complete", 0),
    ]
    kept = read_epoch_log(ws.run_logs("ssh", run_id) / "lstm_text_generation_jax.csv")
    assert kept.status == "complete" and len(kept.epochs) == 2
    assert containers_of_run(run_id) == []
    assert not (ws.remote_dir / "runs" / run_id).exists()


@pytest.mark.slow
def test_ctrl_c_mid_run_tears_down_and_keeps_finished_logs(
    sshd: SSHServer, ws: Workspace, cpu_image: str, tmp_path: Path
) -> None:
    run_id = "20260101T000000Z-sigi"
    args = ssh_run_args(sshd, ws, run_id, "--workloads", "mnist_mlp,lstm_text_generation", "--backends", "jax")
    args += ["--image", cpu_image, "--epochs", "40", "--train-limit", "512", "--val-limit", "128"]
    remote_csv = ws.remote_dir / "runs" / run_id / "logs" / "ssh" / run_id / "lstm_text_generation_jax.csv"
    process = start_orchestrate(*args, output=tmp_path / "out.txt")

    def first_done_second_started() -> None:
        wait_for(lambda: remote_csv.exists() and len(remote_csv.read_text().splitlines()) >= 2, 600, "an epoch")
        folder = ws.remote_dir / "runs" / run_id  # on a shared host, the user's alone
        finished = folder / "logs" / "ssh" / run_id / "mnist_mlp_jax_synthetic.csv"
        assert (folder.stat().st_mode & 0o777, finished.stat().st_mode & 0o777) == (0o700, 0o600)

    code, leftovers = _interrupt_when(process, run_id, first_done_second_started, signal.SIGINT, 120)
    out = (tmp_path / "out.txt").read_text()
    assert code == 130, out
    assert f"Run {run_id}: interrupted: interrupted by SIGINT" in out
    assert f"stopped container {run_id}-lstm_text_generation-jax" in out
    assert leftovers == []
    run_logs = ws.run_logs("ssh", run_id)
    assert read_epoch_log(run_logs / "mnist_mlp_jax_synthetic.csv").status == "complete"
    partial = read_epoch_log(run_logs / "lstm_text_generation_jax.csv")
    assert partial.status == "partial" and 1 <= len(partial.epochs) < 40  # what ran before the stop is kept
    record = ws.run_record(run_id)
    assert record.status == "interrupted"
    assert [(i.workload, i.status) for i in record.items] == [
        ("mnist_mlp", "complete"),
        ("lstm_text_generation", "interrupted"),
    ]
    assert record.stages[-1].name == "teardown" or record.stages[-2].name == "teardown"
    assert not (ws.remote_dir / "runs" / run_id).exists()


def test_sigterm_tears_down_too(sshd: SSHServer, ws: Workspace, tmp_path: Path) -> None:
    """Lifecycle mechanics only: the purpose-built sleeping image stands in for a long workload."""
    image = build_mechanics_image(tmp_path / "mechanics")
    run_id = "20260101T000000Z-sigt"
    args = ssh_run_args(sshd, ws, run_id, "--workloads", "mnist_mlp,cifar10_cnn", "--backends", "torch")
    process = start_orchestrate(*args, "--image", image, "--image-source", "present", output=tmp_path / "out.txt")

    def second_container_running() -> None:
        wait_for(
            lambda: [i["status"] for i in ledger_items(ws.ledger, run_id)] == ["complete", "running"], 120, "run 2"
        )
        wait_for(lambda: containers_of_run(run_id), 30, "the second container")

    code, leftovers = _interrupt_when(process, run_id, second_container_running, signal.SIGTERM, 60)
    out = (tmp_path / "out.txt").read_text()
    assert code == 130, out
    assert "interrupted by SIGTERM" in out and f"stopped container {run_id}-cifar10_cnn-torch" in out
    assert leftovers == []
    assert ws.run_record(run_id).status == "interrupted"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--profile", "gce-t5"], "error: unknown profile 'gce-t5'; did you mean gce-t4"),
        (["--profile", "local", "--suite", "quik"], "error: unknown suite 'quik'; choose from quick"),
        (["--profile", "local", "--backends", "cntk"], "error: unknown backend cntk for suite quick"),
        (["--profile", "local", "--workloads", "mnist"], "error: unknown workload mnist for suite quick"),
        (["--profile", "local", "--epochs", "0"], "error: argument --epochs: expected a positive integer, got 0"),
        (["--profile", "local", "--frobnicate"], "error: unrecognized arguments: --frobnicate"),
        (["--profile", "local", "--spot"], "error: --spot applies to rented machines; local is a local host"),
        (["--profile", "local", "--host", "me@box"],
         "error: --host applies to providers with a host setting, like ssh; local is local"),
        (["--profile", "ssh"], "error: the ssh provider needs a host: --host user@box"),
        (["--profile", "ssh", "--host", "me@box", "--port", "0"], "error: --port 0 is outside 1-65535"),
        (["--profile", "ssh", "--host", "me@box", "--identity", "/nonexistent/key"],
         "error: the SSH key /nonexistent/key does not exist or cannot be read"),
        (["--profile", "local", "--run-id", "../escape"], "error: --run-id '../escape': use letters, digits"),
        (["--profile", "local", "--image-source", "ftp"], "error: argument --image-source: invalid choice: 'ftp'"),
        (["--profile", "local", "--max-lifetime", "99999999999"],
         "error: --max-lifetime 99999999999: at most 10080 minutes"),
        (["--profile", "local", "--remote-dir", "work dir"], "error: --remote-dir 'work dir': use ~, ~/path or /path"),
        (["--profile", "local", "--remote-dir", "~/a;rm -rf b"], "error: --remote-dir '~/a;rm -rf b': use ~"),
        (["--profile", "local", "--remote-dir", "/srv/../etc"], "error: --remote-dir '/srv/../etc': '..' is not"),
        (["--profile", "local", "--repeats", "0"], "error: argument --repeats: expected a positive integer, got 0"),
        (["--profile", "local", "--repeats", "101"], "error: --repeats 101: at most 100"),
        (["--profile", "local", "--gpus", "2"], "error: --gpus applies to GPU profiles; local has no accelerator"),
        (["--profile", "gce-a2-highgpu-2g", "--gpus", "4", "--backends", "jax"],
         "error: --gpus 4: gce-a2-highgpu-2g has 2 GPU(s)"),
        (["--profile", "gce-a2-highgpu-2g", "--gpus", "2"], "error: --gpus 2: the torch backend trains on one device"),
        (["--profile", "gce-a2-highgpu-2g", "--gpus", "all", "--backends", "jax,torch"],
         "error: --gpus all: the torch backend trains on one device"),
        (["--profile", "ssh-gpu", "--host", "me@box", "--gpus", "2", "--backends", "torch"],
         "error: --gpus 2: the torch backend trains on one device"),
        (["--profile", "ssh-gpu", "--host", "me@box", "--gpus", "0"],
         "error: argument --gpus: expected a positive integer, got 0"),
        (["--profile", "ssh-gpu", "--host", "me@box", "--batch-policy", "half"],
         "error: argument --batch-policy: invalid choice: 'half'"),
        (["--profile", "local", "--catalog", "/nonexistent.toml"],
         "error: /nonexistent.toml: cannot read the catalog"),
    ],
)  # fmt: skip
def test_bad_inputs_fail_before_anything_starts(ws: Workspace, args: list[str], message: str) -> None:
    done = orchestrate("run", *args, "--ledger", str(ws.ledger), "--logs", str(ws.logs), timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(message), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1  # one line
    assert not ws.ledger.exists() and not ws.logs.exists()  # nothing started, nothing recorded


def test_a_killed_fanout_leaves_its_runs_to_finish_and_collect_makes_the_report(
    sshd: SSHServer, ws: Workspace, tmp_path: Path
) -> None:
    """kill -9 of the fan-out process mid-run: each profile's run (its own session, its own output file) runs its
    remaining workloads, tears down and ends in the ledger; `collect <base>` then makes the combined table."""
    image = build_mechanics_image(tmp_path / "mechanics")
    base = "20260101T000000Z-fkil"
    args = ssh_run_args(sshd, ws, base, "--workloads", "mnist_mlp,imdb_fasttext", "--backends", "torch")
    args[args.index("--profile") : args.index("--profile") + 2] = ["--profiles", "local,ssh"]
    args += ["--image", image, "--image-source", "present", "--report-out", str(tmp_path / "report")]
    parent = subprocess.Popen(
        [sys.executable, "-m", "orchestrate", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,  # the children must not depend on it: it breaks when the parent dies
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
    )
    runs = [f"{base}-local", f"{base}-ssh"]
    try:
        for run_id in runs:
            wait_for(
                lambda r=run_id: [i["status"] for i in ledger_items(ws.ledger, r)][:1] == ["complete"], 120, run_id
            )
        parent.kill()
        parent.wait(timeout=30)
        wait_for(lambda: all(ws.run_record(r).final for r in runs), 120, "both runs to end")
    finally:
        if parent.poll() is None:
            parent.kill()
        leftovers = [name for r in runs for name in containers_of_run(r)]
        for run_id in runs:
            remove_containers_of_run(run_id)
    assert leftovers == []
    for run_id in runs:
        record = ws.run_record(run_id)
        assert record.status == "complete", record.message
        assert [i.status for i in record.latest_items()] == ["complete", "complete"]
        assert not (ws.remote_dir / "runs" / run_id).exists()
    assert "teardown   done" in (ws.root / "fanouts" / base / "local.log").read_text()

    collected = orchestrate("collect", base, "--ledger", str(ws.ledger), timeout=300)
    table = collected.stdout[collected.stdout.index(f"Fan-out {base}: 2 profiles") :]
    assert [line.split()[:2] for line in table.splitlines()[2:4]] == [["local", "complete"], ["ssh", "complete"]]
    assert (tmp_path / "report" / "fanout.md").exists()


def test_a_run_whose_output_closes_mid_run_finishes_and_tears_down(tmp_path: Path) -> None:
    """The reader of the run's output goes away after the first workload (a closed terminal, `| head`): every
    later write is a real EPIPE. The run goes on silently, tears down and records its end."""
    image = build_mechanics_image(tmp_path / "mechanics")
    run_id = "20260101T000000Z-pipe"
    reader, writer = os.pipe()

    class ReaderLeaves(Reporter):
        def item_finished(self, label: str, status: str, seconds: float, detail: str = "") -> None:
            super().item_finished(label, status, seconds, detail)
            with contextlib.suppress(OSError):
                os.close(reader)

    items = (WorkItem("mnist_mlp", "torch"), WorkItem("imdb_fasttext", "torch"))
    plan = plan_on_image(tmp_path, image, run_id, items)
    with os.fdopen(writer, "w") as stream:
        try:
            outcome = Lifecycle(plan, LocalProvider(), Ledger(tmp_path / "l.jsonl"), ReaderLeaves(stream)).run()
        finally:
            leftovers = containers_of_run(run_id)
            remove_containers_of_run(run_id)
            with contextlib.suppress(OSError):
                os.close(reader)
        with contextlib.suppress(BrokenPipeError):
            stream.close()
    record = Ledger(tmp_path / "l.jsonl").runs()[run_id]
    assert (outcome.exit_code, record.status, leftovers) == (0, "complete", []), record.message
    assert "teardown" in [s.name for s in record.stages] and not (tmp_path / "host" / "runs" / run_id).exists()


def _written_or_ended(ledger: Path, run_id: str, lines: int, process: subprocess.Popen[bytes]) -> bool:
    """The run has written `lines` ledger lines, or has ended (a run writes fewer lines than the most asked)."""
    written = sum(f'"run_id": "{run_id}"' in line for line in ledger.read_text().splitlines()) if ledger.exists() else 0
    return written >= lines or process.poll() is not None


PLUGIN_CATALOG = """
[profiles.outside-cpu]
provider = "outsidecloud"
description = "a CPU host at outsidecloud"
"""


@pytest.mark.parametrize("where", ["local", "ssh", "plugin"])
def test_kill_9_at_every_ledger_write_then_one_sweep_leaves_nothing(
    where: str, sshd: SSHServer, ws: Workspace, tmp_path: Path
) -> None:
    """The fault campaign on hosts that outlive a run (this machine, an SSH host, and a third-party package's
    provider installed as a plug-in): `kill -9` of the orchestrator right after each of its ledger writes (before
    the launch, after it, after preparing the host, getting the image, starting and finishing a workload, tearing
    down), then one sweep. Each time: no container, no run folder on the host, the run final in the ledger, every
    epoch a finished workload wrote kept here, and no traceback anywhere."""
    image = build_mechanics_image(tmp_path / "mechanics")
    selection = ["--workloads", "mnist_mlp", "--backends", "torch", "--image", image, "--image-source", "present"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    provider, profile = {"local": ("local", "local"), "ssh": ("ssh", "ssh"), "plugin": ("outsidecloud", "outside-cpu")}[
        where
    ]
    if where == "plugin":
        site = tmp_path / "site"
        site.mkdir()
        install_outside_package(site)
        (tmp_path / "outside.toml").write_text(PLUGIN_CATALOG)
        env["PYTHONPATH"] = f"{site}:{ROOT}"
        selection += ["--catalog", str(tmp_path / "outside.toml")]
    writes = 8  # starting, launched, host recorded, running, workload started, workload done, teardown, final
    for after in range(1, writes + 1):
        run_id = f"20260101T000000Z-k{after}{where[0]}"
        if where == "local":
            args = ["run", "--profile", "local", "--logs", str(ws.logs), "--ledger", str(ws.ledger), "--run-id",
                    run_id, "--remote-dir", str(ws.remote_dir), "--plain", *selection]  # fmt: skip
        else:
            args = ssh_run_args(sshd, ws, run_id, *selection)
            args[args.index("--profile") + 1] = profile
        output = tmp_path / f"{run_id}.out"
        with output.open("wb") as handle:
            process = subprocess.Popen(
                [sys.executable, "-m", "orchestrate", *args], cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT, env=env
            )
        try:
            wait_for(partial(_written_or_ended, ws.ledger, run_id, after, process), 120, run_id, interval=0.01)
            process.kill()
            process.wait(timeout=30)
            swept = subprocess.run(
                [sys.executable, "-m", "orchestrate", "sweep", "--provider", provider, "--ledger", str(ws.ledger)],
                cwd=ROOT, capture_output=True, text=True, env=env, timeout=120,
            )  # fmt: skip
        finally:
            leftovers = containers_of_run(run_id)
            remove_containers_of_run(run_id)
        said = output.read_text() + swept.stdout + swept.stderr
        assert swept.returncode == 0 and "Traceback" not in said, said
        record = ws.run_record(run_id)
        assert (leftovers, record.final) == ([], True), (after, record.status, said)
        if after >= 6:  # killed once its one workload had finished: the run did what it was asked
            assert record.status == "complete", (after, record.message)
        assert not (ws.remote_dir / "runs" / run_id).exists(), after
        for item in record.latest_items():
            if item.status == "complete":  # its epoch is here, whoever pulled it
                csv = ws.run_logs(profile, run_id) / f"{item.workload}_{item.backend}.csv"
                assert csv.read_text().endswith("1,1.0\n"), (after, csv)


def test_a_run_whose_stdout_closes_before_its_summary_ends_as_the_run_did(ws: Workspace, tmp_path: Path) -> None:
    """The reader of stdout leaves mid-run (`| head`): the summary at the end has nowhere to go, which is no error:
    no traceback, and the exit status is the run's."""
    image = build_mechanics_image(tmp_path / "mechanics")
    run_id = "20260101T000000Z-sout"
    args = ["run", "--profile", "local", "--logs", str(ws.logs), "--ledger", str(ws.ledger), "--run-id", run_id]
    args += ["--remote-dir", str(ws.remote_dir), "--plain", "--workloads", "mnist_mlp", "--backends", "torch"]
    args += ["--image", image, "--image-source", "present"]
    with (tmp_path / "stderr.txt").open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "orchestrate", *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
    try:
        wait_for(lambda: [i["status"] for i in ledger_items(ws.ledger, run_id)] == ["running"], 120, "the workload")
        assert process.stdout is not None
        process.stdout.close()
        code = process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
        remove_containers_of_run(run_id)
    errors = (tmp_path / "stderr.txt").read_text()
    assert (code, ws.run_record(run_id).status) == (0, "complete") and "Traceback" not in errors, errors
