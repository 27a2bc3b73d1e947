"""A task of several processes (`--nodes N`): the batch script's lines that run one work item across N nodes.

The array task is one job of N nodes (`sbatch --nodes=N --ntasks-per-node=P`: P processes per node, one per GPU,
one per node on CPUs). Its batch step, on the first node, runs three `srun` steps of the same script, each
re-entering `job.sh` with the step's name (`bash "$RUN/job.sh" pull|check|train`), so every process runs the
item's lines of the profile's runtime with its own rank:

1. `pull`, one process per node: the image made present on every node (docker/podman pull, an Apptainer
   conversion into the node's cache, the venv built), before any clock starts; its wall time is recorded as
   set-up in `orchestrate/<stem>.setup.json` (with the check's);
2. `check`, every process: `python -m benchmarks check-allreduce` joins one process group and all-reduces a
   buffer; rank 0 records the bandwidth and the interconnect in `orchestrate/<stem>.allreduce.json`. A process
   that cannot reach the others fails the task in one line (exit CHECK_FAILED) before anything is timed;
3. `train`, every process: the runner, which reads its rank from RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
   MASTER_ADDR and MASTER_PORT (`benchmarks.harness.processes`), set here from Slurm's SLURM_PROCID,
   SLURM_NTASKS and SLURM_LOCALID and the first node's address (its NodeAddr).

Every process appends its output to `orchestrate/<stem>.p<rank>.console.log`; the item's console gets each step's
verdict. `--kill-on-bad-exit` ends a step's other processes when one fails, so none waits forever on a peer.
pyxis starts its containers from `srun` itself, so its three steps run `srun --container-image` directly.
"""

from __future__ import annotations

import shlex

from benchmarks.allreduce import EXIT_UNREACHABLE
from orchestrate.runspec import LOGS_IN_CONTAINER, RunSpec, SpecItem

CHECK_FAILED = EXIT_UNREACHABLE  # the processes could not all meet
IMAGE_MISSING = 125  # the image could not be made present on a node (the batch lifecycle's "cannot run")
# what each process inside its container is told: its rank, where the processes meet, and its node's name
PROCESS_VARIABLES = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "SLURMD_NODENAME",
)
PORT_BASE, PORT_SPAN = 20000, 20000  # MASTER_PORT = PORT_BASE + job id mod PORT_SPAN (the check uses the next)
CHECK_TIMEOUT_S = 120


def several(spec: RunSpec) -> bool:
    return spec.processes > 1


def sbatch_shape(spec: RunSpec) -> list[str]:
    """The job's shape: one node and one task, or N nodes of P tasks each (the processes `srun` starts)."""
    if not several(spec):
        return ["--nodes=1", "--ntasks=1"]
    return [f"--nodes={spec.nodes}", f"--ntasks-per-node={spec.processes_per_node}"]


def header_lines(spec: RunSpec) -> str:
    """After the script's variables: which step this is, and for a process of a step its rank variables."""
    if not several(spec):
        return ""
    return f"""STEP=${{1:-task}}  # task: the array task, on the first node; pull, check, train: a process of a step
if [ "$STEP" = task ]; then  # where the processes meet: the first node's address, a port of this job
  first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
  MASTER_ADDR=$(scontrol -o show node "$first" | sed -n 's/.* NodeAddr=\\([^ ]*\\).*/\\1/p')
  export MASTER_ADDR=${{MASTER_ADDR:-$first}} MASTER_PORT=$(( {PORT_BASE} + SLURM_JOB_ID % {PORT_SPAN} ))
else
  export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID \\
    LOCAL_WORLD_SIZE={spec.processes_per_node}
  [ "$STEP" = check ] && export MASTER_PORT=$(( MASTER_PORT + 1 ))  # its own port: the training's may linger
fi
"""


def step_functions(spec: RunSpec) -> str:
    """After finish() and interrupted(): a step's process records nothing (srun gathers its exit code)."""
    if not several(spec):
        return ""
    return """
if [ "$STEP" != task ]; then  # one process of a step: no exit record, its exit code is srun's
  finish() { exit "$1"; }
  interrupted() { exit 143; }
fi
"""


def exit_record_guard(spec: RunSpec, guard: str) -> str:
    """The script's check for an ended item, made the array task's only (a step's process must not exit on it)."""
    if not several(spec):
        return guard
    return f'if [ "$STEP" = task ]; then\n{_indent(guard, 2)}\nfi'


def process_console(item: SpecItem) -> str:
    """Each process's console, as a shell word: `orchestrate/<stem>.p<rank>.console.log`."""
    return f'"$ITEMS/orchestrate/"{shlex.quote(item.stem)}".p$SLURM_PROCID.console.log"'


def check_item(spec: RunSpec, item: SpecItem) -> SpecItem:
    """The all-reduce check as an item of its own, run by every process as the item is (the image entrypoint)."""
    record = f"{spec.platform}/{spec.run_id}/orchestrate/{item.stem}.allreduce.json"
    argv = ("check-allreduce", "--out", LOGS_IN_CONTAINER, "--record", record, "--timeout-s", str(CHECK_TIMEOUT_S))
    return SpecItem(item.workload, item.backend, item.repeat, argv)


def case_body(spec: RunSpec, item: SpecItem, console: str, partial: str, steps: dict[str, str]) -> str:
    """The task's case: the array task runs the three steps; a step's process runs its own lines (`steps`)."""
    per_node = f"--nodes={spec.nodes} --ntasks={spec.nodes} --ntasks-per-node=1"
    every = f"--nodes={spec.nodes} --ntasks={spec.processes} --ntasks-per-node={spec.processes_per_node}"
    task_lines = _steps(
        item,
        console,
        pull=f'srun {per_node} --kill-on-bad-exit=1 bash "$RUN/job.sh" pull',
        check=f'srun {every} --kill-on-bad-exit=1 bash "$RUN/job.sh" check',
        train=f'srun {every} --kill-on-bad-exit=1 bash "$RUN/job.sh" train',
    )
    branches = "\n".join(f"  {step})\n{_indent(lines, 4)}\n    ;;" for step, lines in steps.items())
    return f"""case $STEP in
  task)
    [ "$ATTEMPT" -gt 1 ] && keep_partial {partial}
{_indent(task_lines, 4)}
    ;;
{branches}
esac"""


def pyxis_case_body(spec: RunSpec, index: int, item: SpecItem, console: str, partial: str, start: str) -> str:
    """pyxis starts containers from `srun` itself: the pull step imports the image once per node into a container
    named for the task, which the check and the training then start from (as MLPerf's run.sub does). `start`: the
    options that give a process's container its mounts and environment."""
    name = f"kcb-$SLURM_JOB_ID-{index}"
    per_node = f"--nodes={spec.nodes} --ntasks={spec.nodes} --ntasks-per-node=1"
    every = f"--nodes={spec.nodes} --ntasks={spec.processes} --ntasks-per-node={spec.processes_per_node}"
    output = f'--output="$ITEMS/orchestrate/{item.stem}.p%t.console.log"'

    def ranked(argv: tuple[str, ...], port_shift: int) -> str:
        """Each process's rank variables from Slurm's, inside the container, then the runner's entrypoint."""
        shift = f"MASTER_PORT=$(( MASTER_PORT + {port_shift} )) " if port_shift else ""
        inner = (
            f"export {shift}RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID "
            f'LOCAL_WORLD_SIZE={spec.processes_per_node}; exec python -m benchmarks "$@"'
        )
        return f"bash -c {shlex.quote(inner)} _ " + " ".join(shlex.quote(arg) for arg in argv)

    environment = " ".join(f"{key}={shlex.quote(value)}" for key, value in spec.runner_env(spec.image).items())
    task_lines = _steps(
        item,
        console,
        pull=f"srun {per_node} --kill-on-bad-exit=1 --container-image={shlex.quote(spec.image)} "
        f'--container-name="{name}" true',
        check=f'srun {every} --kill-on-bad-exit=1 {output} --container-name="{name}" {start} '
        f"{ranked(check_item(spec, item).argv, 1)}",
        train=f'srun {every} --kill-on-bad-exit=1 {output} --container-name="{name}" {start} {ranked(item.argv, 0)}',
    )
    return f"""[ "$ATTEMPT" -gt 1 ] && keep_partial {partial}
export {environment}
{task_lines}"""


def _steps(item: SpecItem, console: str, pull: str, check: str, train: str) -> str:
    """The three steps, each told in the item's console; when the image was present and when the check was done
    (epoch seconds) go to `orchestrate/<stem>.setup.json`, the set-up before anything is timed."""
    stem = shlex.quote(item.stem)
    setup = f'"$ITEMS/orchestrate/"{stem}.setup.json'
    consoles = f'"$ITEMS/orchestrate/"{stem}.p*.console.log'
    return f"""trap 'kill -TERM $! 2>/dev/null; wait $!; interrupted' TERM INT
echo "$(date -u +%FT%TZ) {item.label}: $SLURM_JOB_NUM_NODES nodes ($SLURM_JOB_NODELIST), attempt $ATTEMPT" >> {console}
pulling=$EPOCHREALTIME
{pull} >> {console} 2>&1 &
if ! wait $!; then
  echo "the image could not be made present on every node; see {item.stem}.p*.console.log" >> {console}
  finish {IMAGE_MISSING}
fi
checking=$EPOCHREALTIME
seconds=$(awk "BEGIN {{ printf \\"%.1f\\", $checking - $pulling }}")
echo "image present on $SLURM_JOB_NUM_NODES nodes in $seconds s (set-up)" >> {console}
{check} >> {console} 2>&1 &
if ! wait $!; then
  grep -h "all-reduce check" {consoles} 2>/dev/null | tail -n 1 >> {console}
  finish {CHECK_FAILED}
fi
grep -h "^all-reduce check: " {consoles} 2>/dev/null | tail -n 1 >> {console}
printf '{{"nodes": %s, "attempt": %s, "image": [%s, %s], "check": [%s, %s]}}\\n' "$SLURM_JOB_NUM_NODES" "$ATTEMPT" \\
  "$pulling" "$checking" "$checking" "$EPOCHREALTIME" > {setup}
{train} >> {console} 2>&1 &
wait $!
finish $?"""


def _indent(text: str, spaces: int) -> str:
    return "\n".join(" " * spaces + line if line else line for line in text.splitlines())
