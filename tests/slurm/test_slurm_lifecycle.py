"""The Slurm provider's whole lifecycle on a real one-node cluster (munge, slurmctld, slurmd on loopback), reached
over SSH through the test sshd's alias: a job array of the quick suite in the real CPU image, a failing task, a
requeue (`scontrol requeue`) as a preemption, `kill -9` of the orchestrator then `sweep`, and billing from the job
records. The mechanics tests run a purpose-built image (conftest.TASK_IMAGE) that benchmarks nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.logs import STATUS_COMPLETE, metadata_path, read_epoch_log
from benchmarks.metadata import RunMetadata
from benchmarks.workload_set import sha256_of
from records.ledger import read_runs
from tests.orchestrate.orchestrate_helpers import ROOT, TINY, Workspace, wait_for
from tests.slurm.conftest import PRICE_PER_NODE_HOUR, PROFILE, SECOND_PROFILE, SlurmSite
from tests.slurm.helpers import orchestrate, run_args, run_folder, slurm_env
from tests.support.datasets import prefill_keras_cache, tiny_mlp_data
from tests.support.docker import build_cpu_image, containers_of_run, remove_containers_of_run

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.sshd]


def start(site: SlurmSite, output, *args: str, umask: int = -1) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrate", *args],
        cwd=ROOT,
        env=slurm_env(site),
        stdout=output.open("wb"),
        stderr=subprocess.STDOUT,
        umask=umask,
    )


def tasks_of(site: SlurmSite, run_id: str) -> dict[str, str]:
    """Array task id -> state, for the run's job, as squeue shows it now."""
    out = site.cluster.command("squeue", "-h", "-r", "-n", f"kcb-{run_id}", "-o", "%K %T").stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


def job_id_of(ws: Workspace, run_id: str) -> str:
    """The run's Slurm job id, from its launch stage in the ledger (`job kcb-sshd:<id>, N tasks`)."""
    launch = next(stage for stage in read_runs(ws.ledger)[run_id].stages if stage.name == "launch")
    return launch.detail.split(",")[0].rsplit(":", 1)[1]


def slurm_records(site: SlurmSite, job: str) -> dict[str, tuple[float, float]]:
    """`kcb-sshd:<job>_<task>` -> (start, end), from Slurm's completion log (sacct where a cluster has accounting)."""
    records = {}
    for line in site.cluster.jobcomp_log.read_text().splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        if fields.get("ArrayJobId") == job:
            start, end = (dt.datetime.fromisoformat(fields[k]).timestamp() for k in ("StartTime", "EndTime"))
            records[f"kcb-sshd:{job}_{fields['ArrayTaskId']}"] = (start, end)
    return records


def collect(site: SlurmSite, ws: Workspace, run_id: str) -> subprocess.CompletedProcess[str]:
    setting = f"ssh_config={site.server.config_path}"
    return orchestrate(site, "collect", run_id, "--ledger", str(ws.ledger), "--provider-setting", setting)


def assert_nothing_left(site: SlurmSite, run_id: str) -> None:
    assert tasks_of(site, run_id) == {}
    assert not run_folder(site, run_id).exists()
    assert containers_of_run(run_id) == []


# ---- the quick suite, for real -----------------------------------------------------------------------------------

QUICK_RUN = "20260101T000000Z-slq1"
EXAMPLE = ROOT / "examples" / "workloads" / "tiny_mlp.py"


@pytest.fixture(scope="module")
def quick_run(slurm_site: SlurmSite, tmp_path_factory: pytest.TempPathFactory):
    image = build_cpu_image(tmp_path_factory.mktemp("image") / "image-cpu.log")
    ws = Workspace(tmp_path_factory.mktemp("quick"))
    prefill_keras_cache(slurm_site.shared_dir / "cache" / "keras")  # the cluster's dataset cache, shared by its runs
    data = tiny_mlp_data(tmp_path_factory.mktemp("mydata") / "data")  # the user's data, for the user's workload
    carried = ["--workload-file", str(EXAMPLE), "--data-dir", str(data)]
    args = run_args(slurm_site, ws, QUICK_RUN, "--workloads", "mnist_mlp,tiny_mlp", "--backends", "jax", *carried)
    try:
        yield ws, data, orchestrate(slurm_site, *args, "--repeats", "2", "--image", image, *TINY)
    finally:
        remove_containers_of_run(QUICK_RUN)


def test_quick_suite_runs_as_one_job_array(slurm_site: SlurmSite, quick_run) -> None:
    ws, _, done = quick_run
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Run {QUICK_RUN}: complete: all 4 batch tasks complete" in done.stdout
    record = read_runs(ws.ledger)[QUICK_RUN]
    assert sorted((i.workload, i.repeat, i.status, i.exit_code) for i in record.items) == [  # in the order they ran
        ("mnist_mlp", 1, "complete", 0),
        ("mnist_mlp", 2, "complete", 0),
        ("tiny_mlp", 1, "complete", 0),
        ("tiny_mlp", 2, "complete", 0),
    ]
    run_logs = ws.run_logs(PROFILE, QUICK_RUN)
    for repeat in (1, 2):
        # mnist.npz is not in this environment: the runner says so in the file name (as in tests/orchestrate)
        csv = run_logs / f"mnist_mlp_jax_synthetic.r{repeat:02d}.csv"
        log = read_epoch_log(csv)
        assert len(log.epochs) == 2 and all(epoch.elapsed > 0 for epoch in log.epochs)
        meta = json.loads(metadata_path(csv).read_text())
        assert meta["status"] == STATUS_COMPLETE and meta["platform"] == PROFILE and meta["run_id"] == QUICK_RUN
        assert meta["container"]["digest"].startswith("sha256:")  # read on the node by the task
    assert (run_logs / "orchestrate" / "mnist_mlp_jax.r01.console.log").stat().st_size > 0
    assert_nothing_left(slurm_site, QUICK_RUN)  # the carried workload file and data folder with the run's folder


def test_the_users_workload_file_trains_on_the_users_data_on_the_cluster(slurm_site: SlurmSite, quick_run) -> None:
    ws, _, done = quick_run
    assert done.returncode == 0, done.stdout + done.stderr
    record = read_runs(ws.ledger)[QUICK_RUN]
    launch = next(stage for stage in record.stages if stage.name == "launch")
    assert "payload 3 file(s)" in launch.detail  # the workload file and the data folder, carried before sbatch
    for repeat in (1, 2):  # no _synthetic in the name: each task read tiny_mlp.npz from the carried folder
        path = ws.run_logs(PROFILE, QUICK_RUN) / f"tiny_mlp_jax.r{repeat:02d}.json"
        meta = RunMetadata.from_dict(json.loads(path.read_text()))
        assert meta.status == STATUS_COMPLETE and meta.plugin is not None
        assert (meta.plugin.file, meta.plugin.sha256) == ("tiny_mlp.py", sha256_of(EXAMPLE))
        assert (meta.data.source, meta.data.files, meta.data.train_samples) == ("real", [{"name": "tiny_mlp.npz"}], 500)
        assert meta.run_spec is not None and (meta.run_spec.sha256, meta.run_spec.payload_files) == (record.spec, 3)


def test_quick_suite_is_billed_from_the_job_records(slurm_site: SlurmSite, quick_run) -> None:
    ws, _, _ = quick_run
    record = read_runs(ws.ledger)[QUICK_RUN]
    slurm = slurm_records(slurm_site, job_id_of(ws, QUICK_RUN))
    assert len(slurm) == 4
    assert {i.instance_id: (i.launched_at, i.terminated_at) for i in record.instances} == slurm
    for instance in record.instances:
        seconds = (instance.terminated_at or 0) - instance.launched_at
        assert seconds > 0 and instance.billed_seconds == round(seconds)
        assert instance.cost_usd == pytest.approx(seconds * PRICE_PER_NODE_HOUR / 3600)
    assert record.estimated_cost_usd == pytest.approx(sum(i.cost_usd or 0 for i in record.instances))


# ---- mechanics: a failing task, a requeue -------------------------------------------------------------------------

REQUEUE_RUN = "20260101T000000Z-slr1"


def test_a_failing_task_and_a_requeue(slurm_site: SlurmSite, task_image: str, tmp_path) -> None:
    ws = Workspace(tmp_path)
    args = run_args(
        slurm_site, ws, REQUEUE_RUN, "--workloads", "mnist_mlp,imdb_fasttext,cifar10_cnn", "--backends", "jax"
    )
    process = start(slurm_site, tmp_path / "out.txt", *args, "--image", task_image)
    try:
        folder = run_folder(slurm_site, REQUEUE_RUN)
        wait_for(lambda: (folder / "tasks" / "0.exit").exists(), 90, "mnist_mlp's task to end")
        wait_for(lambda: (folder / "logs" / "starts-cifar10_cnn").exists(), 90, "cifar10_cnn's container to run")
        job = job_id_of(ws, REQUEUE_RUN)
        slurm_site.cluster.command("scontrol", "requeue", job)  # the whole array, ended tasks included
        assert process.wait(timeout=180) == 1, (tmp_path / "out.txt").read_text()
    finally:
        if process.poll() is None:
            process.kill()
        remove_containers_of_run(REQUEUE_RUN)
    out = (tmp_path / "out.txt").read_text()
    assert "1 of 3 batch tasks failed: imdb_fasttext [jax] (failed)" in out
    assert "cifar10_cnn [jax]: requeued by the scheduler (a preemption)" in out
    record = read_runs(ws.ledger)[REQUEUE_RUN]
    latest = {i.workload: i for i in record.latest_items()}
    assert (latest["mnist_mlp"].status, latest["mnist_mlp"].attempt) == ("complete", 1)
    assert (latest["imdb_fasttext"].status, latest["imdb_fasttext"].exit_code) == ("failed", 1)
    assert (latest["cifar10_cnn"].status, latest["cifar10_cnn"].attempt) == ("complete", 2)
    assert record.preemptions == 1
    # finished items never ran again; the preempted one ran twice, its first attempt's files kept aside
    assert (ws.logs / "starts-mnist_mlp").read_text().count("start") == 1
    assert (ws.logs / "starts-imdb_fasttext").read_text().count("start") == 1
    assert (ws.logs / "starts-cifar10_cnn").read_text().count("start") == 2
    run_logs = ws.run_logs(PROFILE, REQUEUE_RUN)
    kept = json.loads((run_logs / "preempted" / "attempt-1" / "cifar10_cnn_jax.json").read_text())
    assert kept["status"] in ("running", "partial")
    assert json.loads((run_logs / "cifar10_cnn_jax.json").read_text())["status"] == "complete"
    # billed from the job records (the completion log here): every attempt of every task, the requeued ones too
    job = job_id_of(ws, REQUEUE_RUN)
    billed = {i.instance_id.split(":", 1)[1]: i for i in record.instances}
    assert {f"{job}_{task}" for task in range(3)} | {f"{job}_2 (attempt 1)"} <= set(billed)
    assert billed[f"{job}_2 (attempt 1)"].preempted
    for instance in record.instances:
        seconds = (instance.terminated_at or 0) - instance.launched_at
        assert instance.cost_usd == pytest.approx(seconds * PRICE_PER_NODE_HOUR / 3600)
    assert_nothing_left(slurm_site, REQUEUE_RUN)


# ---- kill -9, then the sweep --------------------------------------------------------------------------------------

KILLED_RUN = "20260101T000000Z-slk1"


def test_a_killed_orchestrator_leaves_nothing_after_sweep(slurm_site: SlurmSite, task_image: str, tmp_path) -> None:
    ws = Workspace(tmp_path)
    args = run_args(slurm_site, ws, KILLED_RUN, "--workloads", "lstm_text_generation", "--backends", "jax")
    process = start(slurm_site, tmp_path / "out.txt", *args, "--image", task_image)
    try:
        wait_for(lambda: tasks_of(slurm_site, KILLED_RUN).get("0") == "RUNNING", 90, "the task to run")
        wait_for(lambda: containers_of_run(KILLED_RUN), 60, "the task's container")
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        assert tasks_of(slurm_site, KILLED_RUN) == {"0": "RUNNING"}  # nobody tore it down
        collected = collect(slurm_site, ws, KILLED_RUN)  # leaves a running job alone: the sweep still finds it
        assert collected.returncode == 0, collected.stdout + collected.stderr
        assert "still has 1 of 1 tasks queued or running" in collected.stdout
        assert tasks_of(slurm_site, KILLED_RUN) == {"0": "RUNNING"}
        sweep = ("sweep", "--ledger", str(ws.ledger), "--provider", "slurm")
        setting = ("--provider-setting", f"slurm:ssh_config={slurm_site.server.config_path}")
        dry = orchestrate(slurm_site, *sweep, *setting, "--dry-run")  # the job still queued: said, not billed
        assert dry.returncode == 0, dry.stdout + dry.stderr
        assert "would delete slurm kcb-sshd:" in dry.stdout and f"(run {KILLED_RUN})" in dry.stdout
        assert tasks_of(slurm_site, KILLED_RUN) == {"0": "RUNNING"}
        done = orchestrate(slurm_site, *sweep, *setting)
    finally:
        if process.poll() is None:
            process.kill()
        remove_containers_of_run(KILLED_RUN)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"run {KILLED_RUN}" in done.stdout
    wait_for(lambda: not containers_of_run(KILLED_RUN), 30, "the container to stop")
    assert_nothing_left(slurm_site, KILLED_RUN)
    record = read_runs(ws.ledger)[KILLED_RUN]
    assert record.final
    job = record.instances[0]  # billed from its submission to its cancellation by the sweep, as one allocation
    assert job.terminated_at is not None
    assert job.billed_seconds == math.ceil(job.terminated_at - job.launched_at)  # billed per second
    assert job.cost_usd == pytest.approx(job.billed_seconds * PRICE_PER_NODE_HOUR / 3600)


# ---- kill -9, then collect ------------------------------------------------------------------------------------------

COLLECT_RUN = "20260101T000000Z-slc1"


def test_collect_after_a_killed_orchestrator_pulls_records_and_bills_the_run(
    slurm_site: SlurmSite, task_image: str, tmp_path
) -> None:
    ws = Workspace(tmp_path)
    args = run_args(slurm_site, ws, COLLECT_RUN, "--workloads", "mnist_mlp,mnist_cnn", "--backends", "jax")
    process = start(slurm_site, tmp_path / "out.txt", *args, "--image", task_image)
    folder = run_folder(slurm_site, COLLECT_RUN)
    run_logs = ws.run_logs(PROFILE, COLLECT_RUN)
    try:
        wait_for(lambda: (folder / "tasks" / "0.exit").exists(), 90, "mnist_mlp's task to end")
        wait_for(lambda: (folder / "logs" / "starts-mnist_cnn").exists(), 90, "mnist_cnn's container to run")
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        before = read_runs(ws.ledger)[COLLECT_RUN]
        assert before.status == "running"

        running = collect(slurm_site, ws, COLLECT_RUN)
        assert running.returncode == 0, running.stdout + running.stderr
        assert "still has 1 of 2 tasks queued or running" in running.stdout
        assert "mnist_mlp [jax]: complete, exit 0" in running.stdout and "mnist_cnn [jax]: running" in running.stdout
        # the finished task's files, byte for byte as the shared folder holds them (what an attached run pulls)
        remote = folder / "logs" / PROFILE / COLLECT_RUN
        for name in ("mnist_mlp_jax.csv", "mnist_mlp_jax.json", "orchestrate/mnist_mlp_jax.console.log"):
            assert (run_logs / name).read_bytes() == (remote / name).read_bytes(), name
        assert json.loads((run_logs / "mnist_mlp_jax.json").read_text())["status"] == "complete"
        assert json.loads((run_logs / "mnist_cnn_jax.json").read_text())["status"] == "running"  # partial so far
        assert read_runs(ws.ledger)[COLLECT_RUN] == before  # a running job's ledger entry is left alone
        assert tasks_of(slurm_site, COLLECT_RUN) == {"1": "RUNNING"}  # and the job too

        (folder / "logs" / "release-mnist_cnn").touch()
        wait_for(lambda: tasks_of(slurm_site, COLLECT_RUN) == {}, 60, "the job to end")
        done = collect(slurm_site, ws, COLLECT_RUN)
    finally:
        if process.poll() is None:
            process.kill()
        remove_containers_of_run(COLLECT_RUN)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "has ended: complete, billed from the job records; its folder on the cluster removed" in done.stdout
    record = read_runs(ws.ledger)[COLLECT_RUN]
    assert (record.status, record.recovered_by) == ("complete", "collect")
    assert record.message == "all 2 batch tasks complete"
    assert [(i.workload, i.status, i.exit_code) for i in record.latest_items()] == [
        ("mnist_mlp", "complete", 0),
        ("mnist_cnn", "complete", 0),
    ]
    assert json.loads((run_logs / "mnist_cnn_jax.json").read_text())["status"] == "complete"
    assert (run_logs / "mnist_cnn_jax.csv").read_text() == (run_logs / "mnist_mlp_jax.csv").read_text()
    # billed from Slurm's own records of the array, one allocation per task
    slurm = slurm_records(slurm_site, job_id_of(ws, COLLECT_RUN))
    assert len(slurm) == 2
    assert {i.instance_id: (i.launched_at, i.terminated_at) for i in record.instances} == slurm
    for instance in record.instances:
        seconds = (instance.terminated_at or 0) - instance.launched_at
        assert instance.cost_usd == pytest.approx(seconds * PRICE_PER_NODE_HOUR / 3600)
    assert record.estimated_cost_usd == pytest.approx(sum(i.cost_usd or 0 for i in record.instances))
    assert json.loads((run_logs / "orchestrate" / "run.json").read_text())["status"] == "complete"
    assert_nothing_left(slurm_site, COLLECT_RUN)

    ledger = ws.ledger.read_bytes()
    files = {path: path.stat().st_mtime_ns for path in ws.logs.rglob("*")}
    again = collect(slurm_site, ws, COLLECT_RUN)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "its ledger entry is final (complete): nothing to collect" in again.stdout
    assert ws.ledger.read_bytes() == ledger
    assert {path: path.stat().st_mtime_ns for path in ws.logs.rglob("*")} == files


# ---- fan-out over partitions ----------------------------------------------------------------------------------------

FANOUT_RUN = "20260101T000000Z-slf1"


def worst_cases(estimate: str) -> dict[str, str]:
    """The estimate table's "worst case" column, by row: the cell under the header's words."""
    lines = estimate.splitlines()
    header = next(line for line in lines if line.split()[:1] == ["profile"])
    start = header.index("worst case")
    rows = [line for line in lines[lines.index(header) + 1 :] if line.startswith("  ") and len(line) > start]
    return {line.split()[0]: line[start : start + len("worst case")].strip() for line in rows if "$" in line}


def test_a_fanout_over_two_partitions_gives_one_estimate_and_one_table(
    slurm_site: SlurmSite, task_image: str, tmp_path
) -> None:
    ws = Workspace(tmp_path)
    args = run_args(slurm_site, ws, FANOUT_RUN, "--workloads", "mnist_mlp", "--backends", "jax")
    args[args.index("--profile") : args.index("--profile") + 2] = ["--profiles", f"{PROFILE},{SECOND_PROFILE}"]
    done = orchestrate(slurm_site, *args, "--image", task_image, "--report-out", str(tmp_path / "report"))
    out = done.stdout
    estimate = out[: out.index("Plan for run")]
    assert f"Fan-out of suite quick on 2 profiles, run ids {FANOUT_RUN}-<profile>" in estimate
    # each partition's price at --max-lifetime (a mnist_mlp run on these nodes has no estimate yet), and their sum
    assert worst_cases(estimate) == {PROFILE: "$2.00", SECOND_PROFILE: "$4.00", "total": "$6.00"}
    table = out[out.index(f"Fan-out {FANOUT_RUN}: 2 profiles") :]
    for profile in (PROFILE, SECOND_PROFILE):
        assert any(line.split()[:2] == [profile, "complete"] for line in table.splitlines()), table
        record = read_runs(ws.ledger)[f"{FANOUT_RUN}-{profile}"]
        assert record.provider == "slurm" and record.estimated_cost_usd is not None
        assert_nothing_left(slurm_site, f"{FANOUT_RUN}-{profile}")
    assert (tmp_path / "report" / "fanout.md").is_file()


# ---- validation before anything is submitted; teardown on SIGTERM ----------------------------------------------------


def test_a_partition_the_cluster_lacks_stops_the_run_before_sbatch(slurm_site: SlurmSite, tmp_path) -> None:
    catalog = tmp_path / "bad.toml"
    text = slurm_site.catalog.read_text().split("\n\n")[0]  # the first profile, renamed, on a partition that is not
    catalog.write_text(text.replace(f"[profiles.{PROFILE}", "[profiles.testcluster-none").replace('"debug"', '"none"'))
    ws = Workspace(tmp_path)
    args = run_args(slurm_site, ws, "20260101T000000Z-slv1", "--workloads", "mnist_mlp", "--backends", "jax")
    args[args.index(PROFILE)] = "testcluster-none"
    done = orchestrate(slurm_site, *args, "--catalog", str(catalog), "--image", "kcb-test/none:latest")
    assert done.returncode != 0
    assert "extra.partition: kcb-sshd has no partition 'none'" in done.stdout + done.stderr
    assert slurm_site.queue() == []
    assert not (slurm_site.shared_dir / "runs" / "20260101T000000Z-slv1").exists()


TERM_RUN = "20260101T000000Z-slt1"


def test_sigterm_cancels_the_array_and_keeps_the_partial_logs(slurm_site: SlurmSite, task_image: str, tmp_path) -> None:
    ws = Workspace(tmp_path)
    args = run_args(slurm_site, ws, TERM_RUN, "--workloads", "lstm_text_generation", "--backends", "jax")
    process = start(slurm_site, tmp_path / "out.txt", *args, "--image", task_image)
    try:
        wait_for(lambda: containers_of_run(TERM_RUN), 90, "the task's container")
        setting = f"ssh_config={slurm_site.server.config_path}"
        status = orchestrate(slurm_site, "status", TERM_RUN, "--ledger", str(ws.ledger), "--provider-setting", setting)
        assert status.returncode == 0, status.stdout + status.stderr
        assert f"task 0      kcb-sshd:{job_id_of(ws, TERM_RUN)}: running" in status.stdout  # read from scontrol
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=120) == 130, (tmp_path / "out.txt").read_text()
    finally:
        if process.poll() is None:
            process.kill()
        remove_containers_of_run(TERM_RUN)
    assert f"cancelled slurm job kcb-sshd:{job_id_of(ws, TERM_RUN)} (every task)" in (tmp_path / "out.txt").read_text()
    record = read_runs(ws.ledger)[TERM_RUN]
    assert record.status == "interrupted"
    assert [i.status for i in record.items] == ["interrupted"]
    partial = json.loads((ws.run_logs(PROFILE, TERM_RUN) / "lstm_text_generation_jax.json").read_text())
    assert partial["status"] == "partial"  # the container was stopped, not killed: the runner recorded it
    assert_nothing_left(slurm_site, TERM_RUN)


# ---- a shared cluster: who reads a run's files -----------------------------------------------------------------------

PRIVATE_RUN = "20260101T000000Z-slp1"


def readable_by_nobody(path: Path) -> bool:
    """Whether the unprivileged user `nobody` can read the file or list the folder."""
    return subprocess.run(["runuser", "-u", "nobody", "--", "test", "-r", str(path)], timeout=30).returncode == 0


def test_another_user_reads_no_file_of_a_run(slurm_site: SlurmSite, task_image: str, tmp_path) -> None:
    """Mid-run, with the orchestrator's umask 000: the run's folder on the shared file system and everything in it
    (the batch script, run.json, the user's workload file and data, the Slurm logs, the finished item's files) is
    the user's alone, folders 0700 and files 0600, and another user (`nobody`) reads none of it."""
    if subprocess.run(["id", "nobody"], capture_output=True).returncode != 0:
        pytest.skip("no user `nobody` to read as")
    ws = Workspace(tmp_path)
    data = tiny_mlp_data(tmp_path / "mydata" / "data")  # the user's own data, private at home
    (data / "tiny_mlp.npz").chmod(0o600)
    carried = ["--workload-file", str(EXAMPLE), "--data-dir", str(data)]
    args = run_args(slurm_site, ws, PRIVATE_RUN, "--workloads", "mnist_mlp,tiny_mlp", "--backends", "jax", *carried)
    folder = run_folder(slurm_site, PRIVATE_RUN)
    # As on a cluster's scratch: every user can reach the shared folder, and runs/ was made under a wide umask.
    folder.parent.mkdir(exist_ok=True)
    folder.parent.chmod(0o755)
    reachable = {path: path.stat().st_mode for path in folder.parent.parents if not path.stat().st_mode & 0o001}
    for path, mode in reachable.items():
        path.chmod(mode | 0o001)
    process = start(slurm_site, tmp_path / "out.txt", *args, "--image", task_image, umask=0)
    try:
        wait_for(lambda: (folder / "tasks" / "0.exit").exists(), 90, "mnist_mlp's task to end")
        wait_for(lambda: (folder / "logs" / "starts-tiny_mlp").exists(), 90, "tiny_mlp's container to run")
        found = [folder, *folder.rglob("*")]
        names = {path.relative_to(folder).as_posix() for path in found}
        carried = {"payload/workloads/tiny_mlp.py", "payload/data/tiny_mlp.npz"}
        assert {"job.sh", "run.json", "tasks/0.exit", *carried} <= names
        assert any(name.endswith("/mnist_mlp_jax.csv") for name in names), names
        assert [path for path in found if readable_by_nobody(path)] == []
        wide = [path for path in found if path.stat().st_mode & 0o077]
        # only what tiny_mlp's container (Docker's umask 022) is still writing, closed as its task ends
        assert all("tiny_mlp" in path.name for path in wide), wide
        assert all(path.stat().st_mode & 0o777 == 0o700 for path in found if path.is_dir())
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=120) == 130, (tmp_path / "out.txt").read_text()
    finally:
        if process.poll() is None:
            process.kill()
        remove_containers_of_run(PRIVATE_RUN)
        for path, mode in reachable.items():
            path.chmod(mode)
    assert (data / "tiny_mlp.npz").stat().st_mode & 0o777 == 0o600  # the user's own file, as it was
    assert_nothing_left(slurm_site, PRIVATE_RUN)


# ---- --detach: submitted and left to run ----------------------------------------------------------------------------

DETACHED_RUN = "20260101T000000Z-sld1"


def test_a_detached_run_is_submitted_left_alone_by_the_sweep_then_collected(
    slurm_site: SlurmSite, task_image: str, tmp_path
) -> None:
    """`run --detach` returns once the array is queued; the sweep keeps the job (no orchestrator follows it, by
    design); `collect` after the job ended records, bills and finalises the run and removes its folder."""
    ws = Workspace(tmp_path)
    args = run_args(slurm_site, ws, DETACHED_RUN, "--workloads", "mnist_mlp,mnist_cnn", "--backends", "jax")
    folder = run_folder(slurm_site, DETACHED_RUN)
    try:
        launched = orchestrate(slurm_site, *args, "--image", task_image, "--detach", timeout=120)
        assert launched.returncode == 0, launched.stdout + launched.stderr
        assert f"Run {DETACHED_RUN}: detached as slurm job kcb-sshd:" in launched.stdout
        record = read_runs(ws.ledger)[DETACHED_RUN]
        assert (record.status, record.pid) == ("detached", 0)
        wait_for(lambda: (folder / "logs" / "starts-mnist_cnn").exists(), 90, "mnist_cnn's container to run")
        setting = ("--provider-setting", f"slurm:ssh_config={slurm_site.server.config_path}")
        swept = orchestrate(slurm_site, "sweep", "--ledger", str(ws.ledger), "--provider", "slurm", *setting)
        assert swept.returncode == 0, swept.stdout + swept.stderr
        assert f"detached run {DETACHED_RUN} works on its own" in swept.stdout
        (folder / "logs" / "release-mnist_cnn").touch()
        wait_for(lambda: tasks_of(slurm_site, DETACHED_RUN) == {}, 60, "the job to end")
        done = collect(slurm_site, ws, DETACHED_RUN)
    finally:
        remove_containers_of_run(DETACHED_RUN)
    assert done.returncode == 0, done.stdout + done.stderr
    record = read_runs(ws.ledger)[DETACHED_RUN]
    assert (record.status, record.recovered_by) == ("complete", "collect")
    assert [(i.workload, i.status) for i in record.latest_items()] == [
        ("mnist_mlp", "complete"),
        ("mnist_cnn", "complete"),
    ]
    assert record.estimated_cost_usd is not None and record.billed_seconds > 0
    assert_nothing_left(slurm_site, DETACHED_RUN)
