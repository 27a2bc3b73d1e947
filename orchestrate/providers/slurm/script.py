"""The job array's batch script: one task per work item, each running its item in the profile's container runtime.

Layout on the shared file system (`<shared_dir>/runs/<run id>/`, the same as a persistent host's run folder, so
`orchestrate.recover` pulls a dead run's logs from it):

    logs/                        mounted at the container's /logs: the runner writes `<platform>/<run id>/...`
    logs/<platform>/<run id>/orchestrate/<stem>.console.log   the item's console (and slurm-<job>_<task>.out)
    workloads/, data/            the user's workload files and data folder (`--workload-file`, `--data-dir`), carried
                                 before sbatch; read-only at /workloads and /data/offline in every container (the
                                 venv runtime's runner reads them here)
    tasks/<index>.exit           the item's exit code, written once it ended: a requeued task that finds it exits
                                 with that code and runs nothing again
    job.sh, run.json             this script and the run's tags (project, run-id, owner, ...) for the sweep

and `<shared_dir>/cache/keras/`, the Keras dataset cache every run shares (mounted at the image's KERAS_HOME).

A requeued task (preemption, `scontrol requeue`) whose item had not ended moves the item's partial files to
`preempted/attempt-<N>/` and runs it again. SIGTERM (scancel, a time limit) stops the item's container first, so the
runner records a partial run and no container outlives the job.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from orchestrate.containers import DATA_FOLDER, DEFAULT_KERAS_HOME, WORKLOADS_FOLDER
from orchestrate.data_dir import CONTAINER_DIR as DATA_IN_CONTAINER
from orchestrate.provider import PROJECT_TAG, BatchJob, BatchTask
from orchestrate.providers.slurm.settings import SlurmSettings
from orchestrate.workload_files import CONTAINER_DIR as WORKLOADS_IN_CONTAINER

STOP_GRACE_S = 10  # the container's SIGTERM grace, within Slurm's KillWait (30 s by default)
CONTAINER_LOGS = "/logs"


def run_folder(settings: SlurmSettings, run_id: str) -> str:
    return f"{settings.shared_dir}/runs/{run_id}"


def user_mounts(job: BatchJob) -> list[tuple[str, str]]:
    """(folder under the run's folder, where every container sees it, read-only) for the user's files the job
    carries: its workload files and its data folder."""
    mounts = [(WORKLOADS_FOLDER, WORKLOADS_IN_CONTAINER)] if job.workload_files else []
    return mounts + ([(DATA_FOLDER, DATA_IN_CONTAINER)] if job.data_dir is not None else [])


def job_name(run_id: str) -> str:
    return f"kcb-{run_id}"


def job_comment(tags: Mapping[str, str]) -> str:
    """The run's tags as Slurm's job comment (`key=value,...`), what the sweep reads back (`parse_comment`)."""
    return ",".join(f"{key}={value}" for key, value in sorted(tags.items()) if "," not in value and "=" not in key)


def parse_comment(comment: str) -> dict[str, str]:
    pairs = (part.split("=", 1) for part in comment.split(",") if "=" in part)
    return {key: value for key, value in pairs}


def sbatch_flags(
    settings: SlurmSettings, run_id: str, tags: Mapping[str, str], job: BatchJob, time_limit: str
) -> list[str]:
    folder = run_folder(settings, run_id)
    console_dir = f"{folder}/logs/{job.platform}/{run_id}/orchestrate"
    return [
        "--parsable",
        f"--job-name={job_name(run_id)}",
        f"--comment={job_comment(tags)}",
        f"--array=0-{len(job.tasks) - 1}",
        *settings.sbatch_resources(),
        f"--time={settings.time or time_limit}",
        "--nodes=1",
        "--ntasks=1",
        "--requeue",  # a preempted task goes back in the queue, and resumes (see the module docstring)
        "--open-mode=append",  # a requeued task's Slurm log keeps the first attempt's lines
        f"--output={console_dir}/slurm-%A_%a.out",
        f"--chdir={folder}",
    ]


def batch_script(settings: SlurmSettings, run_id: str, job: BatchJob) -> str:
    folder = run_folder(settings, run_id)
    items_dir = f"{CONTAINER_LOGS}/{job.platform}/{run_id}"
    cases = "\n".join(_case(settings, run_id, job, task) for task in job.tasks)
    return f"""#!/bin/bash
# keras-cloud-bench run {run_id}: one array task per work item ({len(job.tasks)} items)
set -u
RUN={shlex.quote(folder)}
CACHE={shlex.quote(settings.shared_dir)}/cache/keras  # the datasets, kept between runs
LOGS="$RUN/logs"
ITEMS="$LOGS/{job.platform}/{run_id}"
TASK=$SLURM_ARRAY_TASK_ID
ATTEMPT=$(( ${{SLURM_RESTART_COUNT:-0}} + 1 ))
mkdir -p "$RUN/tasks" "$ITEMS/orchestrate" "$CACHE"
if [ -e "$RUN/tasks/$TASK.exit" ]; then
  code=$(cat "$RUN/tasks/$TASK.exit")
  echo "task $TASK ended before (exit $code): not run again (attempt $ATTEMPT)"
  exit "$code"
fi
echo "task $TASK attempt $ATTEMPT on $(hostname) at $(date -u +%FT%TZ)"

# A requeued item starts over: its partial files go aside, as the lifecycle keeps a preempted machine's.
keep_partial() {{
  local moved="$ITEMS/preempted/attempt-$((ATTEMPT - 1))" f
  for f in "$@"; do
    [ -e "$ITEMS/$f" ] || continue
    mkdir -p "$moved" && mv "$ITEMS/$f" "$moved/$f"
  done
}}

finish() {{
  echo "$1" > "$RUN/tasks/$TASK.exit.tmp" && mv "$RUN/tasks/$TASK.exit.tmp" "$RUN/tasks/$TASK.exit"
  echo "task $TASK ended: exit $1"
  exit "$1"
}}

# Stopped from outside (scancel, a requeue, the time limit): no exit record, so a requeue runs the item again.
interrupted() {{
  echo "task $TASK stopped by a signal (attempt $ATTEMPT)"
  exit 143
}}

case $TASK in
{cases}
  *) echo "no work item for task $TASK"; exit 2 ;;
esac
# {items_dir} inside the container is $ITEMS here
"""


def _case(settings: SlurmSettings, run_id: str, job: BatchJob, task: BatchTask) -> str:
    partial = _partial_names(task.stem)
    console = f'"$ITEMS/orchestrate/"{shlex.quote(task.stem + ".console.log")}'
    body = runtime_lines(settings, run_id, job, task, console)
    return f"""  {task.index})  # {task.label}
    [ "$ATTEMPT" -gt 1 ] && keep_partial {partial}
{_indent(body, 4)}
    ;;"""


def _partial_names(stem: str) -> str:
    """The runner's file names for an item stem (`mnist_mlp_jax` or `mnist_mlp_jax.r02`), synthetic data included."""
    base, dot, repeat = stem.partition(".")
    names = [f"{base}{variant}{dot}{repeat}.{ext}" for variant in ("", "_synthetic") for ext in ("csv", "json")]
    return " ".join(shlex.quote(name) for name in names)


def _indent(text: str, spaces: int) -> str:
    return "\n".join(" " * spaces + line if line else line for line in text.splitlines())


def runtime_lines(settings: SlurmSettings, run_id: str, job: BatchJob, task: BatchTask, console: str) -> str:
    """The shell lines that run one item in the profile's runtime, its output appended to `console`, ending in
    `finish <exit code>`."""
    builder = RUNTIMES[settings.runtime]
    return builder(settings, run_id, job, task, console)


def _engine_lines(settings: SlurmSettings, run_id: str, job: BatchJob, task: BatchTask, console: str) -> str:
    """docker or podman: a named, labelled container; SIGTERM stops it, and a requeue removes a killed attempt's."""
    engine = settings.runtime
    name = shlex.quote(f"{run_id}-{task.index}")
    image = shlex.quote(job.image_ref)
    command = [
        engine, "run", "--rm", "--name", f"{run_id}-{task.index}",
        "--user", "$(id -u):$(id -g)", "-e", "HOME=/tmp",
        "-e", f"KERAS_HOME={DEFAULT_KERAS_HOME}", "-e", "BENCH_IMAGE_DIGEST=$DIGEST",
        "-v", f"$LOGS:{CONTAINER_LOGS}", "-v", f"$CACHE:{DEFAULT_KERAS_HOME}",
        "--label", f"project={PROJECT_TAG}", "--label", f"run-id={run_id}",
    ]  # fmt: skip
    for folder, inside in user_mounts(job):
        command += ["-v", f"$RUN/{folder}:{inside}:ro"]
    if job.gpus:
        command += ["--gpus", "all"] if engine == "docker" else ["--device", "nvidia.com/gpu=all"]
    words = " ".join(_shell_word(word) for word in command)
    argv = " ".join(shlex.quote(arg) for arg in task.argv)
    stop = f"{engine} stop -t {STOP_GRACE_S} {name} >/dev/null 2>&1"
    return f"""{engine} rm -f {name} >/dev/null 2>&1  # a killed attempt's container (SIGKILL skips the trap)
{engine} image inspect {image} >/dev/null 2>&1 || {engine} pull -q {image} >> {console} 2>&1
DIGEST=$({engine} image inspect --format '{{{{.Id}}}}' {image}) || finish 125
# stop lets the runner record a partial run; rm also removes a container the signal caught before it started
trap '{stop}; {engine} rm -f {name} >/dev/null 2>&1; interrupted' TERM INT
{words} {image} {argv} >> {console} 2>&1 &
wait $!
finish $?"""


def _shell_word(word: str) -> str:
    """Quote a word, leaving `$VAR` and `$(...)` expansions to the shell (they are the script's own)."""
    if "$" in word:
        return f'"{word}"'
    return shlex.quote(word)


def _apptainer_lines(settings: SlurmSettings, run_id: str, job: BatchJob, task: BatchTask, console: str) -> str:
    """Apptainer/Singularity: the image pulled from its registry (`docker://`), the job's GPUs with --nv."""
    engine = settings.runtime
    image = job.image_ref if "://" in job.image_ref else f"docker://{job.image_ref}"
    command = [
        engine, "exec", "--cleanenv", "--containall",
        "--bind", _bind_list(job),
        "--env", f"HOME=/tmp,KERAS_HOME={DEFAULT_KERAS_HOME},BENCH_IMAGE_DIGEST={image}",
    ]  # fmt: skip
    command += ["--nv"] if job.gpus else []
    command += [image, "python", "-m", "benchmarks", *task.argv]
    words = " ".join(_shell_word(word) for word in command)
    return f"""trap 'kill -TERM $! 2>/dev/null; wait $!; interrupted' TERM INT
{words} >> {console} 2>&1 &
wait $!
finish $?"""


def _bind_list(job: BatchJob) -> str:
    """Every folder the container sees, as apptainer's --bind and pyxis's --container-mounts name them
    (`SRC:DST[:FLAGS]`, comma-separated): the user's files read-only."""
    user = [f"$RUN/{folder}:{inside}:ro" for folder, inside in user_mounts(job)]
    return ",".join([f"$LOGS:{CONTAINER_LOGS}", f"$CACHE:{DEFAULT_KERAS_HOME}", *user])


def _pyxis_lines(settings: SlurmSettings, run_id: str, job: BatchJob, task: BatchTask, console: str) -> str:
    """enroot through pyxis: `srun --container-image` (the allocation's GPUs are the container's)."""
    command = [
        "srun", "--ntasks=1", f"--container-image={job.image_ref}",
        f"--container-mounts={_bind_list(job)}",
        "--container-env=KERAS_HOME,BENCH_IMAGE_DIGEST", "--no-container-mount-home",
        "python", "-m", "benchmarks", *task.argv,
    ]  # fmt: skip
    words = " ".join(_shell_word(word) for word in command)
    return f"""export KERAS_HOME={DEFAULT_KERAS_HOME} BENCH_IMAGE_DIGEST={shlex.quote(job.image_ref)}
trap 'kill -TERM $! 2>/dev/null; wait $!; interrupted' TERM INT
{words} >> {console} 2>&1 &
wait $!
finish $?"""


def _venv_lines(settings: SlurmSettings, run_id: str, job: BatchJob, task: BatchTask, console: str) -> str:
    """No container allowed: the project's source and a virtual environment made from its lock file, both on the
    shared file system; the runner writes to the run's logs folder instead of /logs."""
    assert settings.venv and settings.source_dir  # settings_of checks them for this runtime
    variant = "gpu" if job.gpus else "cpu"
    venv, source = shlex.quote(settings.venv), shlex.quote(settings.source_dir)
    argv = [
        ('"$LOGS"' if previous == "--out" else _shared_path(arg, job))
        for previous, arg in zip(("", *task.argv), task.argv, strict=False)
    ]
    words = " ".join(argv)
    return f"""if [ ! -x {venv}/bin/python ]; then  # made once, from the lock file, under a lock shared by the tasks
  ( flock 9; [ -x {venv}/bin/python ] || {{ python3 -m venv {venv}.new && {venv}.new/bin/pip install -q \\
      -r {source}/requirements/bench-{variant}.lock && mv {venv}.new {venv}; }} ) 9> {venv}.lock >> {console} 2>&1 \\
    || finish 125
fi
export KERAS_HOME="$CACHE" BENCH_IMAGE_DIGEST=venv
trap 'kill -TERM $! 2>/dev/null; wait $!; interrupted' TERM INT
( cd {source} && exec {venv}/bin/python -m benchmarks {words} ) >> {console} 2>&1 &
wait $!
finish $?"""


def _shared_path(arg: str, job: BatchJob) -> str:
    """A runner argument as a shell word, a container path of the user's files (`/workloads/<file>`,
    `/data/offline`) made the run folder's: no container mounts them for the venv runtime."""
    for folder, inside in user_mounts(job):
        if arg == inside or arg.startswith(inside + "/"):
            return f'"$RUN"/{folder}' + (shlex.quote(arg[len(inside) :]) if arg != inside else "")
    return shlex.quote(arg)


RUNTIMES = {
    "docker": _engine_lines,
    "podman": _engine_lines,
    "apptainer": _apptainer_lines,
    "singularity": _apptainer_lines,
    "pyxis": _pyxis_lines,
    "venv": _venv_lines,
}
