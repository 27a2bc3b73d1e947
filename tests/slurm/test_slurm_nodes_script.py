"""A task of several nodes (`--nodes N`): its sbatch shape, its three steps (pull, check, train) in every runtime,
each process's rank, and its price, without a cluster. test_slurm_nodes.py runs the docker runtime for real."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from orchestrate.cli.planning import _nodes
from orchestrate.cli.request import RunOptions
from orchestrate.plan import WorkItem
from orchestrate.providers.slurm import TASK_LINE, SlurmProvider
from orchestrate.providers.slurm.nodes import PROCESS_VARIABLES
from orchestrate.providers.slurm.script import batch_script, sbatch_flags
from orchestrate.providers.slurm.settings import settings_of
from records.catalog import Price, Profile
from tests.orchestrate.orchestrate_helpers import plan_on_image

RUN_ID = "20260101T000000Z-snd1"
IMAGE = "ghcr.io/example/keras-cloud-bench:gpu"
EXTRA = {"login": "me@hpc-login", "partition": "a100", "shared_dir": "/scratch/me/kcb"}
VENV = {"venv": "/scratch/me/kcb-venv", "source_dir": "/scratch/me/keras-cloud-bench"}
RUNTIMES = ["docker", "podman", "apptainer", "singularity", "pyxis", "venv"]
TAGS = {"project": "keras-cloud-bench", "run-id": RUN_ID}


def profile(gpus: int = 2, **extra: str) -> Profile:
    return Profile(
        name="hpc",
        provider="slurm",
        machine_type=None,
        accelerator="a100" if gpus else None,
        accelerator_count=gpus,
        docker_image="gpu" if gpus else "cpu",
        on_demand=Price(1.5, "2026-11-01", "centre rate sheet"),
        extra={**EXTRA, **extra},
    )


def plan_for(tmp_path, prof: Profile, nodes: int = 2):
    """A plan of one item on `nodes` nodes of the profile, a process per GPU (per node on CPUs), as planned."""
    per_node = max(prof.accelerator_count, 1) if nodes > 1 else 1
    runner = {"gpus": str(nodes * per_node)} if nodes > 1 else {}
    items = (WorkItem("mnist_mlp", "torch-native"),)
    return plan_on_image(
        tmp_path, IMAGE, RUN_ID, items, provider="slurm", profile=prof, platform="hpc", nodes=nodes,
        processes_per_node=per_node, runner=runner,
    )  # fmt: skip


def script_for(tmp_path, runtime: str, gpus: int = 2, nodes: int = 2) -> str:
    prof = profile(gpus, runtime=runtime, **(VENV if runtime == "venv" else {}))
    return batch_script(settings_of(prof), RUN_ID, plan_for(tmp_path, prof, nodes).spec)


def step(script: str, name: str) -> str:
    """The lines of one step's branch in the task's case."""
    return script.split(f"      {name})\n", 1)[1].split("        ;;", 1)[0]


def words_of(lines: str, start: str) -> list[str]:
    line = next(line.strip() for line in lines.splitlines() if line.strip().startswith(start))
    return shlex.split(line.split(" >> ")[0])


def test_a_process_per_gpu_on_each_node_and_one_per_node_on_cpus() -> None:
    provider, backends = SlurmProvider(), ["torch-native"]
    assert _nodes(RunOptions(nodes=2), profile(gpus=4), provider, backends) == (2, 4)
    assert _nodes(RunOptions(nodes=2, gpus="2"), profile(gpus=4), provider, backends) == (2, 2)
    assert _nodes(RunOptions(nodes=3), profile(gpus=0), provider, backends) == (3, 1)
    assert _nodes(RunOptions(nodes=1, gpus="4"), profile(gpus=4), provider, backends) == (1, 1)  # one process


def test_the_spec_carries_the_jobs_shape_and_the_runner_counts_its_processes(tmp_path) -> None:
    spec = plan_for(tmp_path, profile(gpus=4), nodes=2).spec
    assert (spec.nodes, spec.processes_per_node, spec.processes) == (2, 4, 8)
    assert spec.items[0].argv[spec.items[0].argv.index("--gpus") + 1] == "8"  # each process on its own GPU
    assert spec.to_json()["nodes"] == 2 and type(spec).from_json(spec.to_json()) == spec


@pytest.mark.parametrize(
    ("gpu_flag", "gpus", "expected"),
    [
        ("gres", 2, ["--gres=gpu:a100:2", "--nodes=2", "--ntasks-per-node=2"]),
        ("gpus", 2, ["--gpus-per-node=a100:2", "--nodes=2", "--ntasks-per-node=2"]),  # --gpus would be per job
        ("gres", 0, ["--nodes=2", "--ntasks-per-node=1"]),
    ],
)
def test_the_job_is_n_nodes_of_a_process_per_gpu(tmp_path, gpu_flag: str, gpus: int, expected: list[str]) -> None:
    prof = profile(gpus, gpu_flag=gpu_flag)
    flags = sbatch_flags(settings_of(prof), RUN_ID, TAGS, plan_for(tmp_path, prof).spec, "0-01:00:00")
    for flag in expected:
        assert flag in flags
    assert "--ntasks=1" not in flags and "--nodes=1" not in flags and "--array=0-0" in flags


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_every_runtime_runs_pull_check_and_train_and_bash_parses_it(tmp_path, runtime: str) -> None:
    script = script_for(tmp_path, runtime)
    (tmp_path / "job.sh").write_text(script)
    parsed = subprocess.run(["bash", "-n", str(tmp_path / "job.sh")], capture_output=True, text=True)
    assert parsed.returncode == 0, parsed.stderr
    task = step(script, "task") if runtime != "pyxis" else script.split("  0)  # mnist_mlp [torch-native]\n", 1)[1]
    srun = [words_of(line, "srun") for line in task.splitlines() if line.strip().startswith("srun ")]
    assert len(srun) == 3  # pull, check, train: in this order
    assert all("--kill-on-bad-exit=1" in words for words in srun)
    assert "--ntasks=2" in srun[0] and "--ntasks-per-node=1" in srun[0]  # pull: once per node
    assert "--ntasks=4" in srun[1] and "--ntasks-per-node=2" in srun[2]  # check, train: once per process
    assert "finish 125" in task and "finish 4" in task and task.count("finish $?") == 1
    assert '"check": [%s, %s]}\\n\' "$SLURM_JOB_NUM_NODES"' in task  # the set-up record: one JSON line
    assert '[ "$ATTEMPT" -gt 1 ] && keep_partial mnist_mlp_torch-native.csv' in task  # the array task only
    if runtime != "pyxis":  # the steps re-enter this script; pyxis's srun starts the containers itself
        assert [words[-2:] for words in srun] == [["$RUN/job.sh", step_] for step_ in ("pull", "check", "train")]
        assert "finish $?" in step(script, "train") and "check-allreduce" in step(script, "check")
    # the exit record is the array task's: a step's process neither reads nor writes it
    assert 'if [ "$STEP" = task ]; then\n  if [ -e "$RUN/tasks/$TASK.exit" ]' in script
    assert 'finish() { exit "$1"; }' in script


def test_each_process_gets_its_rank_from_slurm_and_the_first_nodes_address(tmp_path) -> None:
    script = script_for(tmp_path, "docker")
    header = script.split("mkdir -p", 1)[0]
    shown = subprocess.run(
        ["bash", "-c", header + 'printf "%s " "$RANK" "$WORLD_SIZE" "$LOCAL_RANK" "$LOCAL_WORLD_SIZE" "$MASTER_PORT"',
         "job.sh", "check"],
        env={"SLURM_ARRAY_TASK_ID": "0", "SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1",
             "MASTER_ADDR": "10.0.0.7", "MASTER_PORT": "20042", "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert shown.split() == ["3", "4", "1", "2", "20043"]  # the check meets on the next port


def test_docker_starts_one_named_container_per_process_on_the_hosts_network(tmp_path) -> None:
    script = script_for(tmp_path, "docker")
    for name in ("check", "train"):
        words = words_of(step(script, name), "docker run")
        assert words[words.index("--name") + 1] == f"{RUN_ID}-mnist_mlp-torch-native-${{STEP}}${{SLURM_PROCID}}"
        assert words[words.index("--network") + 1] == "host" and words[words.index("--ipc") + 1] == "host"
        passed = [words[i + 1] for i, word in enumerate(words) if word == "-e"][-7:]  # each as the process has it
        assert passed == [f"{name}=${name}" for name in PROCESS_VARIABLES]
    check = words_of(step(script, "check"), "docker run")
    assert check[check.index(IMAGE) + 1 :] == [
        "check-allreduce", "--out", "/logs", "--record",
        f"hpc/{RUN_ID}/orchestrate/mnist_mlp_torch-native.allreduce.json", "--timeout-s", "120",
    ]  # fmt: skip
    assert "docker pull -q" in step(script, "pull")
    cpu = script_for(tmp_path, "docker", gpus=0)
    assert "--ipc" not in words_of(step(cpu, "train"), "docker run")  # gloo needs no shared memory


def test_apptainer_contains_the_files_but_shares_ipc_and_passes_the_ranks(tmp_path) -> None:
    words = words_of(step(script_for(tmp_path, "apptainer"), "train"), "apptainer exec")
    assert "--contain" in words and "--containall" not in words
    assert words[words.index("--env") + 1].endswith(",MASTER_PORT=$MASTER_PORT,SLURMD_NODENAME=$SLURMD_NODENAME")
    assert "apptainer exec docker://" + IMAGE + " true" in step(script_for(tmp_path, "apptainer"), "pull")


def test_venv_writes_the_checks_record_under_the_run_folder(tmp_path) -> None:
    check = step(script_for(tmp_path, "venv"), "check")
    line = next(line for line in check.splitlines() if "exec /scratch" in line)
    words = shlex.split(line.split(" ) >> ")[0].split("&& exec ", 1)[1])
    assert words[words.index("--out") + 1] == "$LOGS" and words[3] == "check-allreduce"


def test_pyxis_imports_the_image_once_per_node_into_a_named_container(tmp_path) -> None:
    script = script_for(tmp_path, "pyxis")
    lines = [line.strip() for line in script.splitlines() if line.strip().startswith("srun ")]
    pull, check, train = (shlex.split(line.split(" >> ")[0]) for line in lines)
    assert f"--container-image={IMAGE}" in pull and "--container-name=kcb-$SLURM_JOB_ID-0" in pull
    for words in (check, train):
        assert "--container-name=kcb-$SLURM_JOB_ID-0" in words and not any("container-image" in w for w in words)
        assert "RANK=$SLURM_PROCID" in words[words.index("-c") + 1]
    assert "MASTER_PORT=$(( MASTER_PORT + 1 ))" in check[check.index("-c") + 1]
    assert check[check.index("_") + 1] == "check-allreduce" and train[train.index("_") + 1] == "mnist_mlp"


def test_one_node_keeps_the_single_process_script(tmp_path) -> None:
    script = script_for(tmp_path, "docker", nodes=1)
    assert "STEP" not in script and "srun" not in script and "--network" not in script


def test_a_task_of_n_nodes_is_billed_as_n_allocations() -> None:
    provider = SlurmProvider()
    nodes = provider.allocation_price(profile(price_unit="node-hour"), nodes=3)
    assert nodes.on_demand is not None and nodes.on_demand.usd_per_hour == pytest.approx(4.5)  # 3 nodes x $1.50
    assert "(x3 nodes)" in nodes.on_demand.source
    gpus = provider.allocation_price(profile(price_unit="gpu-hour"), nodes=2)
    assert gpus.on_demand is not None and gpus.on_demand.usd_per_hour == pytest.approx(6.0)  # 2 GPUs x 2 nodes
    assert "(x2 GPUs x 2 nodes)" in gpus.on_demand.source
    one = profile(price_unit="node-hour")
    assert provider.allocation_price(one, nodes=1) == one


@pytest.mark.parametrize("runtime", ["docker", "pyxis"])
def test_collect_reads_the_tasks_work_items_back_from_a_script_of_nodes(tmp_path, runtime: str) -> None:
    assert TASK_LINE.findall(script_for(tmp_path, runtime)) == [("0", "mnist_mlp [torch-native]")]
