"""The job array's script and sbatch flags for every runtime, and the profile's validation, without a cluster.

Apptainer/Singularity and enroot+pyxis cannot be installed here: their command lines are checked (and the whole
script parsed by bash), never run. docker runs for real in test_slurm_lifecycle.py.
"""

from __future__ import annotations

import shlex
import subprocess

import pytest

from orchestrate.batch import item_of_label
from orchestrate.data_dir import read_data_dir
from orchestrate.plan import WorkItem
from orchestrate.provider import ProviderError
from orchestrate.providers.slurm import TASK_LINE
from orchestrate.providers.slurm.script import batch_script, sbatch_flags
from orchestrate.providers.slurm.settings import settings_of, slurm_time
from orchestrate.workload_files import run_workloads
from records.catalog import Price, Profile
from tests.orchestrate.orchestrate_helpers import ROOT, plan_on_image
from tests.support.datasets import tiny_mlp_data

RUN_ID = "20260101T000000Z-scr1"
IMAGE = "ghcr.io/example/keras-cloud-bench:gpu"
EXTRA = {"login": "me@hpc-login", "partition": "a100", "shared_dir": "/scratch/me/kcb"}
VENV = {"venv": "/scratch/me/kcb-venv", "source_dir": "/scratch/me/keras-cloud-bench"}
RUNTIMES = ["docker", "podman", "apptainer", "singularity", "pyxis", "venv"]


def gpu_profile(**extra: str) -> Profile:
    return Profile(
        name="hpc-a100",
        provider="slurm",
        machine_type=None,
        accelerator="a100",
        accelerator_count=2,
        docker_image="gpu",
        on_demand=Price(1.5, "2026-11-01", "centre rate sheet"),
        extra={**EXTRA, **extra},
    )


def script_for(tmp_path, runtime: str, **extra: str) -> str:
    profile = gpu_profile(runtime=runtime, **extra)
    items = (WorkItem("mnist_mlp", "jax", 1), WorkItem("mnist_mlp", "jax", 2))
    plan = plan_on_image(tmp_path, IMAGE, RUN_ID, items, provider="slurm", profile=profile, platform="hpc-a100")
    return batch_script(settings_of(profile), RUN_ID, plan.spec)


@pytest.mark.parametrize("runtime", ["docker", "podman", "apptainer", "singularity", "pyxis", "venv"])
def test_every_runtime_gives_a_script_bash_parses(tmp_path, runtime: str) -> None:
    extra = {"venv": "/scratch/me/kcb-venv", "source_dir": "/scratch/me/keras-cloud-bench"} if runtime == "venv" else {}
    script = tmp_path / "job.sh"
    script.write_text(script_for(tmp_path, runtime, **extra))
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    text = script.read_text()
    assert text.count("finish $?") == 2  # one case per task, each ending in its exit record
    assert 'if [ -e "$RUN/tasks/$TASK.exit" ]' in text  # a requeued task never reruns an ended item
    assert "keep_partial mnist_mlp_jax.r02.csv mnist_mlp_jax.r02.json mnist_mlp_jax_synthetic.r02.csv" in text


def _line(script: str, start: str) -> list[str]:
    line = next(line.strip() for line in script.splitlines() if line.strip().startswith(start))
    return shlex.split(line.split(" >> ")[0])


def test_apptainer_command_line(tmp_path) -> None:
    words = _line(script_for(tmp_path, "apptainer"), "apptainer exec")
    assert words[:4] == ["apptainer", "exec", "--cleanenv", "--containall"]
    assert "--nv" in words  # the allocation's GPUs
    assert words[words.index("--bind") + 1] == "$LOGS:/logs,$CACHE:/data/keras"
    image = words.index(f"docker://{IMAGE}")
    assert words[image + 1 : image + 5] == ["python", "-m", "benchmarks", "mnist_mlp"]
    assert words[words.index("--out") + 1] == "/logs"


def test_singularity_is_the_same_command(tmp_path) -> None:
    assert (
        _line(script_for(tmp_path, "singularity"), "singularity exec")[1:]
        == _line(script_for(tmp_path, "apptainer"), "apptainer exec")[1:]
    )


def test_pyxis_command_line(tmp_path) -> None:
    words = _line(script_for(tmp_path, "pyxis"), "env ")
    srun = words.index("srun")
    assert words[srun : srun + 3] == ["srun", "--ntasks=1", f"--container-image={IMAGE}"]
    assert "--container-mounts=$LOGS:/logs,$CACHE:/data/keras" in words
    # the environment srun passes into the container, the run's spec among it
    passed = words[words.index("--container-env=HOME,KERAS_HOME,BENCH_IMAGE_DIGEST,BENCH_RUN_SPEC")].split("=")[1]
    assert [word.split("=")[0] for word in words[1:srun]] == passed.split(",")
    assert words[words.index("python") : words.index("python") + 4] == ["python", "-m", "benchmarks", "mnist_mlp"]


def test_venv_runs_the_runner_from_the_lock_file_and_writes_to_the_run_folder(tmp_path) -> None:
    script = script_for(tmp_path, "venv", venv="/scratch/me/kcb-venv", source_dir="/scratch/me/keras-cloud-bench")
    assert "-r /scratch/me/keras-cloud-bench/requirements/bench-gpu.lock" in script
    words = shlex.split(next(line for line in script.splitlines() if "exec /scratch" in line).split(" ) >> ")[0])
    assert words[words.index("--out") + 1] == "$LOGS"


def test_docker_command_line(tmp_path) -> None:
    words = _line(script_for(tmp_path, "docker"), "docker run")
    assert words[words.index("--name") + 1] == f"{RUN_ID}-mnist_mlp-jax-r1"  # the name every mode gives it
    assert words[words.index("--gpus") : words.index("--gpus") + 2] == ["--gpus", "all"]
    assert f"run-id={RUN_ID}" in words and "project=keras-cloud-bench" in words


def test_sbatch_flags_carry_the_profile_and_the_run(tmp_path) -> None:
    profile = gpu_profile(cpus="8", mem="64G", account="proj1", time="02:00:00")
    plan = plan_on_image(tmp_path, IMAGE, RUN_ID, (WorkItem("mnist_mlp", "jax"),), provider="slurm", profile=profile)
    tags = {"project": "keras-cloud-bench", "run-id": RUN_ID, "owner": "me@box"}
    flags = sbatch_flags(settings_of(profile), RUN_ID, tags, plan.spec, slurm_time(4 * 3600))
    for flag in (
        f"--job-name=kcb-{RUN_ID}",
        f"--comment=owner=me@box,project=keras-cloud-bench,run-id={RUN_ID}",
        "--array=0-0",
        "--partition=a100",
        "--gres=gpu:a100:2",
        "--cpus-per-task=8",
        "--mem=64G",
        "--account=proj1",
        "--time=02:00:00",
        "--requeue",
    ):
        assert flag in flags
    gpus = sbatch_flags(settings_of(gpu_profile(gpu_flag="gpus")), RUN_ID, tags, plan.spec, "0-04:00:00")
    assert "--gpus=a100:2" in gpus and "--time=0-04:00:00" in gpus


def test_time_limit_defaults_to_the_max_lifetime() -> None:
    assert slurm_time(4 * 3600) == "0-04:00:00"
    assert slurm_time(61) == "0-00:02:00"
    assert slurm_time(2 * 86400) == "2-00:00:00"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"partition": ""}, "extra.partition: required"),
        ({"runtime": "lxc"}, "extra.runtime: 'lxc' is not one of"),
        ({"mem": "lots"}, "extra.mem: 'lots' is not a Slurm memory size"),
        ({"time": "2h"}, "extra.time: '2h' is not a Slurm time"),
        ({"cpus": "0"}, "extra.cpus: '0' is not a positive whole number"),
        ({"cpus": "²"}, "extra.cpus: '²' is not a positive whole number"),  # a digit to str.isdigit, not to int
        ({"mem": "64G\n"}, "extra.mem: '64G\\\\n' is not a Slurm memory size"),
        ({"shared_dir": "scratch"}, "extra.shared_dir: 'scratch' must be an absolute path"),
        ({"runtime": "venv"}, "extra.venv: runtime venv needs"),
        ({"price_unit": "core-hour"}, "extra.price_unit: 'core-hour' is not one of"),
        ({"partition": "a100; rm"}, "extra.partition: 'a100; rm' is not a Slurm name"),
        ({"colour": "red"}, "extra.colour: unknown Slurm setting"),
    ],
)
def test_a_bad_profile_is_one_line_naming_the_field(extra: dict[str, str], message: str) -> None:
    with pytest.raises(ProviderError, match=r"^profile 'hpc-a100': " + message.replace("(", r"\(")):
        settings_of(gpu_profile(**extra))


def test_a_gpu_hour_price_bills_each_task_for_its_gpus() -> None:
    from orchestrate.providers.slurm import SlurmProvider

    provider = SlurmProvider()
    per_task = provider.allocation_price(gpu_profile(price_unit="gpu-hour"))
    assert per_task.on_demand is not None and per_task.on_demand.usd_per_hour == 3.0  # 2 GPUs x $1.50
    assert per_task.on_demand.date == "2026-11-01" and "(x2 GPUs)" in per_task.on_demand.source
    assert per_task.cost_usd(3600) == 3.0
    node_hour = gpu_profile(price_unit="node-hour")
    assert provider.allocation_price(node_hour) == node_hour


def test_job_records_parse_as_slurm_prints_them() -> None:
    from orchestrate.providers.slurm.cluster import JobRecord, _exit_code, _task_ids

    assert _task_ids("3", 8) == [3] and _task_ids("0-4%2", 8) == [0, 1, 2, 3, 4]
    assert _task_ids("1,3-5", 5) == [1, 3, 4]  # ids past the array's size are not this run's
    assert (_exit_code("0:0"), _exit_code("1:0"), _exit_code("0:15"), _exit_code("")) == (0, 1, 143, None)
    # the item's exit record decides how it ended, whatever Slurm says of the script
    ended = JobRecord(task=2, state="COMPLETED", exit_code=0, start=10.0, end=20.0)
    assert (ended.as_task(1).state, ended.as_task(1).exit_code) == ("failed", 1)
    assert ended.as_task(0).state == "complete" and ended.as_task(None).state == "failed"
    requeued = JobRecord(task=2, state="PENDING", restarts=1, start=10.0, end=20.0)
    assert (requeued.as_task(0).state, requeued.as_task(0).item_exit_code, requeued.as_task(0).ended_at) == (
        "pending",
        0,
        None,
    )
    cancelled = JobRecord(task=0, state="CANCELLED by 0", exit_code=0, start=1.0, end=2.0)
    assert cancelled.as_task(None).state == "cancelled"


@pytest.mark.parametrize("runtime", ["docker", "apptainer", "pyxis"])
def test_collect_reads_each_tasks_work_item_back_from_the_script(tmp_path, runtime: str) -> None:
    """`collect` after the orchestrator died knows the tasks only from job.sh: every runtime's script names them."""
    labels = TASK_LINE.findall(script_for(tmp_path, runtime))
    assert labels == [("0", "mnist_mlp [jax] #1"), ("1", "mnist_mlp [jax] #2")]
    assert [item_of_label(label) for _, label in labels] == [
        WorkItem("mnist_mlp", "jax", 1),
        WorkItem("mnist_mlp", "jax", 2),
    ]
    assert item_of_label(WorkItem("imdb_fasttext", "torch").label) == WorkItem("imdb_fasttext", "torch")


# ---- the user's workload file and data folder, carried beside the logs ----------------------------------------------


def carrying_script(tmp_path, runtime: str) -> str:
    """The script of a run of examples/workloads/tiny_mlp.py with a data folder, in `runtime`."""
    profile = gpu_profile(runtime=runtime, **(VENV if runtime == "venv" else {}))
    plan = plan_on_image(
        tmp_path, IMAGE, RUN_ID, (WorkItem("tiny_mlp", "jax"),), provider="slurm", profile=profile,
        workloads=run_workloads([ROOT / "examples" / "workloads" / "tiny_mlp.py"]),
        data_dir=read_data_dir(tiny_mlp_data(tmp_path / "mydata")),
    )  # fmt: skip
    return batch_script(settings_of(profile), RUN_ID, plan.spec)


def _runner_words(script: str, runtime: str) -> list[str]:
    """The words of the line that runs the item, as bash splits them (variables left unexpanded)."""
    if runtime == "venv":
        line = next(line for line in script.splitlines() if "exec /scratch" in line)
        return shlex.split(line.split(" ) >> ")[0].split("&& exec ", 1)[1])
    start = {"pyxis": "env ", "apptainer": "apptainer exec", "singularity": "singularity exec"}.get(runtime)
    return _line(script, start or f"{runtime} run")


MOUNTED = "$RUN/payload/workloads:/workloads:ro", "$RUN/payload/data:/data/offline:ro"


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_every_runtime_shows_the_carried_files_to_the_runner_read_only(tmp_path, runtime: str) -> None:
    script = carrying_script(tmp_path, runtime)
    (tmp_path / "job.sh").write_text(script)
    parsed = subprocess.run(["bash", "-n", str(tmp_path / "job.sh")], capture_output=True, text=True)
    assert parsed.returncode == 0, parsed.stderr
    words = _runner_words(script, runtime)
    if runtime in ("docker", "podman"):
        assert [words[i + 1] for i, word in enumerate(words) if word == "-v"][-2:] == list(MOUNTED)
    elif runtime in ("apptainer", "singularity"):
        assert words[words.index("--bind") + 1] == ",".join(("$LOGS:/logs", "$CACHE:/data/keras", *MOUNTED))
    elif runtime == "pyxis":  # pyxis's SRC:DST[:FLAGS]
        assert f"--container-mounts={','.join(('$LOGS:/logs', '$CACHE:/data/keras', *MOUNTED))}" in words
    runner = words[words.index("tiny_mlp") :]
    # no container for venv: the runner reads the run folder's copies on the shared file system
    workloads, data = (
        ("$RUN/payload/workloads", "$RUN/payload/data") if runtime == "venv" else ("/workloads", "/data/offline")
    )
    assert runner[runner.index("--workload-file") + 1] == f"{workloads}/tiny_mlp.py"
    assert runner[runner.index("--data-dir") + 1] == data


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_run_without_files_of_its_own_mounts_none(tmp_path, runtime: str) -> None:
    script = script_for(tmp_path, runtime, **(VENV if runtime == "venv" else {}))
    assert "/workloads" not in script and "/data/offline" not in script and "$RUN/data" not in script
    words = _runner_words(script, runtime)
    assert "--workload-file" not in words and "--data-dir" not in words


def test_the_venv_runner_reads_the_run_folder_by_its_path_on_the_node(tmp_path) -> None:
    """bash expands the venv line's paths to the run folder's (a file name is quoted, never split)."""
    script = carrying_script(tmp_path, "venv")
    line = next(line for line in script.splitlines() if "exec /scratch" in line)
    argv = line.split("-m benchmarks ", 1)[1].split(" ) >> ")[0]
    shown = subprocess.run(
        ["bash", "-c", f'RUN=/scratch/me/kcb/runs/{RUN_ID}; LOGS="$RUN/logs"; printf "%s\\n" {argv}'],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    folder = f"/scratch/me/kcb/runs/{RUN_ID}"
    assert shown[shown.index("--workload-file") + 1] == f"{folder}/payload/workloads/tiny_mlp.py"
    assert shown[shown.index("--data-dir") + 1] == f"{folder}/payload/data"
    assert shown[shown.index("--out") + 1] == f"{folder}/logs"
