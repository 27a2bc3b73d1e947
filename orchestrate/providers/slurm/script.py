"""The job array's batch script: one task per item of the run's spec, each running its item in the profile's
container runtime, by the command every mode runs (orchestrate.container_command).

Layout on the shared file system (`<shared_dir>/runs/<run id>/`, the same as a persistent host's run folder, so
`orchestrate.recover` pulls a dead run's logs from it):

    logs/                        mounted at the container's /logs: the runner writes `<platform>/<run id>/...`
    logs/<platform>/<run id>/orchestrate/<stem>.console.log   the item's console (and slurm-<job>_<task>.out)
    payload/                     the user's workload files and data folder (`--workload-file`, `--data-dir`), carried
                                 and checked before sbatch; read-only at /workloads and /data/offline in every
                                 container (the venv runtime's runner reads them here)
    tasks/<index>.exit           the item's exit code, written once it ended: a requeued task that finds it exits
                                 with that code and runs nothing again
    job.sh, run.json             this script and the run's tags (project, run-id, owner, ...) for the sweep

and `<shared_dir>/cache/keras/`, the Keras dataset cache every run shares (mounted at the spec's KERAS_HOME, seeded
once per image with the datasets the image holds).

A requeued task (preemption, `scontrol requeue`) whose item had not ended moves the item's partial files to
`preempted/attempt-<N>/` and runs it again. SIGTERM (scancel, a time limit) stops the item's container first, so the
runner records a partial run and no container outlives the job.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

from orchestrate.container_command import ENGINES, seed_argv, seed_marker
from orchestrate.containers import places
from orchestrate.providers.slurm import nodes
from orchestrate.providers.slurm.settings import SlurmSettings
from orchestrate.runspec import LOGS_IN_CONTAINER, RunSpec, SpecItem

STOP_GRACE_S = 10  # the container's SIGTERM grace, within Slurm's KillWait (30 s by default)
# The script's own shell values, as tokens in the words it runs (quoted by `_shell`, expanded by bash).
VARIABLES = {
    "@RUN@": "$RUN",
    "@LOGS@": "$LOGS",
    "@CACHE@": "$CACHE",
    "@DIGEST@": "$DIGEST",
    "@USER@": "$(id -u):$(id -g)",
    "@TASK@": "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}",  # the ledger's name of the task's machine
    "@PROCESS@": "${STEP}${SLURM_PROCID}",  # a process of a job of several nodes: its step and rank
    **{f"@{variable}@": f"${variable}" for variable in nodes.PROCESS_VARIABLES},
}
PLACES = places("@RUN@", "@LOGS@", "@CACHE@")


def run_folder(settings: SlurmSettings, run_id: str) -> str:
    return f"{settings.shared_dir}/runs/{run_id}"


def job_name(run_id: str) -> str:
    return f"kcb-{run_id}"


def job_comment(tags: Mapping[str, str]) -> str:
    """The run's tags as Slurm's job comment (`key=value,...`), what the sweep reads back (`parse_comment`)."""
    return ",".join(f"{key}={value}" for key, value in sorted(tags.items()) if "," not in value and "=" not in key)


def parse_comment(comment: str) -> dict[str, str]:
    pairs = (part.split("=", 1) for part in comment.split(",") if "=" in part)
    return {key: value for key, value in pairs}


def sbatch_flags(
    settings: SlurmSettings, run_id: str, tags: Mapping[str, str], spec: RunSpec, time_limit: str
) -> list[str]:
    folder = run_folder(settings, run_id)
    console_dir = f"{folder}/logs/{spec.platform}/{run_id}/orchestrate"
    return [
        "--parsable",
        f"--job-name={job_name(run_id)}",
        f"--comment={job_comment(tags)}",
        f"--array=0-{len(spec.items) - 1}",
        *settings.sbatch_resources(spec.nodes),
        f"--time={settings.time or time_limit}",
        *nodes.sbatch_shape(spec),
        "--requeue",  # a preempted task goes back in the queue, and resumes (see the module docstring)
        "--open-mode=append",  # a requeued task's Slurm log keeps the first attempt's lines
        f"--output={console_dir}/slurm-%A_%a.out",
        f"--chdir={folder}",
    ]


def batch_script(settings: SlurmSettings, run_id: str, spec: RunSpec) -> str:
    folder = run_folder(settings, run_id)
    items_dir = f"{LOGS_IN_CONTAINER}/{spec.platform}/{run_id}"
    cases = "\n".join(_case(settings, spec, index, item) for index, item in enumerate(spec.items))
    guard = nodes.exit_record_guard(spec, EXIT_RECORD_GUARD.rstrip("\n"))
    return f"""#!/bin/bash
# keras-cloud-bench run {run_id}: one array task per work item ({len(spec.items)} items{_shape(spec)})
set -u
umask 077  # the run's files are the user's alone (sbatch passes the login shell's, which may be wider)
RUN={shlex.quote(folder)}
CACHE={shlex.quote(settings.shared_dir)}/cache/keras  # the datasets, kept between runs
LOGS="$RUN/logs"
ITEMS="$LOGS/{spec.platform}/{run_id}"
TASK=$SLURM_ARRAY_TASK_ID
ATTEMPT=$(( ${{SLURM_RESTART_COUNT:-0}} + 1 ))
{nodes.header_lines(spec)}mkdir -p "$RUN/tasks" "$ITEMS/orchestrate" "$CACHE"
{guard}

# A requeued item starts over: its partial files go aside, as the lifecycle keeps a preempted machine's.
keep_partial() {{
  local moved="$ITEMS/preempted/attempt-$((ATTEMPT - 1))" f
  for f in "$@"; do
    [ -e "$ITEMS/$f" ] || continue
    mkdir -p "$moved" && mv "$ITEMS/$f" "$moved/$f"
  done
}}

# What a container wrote with its engine's umask (Docker's is 022) becomes the user's alone too.
finish() {{
  chmod -R go= "$LOGS" 2>/dev/null
  echo "$1" > "$RUN/tasks/$TASK.exit.tmp" && mv "$RUN/tasks/$TASK.exit.tmp" "$RUN/tasks/$TASK.exit"
  echo "task $TASK ended: exit $1"
  exit "$1"
}}

# Stopped from outside (scancel, a requeue, the time limit): no exit record, so a requeue runs the item again.
interrupted() {{
  chmod -R go= "$LOGS" 2>/dev/null
  echo "task $TASK stopped by a signal (attempt $ATTEMPT)"
  exit 143
}}
{nodes.step_functions(spec)}
case $TASK in
{cases}
  *) echo "no work item for task $TASK"; exit 2 ;;
esac
# {items_dir} inside the container is $ITEMS here
"""


EXIT_RECORD_GUARD = """if [ -e "$RUN/tasks/$TASK.exit" ]; then
  code=$(cat "$RUN/tasks/$TASK.exit")
  echo "task $TASK ended before (exit $code): not run again (attempt $ATTEMPT)"
  exit "$code"
fi
echo "task $TASK attempt $ATTEMPT on $(hostname) at $(date -u +%FT%TZ)"
"""


def _shape(spec: RunSpec) -> str:
    return f", each on {spec.nodes} nodes x {spec.processes_per_node} processes" if nodes.several(spec) else ""


def _case(settings: SlurmSettings, spec: RunSpec, index: int, item: SpecItem) -> str:
    stem = item.stem
    partial = " ".join(shlex.quote(name) for name in item.to_json()["files"])
    console = f'"$ITEMS/orchestrate/"{shlex.quote(stem + ".console.log")}'
    if not nodes.several(spec):
        body = f"""[ "$ATTEMPT" -gt 1 ] && keep_partial {partial}
{runtime_lines(settings, spec, item, console)}"""
    elif settings.runtime == "pyxis":
        body = nodes.pyxis_case_body(spec, index, item, console, partial, _pyxis_start(spec))
    else:
        mine = nodes.process_console(item)
        steps = {
            "pull": _pull_lines(settings, spec, mine),
            "check": runtime_lines(settings, spec, nodes.check_item(spec, item), mine, process=True),
            "train": runtime_lines(settings, spec, item, mine, process=True),
        }
        body = nodes.case_body(spec, item, console, partial, steps)
    return f"""  {index})  # {item.label}
{_indent(body, 4)}
    ;;"""


def _pull_lines(settings: SlurmSettings, spec: RunSpec, console: str) -> str:
    """One process per node, before anything is timed: the image present on this node (pulled, converted into the
    node's cache, or the venv built once on the shared file system)."""
    runtime, image = settings.runtime, shlex.quote(spec.image)
    if runtime in ENGINES:
        pull = f"{runtime} image inspect {image} >/dev/null 2>&1 || {runtime} pull -q {image} >> {console} 2>&1"
    elif runtime in ("apptainer", "singularity"):
        registry = spec.image if "://" in spec.image else f"docker://{spec.image}"
        pull = f"{runtime} exec {shlex.quote(registry)} true >> {console} 2>&1"
    else:
        pull = _venv_setup(settings, spec, console)  # a step's finish is its exit
    return f"""echo "$(hostname) $SLURMD_NODENAME: making the image present" >> {console}
{pull}"""


def _pyxis_start(spec: RunSpec) -> str:
    """pyxis's options that start a process's container: the spec's mounts where they are on the node, its
    environment and the process's variables passed in."""
    mounts = ",".join(f"{PLACES[m.place]}:{m.target}" + (":ro" if m.read_only else "") for m in spec.mounts)
    names = ",".join([*spec.runner_env(spec.image), *nodes.PROCESS_VARIABLES])
    return f"--container-mounts={_shell([mounts])} --no-container-mount-home --container-env={names}"


def _indent(text: str, spaces: int) -> str:
    return "\n".join(" " * spaces + line if line else line for line in text.splitlines())


def _shell(words: Sequence[str]) -> str:
    """Words as one shell line, each quoted, the script's own values (VARIABLES) left to bash to expand."""
    line = []
    for word in words:
        quoted = shlex.quote(word)
        bare = quoted == word  # else inside single quotes: close them around the variable
        for token, variable in VARIABLES.items():
            quoted = quoted.replace(token, f'"{variable}"' if bare else f"'\"{variable}\"'")
        line.append(quoted)
    return " ".join(line)


def runtime_lines(settings: SlurmSettings, spec: RunSpec, item: SpecItem, console: str, process: bool = False) -> str:
    """The shell lines that run one item in the profile's runtime, its output appended to `console`, ending in
    `finish <exit code>`; with `process`, as one process of a step of a job of several nodes (its container named
    for the step and rank, its place in the job in its environment)."""
    if settings.runtime == "venv":
        return _venv_lines(settings, spec, item, console)
    runtime, image = settings.runtime, spec.image
    engine = runtime in ENGINES
    container = item.container_name(spec.run_id or "") + ("-@PROCESS@" if process else "")
    extra = {variable: f"@{variable}@" for variable in nodes.PROCESS_VARIABLES} if process else {}
    run = spec.container(
        item, runtime, PLACES, "@DIGEST@" if engine else image, user="@USER@", labels={"machine": "@TASK@"},
        name=container, env=extra,
    )  # fmt: skip
    marker = seed_marker(image)
    seed = seed_argv(runtime, image, "@CACHE@", marker, user="@USER@")
    lines = [
        f'if [ ! -e "$CACHE/{marker}" ]; then  # the datasets the image holds, into the shared cache once',
        f'  flock "$CACHE/.seed.lock" {_shell(seed)} >> {console} 2>&1',
        "fi",
        f"{_shell(run)} >> {console} 2>&1 &",
        "wait $!",
        "finish $?",
    ]
    if not engine:
        return "\n".join(["trap 'kill -TERM $! 2>/dev/null; wait $!; interrupted' TERM INT", *lines])
    name, quoted = _shell([container]), shlex.quote(image)
    stop = f"{runtime} stop -t {STOP_GRACE_S} {name} >/dev/null 2>&1"
    return "\n".join([
        f"{runtime} rm -f {name} >/dev/null 2>&1  # a killed attempt's container (SIGKILL skips the trap)",
        f"{runtime} image inspect {quoted} >/dev/null 2>&1 || {runtime} pull -q {quoted} >> {console} 2>&1",
        f"DIGEST=$({runtime} image inspect --format '{{{{.Id}}}}' {quoted}) || finish 125",
        "# stop lets the runner record a partial run; rm also removes a container the signal caught before it started",
        f"trap '{stop}; {runtime} rm -f {name} >/dev/null 2>&1; interrupted' TERM INT",
        *lines,
    ])  # fmt: skip


def _venv_lines(settings: SlurmSettings, spec: RunSpec, item: SpecItem, console: str) -> str:
    """No container allowed: the project's source and a virtual environment made from its lock file, both on the
    shared file system; the runner reads the mounts' folders where they are on the node (`--out` the run's logs)."""
    assert settings.venv and settings.source_dir  # settings_of checks them for this runtime
    venv, source = shlex.quote(settings.venv), shlex.quote(settings.source_dir)
    words = " ".join(_on_node(arg, spec) for arg in item.argv)
    return f"""{_venv_setup(settings, spec, console)}
export KERAS_HOME="$CACHE" BENCH_IMAGE_DIGEST=venv BENCH_RUN_SPEC={shlex.quote(spec.runner_env("")["BENCH_RUN_SPEC"])}
trap 'kill -TERM $! 2>/dev/null; wait $!; interrupted' TERM INT
( cd {source} && exec {venv}/bin/python -m benchmarks {words} ) >> {console} 2>&1 &
wait $!
finish $?"""


def _venv_setup(settings: SlurmSettings, spec: RunSpec, console: str) -> str:
    """The virtual environment, made once from the lock file under a lock shared by the tasks."""
    variant = "gpu" if spec.gpus else "cpu"
    venv, source = shlex.quote(settings.venv or ""), shlex.quote(settings.source_dir or "")
    return f"""if [ ! -x {venv}/bin/python ]; then  # made once, from the lock file, under a lock shared by the tasks
  ( flock 9; [ -x {venv}/bin/python ] || {{ python3 -m venv {venv}.new && {venv}.new/bin/pip install -q \\
      -r {source}/requirements/bench-{variant}.lock && mv {venv}.new {venv}; }} ) 9> {venv}.lock >> {console} 2>&1 \\
    || finish 125
fi"""


def _on_node(arg: str, spec: RunSpec) -> str:
    """A runner argument as a shell word, a container path of a mount (`/logs`, `/workloads/<file>`,
    `/data/offline`) made its folder on the node: no container mounts them for the venv runtime."""
    for mount in spec.mounts:
        if arg == mount.target or arg.startswith(mount.target + "/"):
            return _shell([PLACES[mount.place] + arg[len(mount.target) :]])
    return shlex.quote(arg)
