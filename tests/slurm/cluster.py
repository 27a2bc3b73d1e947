"""A real two-node Slurm cluster on loopback, from Debian's packages (munge, slurmctld, slurmd), for the tests.

    cluster = start_cluster(workdir)   # every file, socket and state folder under workdir; free loopback ports
    cluster.env                        # SLURM_CONF for the client commands (sbatch, squeue, scontrol, scancel)
    cluster.nodes                      # the node names, e.g. ["vm-n1", "vm-n2"]
    cluster.stop()                     # the daemons, by their PIDs

Two nodes on one machine is Slurm's multiple-slurmd mode: one slurmd per node (`slurmd -N <node>`), each on its own
port of 127.0.0.1 with its own spool, log and PID file (`%n` in slurm.conf), all on this host. A job of two nodes
gets one process per node from `srun`, in a step of each slurmd, as on a real cluster; setting a node DOWN makes
slurmctld kill (or requeue) the jobs on it. Each node has NODE_CPUS CPUs, so the whole cluster has as many as the
CI machine's cores.

Nothing of the system's Slurm or munge is used or changed: the daemons run in the foreground with their own
config, key, socket, ports and spool under `workdir`, so a machine's own cluster (if any) is left alone. Job
accounting has no slurmdbd here: finished jobs are read from the job completion log (jobcomp/filetxt).
Missing packages make `start_cluster` skip with the install command. A requeued job waits `cred_expire` seconds
before it may start again (120 by default): 10 here, so a requeue test takes seconds.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from orchestrate.testing.sshd import free_port

DAEMONS = {"munged": "/usr/sbin/munged", "slurmctld": "/usr/sbin/slurmctld", "slurmd": "/usr/sbin/slurmd"}
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")
INSTALL_HINT = "apt-get install -y slurmctld slurmd slurm-client munge"
NODES = 2
NODE_CPUS = 1
PARTITION = "debug"  # every node
SECOND_PARTITION = "debug2"  # the first node only: a fan-out over two partitions, a job too wide for its partition


@dataclass
class SlurmCluster:
    workdir: Path
    conf: Path
    nodes: list[str]
    partition: str = PARTITION
    jobcomp_log: Path = field(default_factory=Path)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict, repr=False)

    @property
    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def command(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """A Slurm client command against this cluster (the test's own view, beside the provider's)."""
        return subprocess.run(
            list(args), env={**os.environ, **self.env}, capture_output=True, text=True, check=check, timeout=60
        )

    def set_node(self, node: str, state: str, reason: str = "test", check: bool = True) -> None:
        """`scontrol update` of one node's state: DOWN (its jobs are requeued, or killed) or RESUME (refused, and
        then not checked with `check=False`, where the node is up already)."""
        extra = [f"Reason={reason}"] if state.upper() in ("DOWN", "DRAIN") else []
        self.command("scontrol", "update", f"NodeName={node}", f"State={state}", *extra, check=check)

    def stop(self) -> None:
        """The daemons in reverse start order, each by its PID: SIGTERM, then SIGKILL after 15 s."""
        for name in reversed(list(self.processes)):
            process = self.processes.pop(name)
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=10)


def start_cluster(workdir: Path) -> SlurmCluster:
    """munged, slurmctld and one slurmd per node (NODES of NODE_CPUS CPUs each), partition PARTITION holding them
    all; waits until every node is idle."""
    missing = [path for path in DAEMONS.values() if not Path(path).exists()]
    missing += [name for name in CLIENTS if shutil.which(name) is None]
    if missing:
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} missing): {INSTALL_HINT}")
    if os.geteuid() != 0:
        pytest.skip("the one-node Slurm cluster needs root (slurmd starts jobs as their owner)")
    workdir.mkdir(parents=True, exist_ok=True)
    host = socket.gethostname().split(".")[0]
    nodes = [f"{host}-n{index}" for index in range(1, NODES + 1)]
    for sub in ("state", "munge", *(f"spool/{node}" for node in nodes)):
        (workdir / sub).mkdir(parents=True, exist_ok=True)
    cluster = SlurmCluster(workdir, workdir / "slurm.conf", nodes, jobcomp_log=workdir / "jobcomp.log")
    key, munge_socket = workdir / "munge" / "munge.key", workdir / "munge" / "munge.socket"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    cluster.conf.write_text(_slurm_conf(cluster, munge_socket, host))
    try:
        _spawn(cluster, "munged", [DAEMONS["munged"], "-F", "--force", f"--key-file={key}", f"--socket={munge_socket}",
                                   f"--pid-file={workdir / 'munge' / 'munged.pid'}",
                                   f"--log-file={workdir / 'munge' / 'munged.log'}",
                                   f"--seed-file={workdir / 'munge' / 'munged.seed'}"])  # fmt: skip
        _wait_for(lambda: munge_socket.exists(), 20, "munged's socket", cluster)
        _spawn(cluster, "slurmctld", [DAEMONS["slurmctld"], "-D", "-c", "-i", "-f", str(cluster.conf)])
        for node in nodes:
            _spawn(cluster, f"slurmd-{node}", [DAEMONS["slurmd"], "-D", "-f", str(cluster.conf), "-N", node])
        _wait_for(lambda: _nodes_idle(cluster), 60, f"nodes {', '.join(nodes)} idle in sinfo", cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _slurm_conf(cluster: SlurmCluster, munge_socket: Path, host: str) -> str:
    work = cluster.workdir
    nodes = "\n".join(
        f"NodeName={node} NodeHostname={host} NodeAddr=127.0.0.1 Port={free_port()} CPUs={NODE_CPUS} State=UNKNOWN"
        for node in cluster.nodes
    )
    return f"""# multiple-slurmd test cluster (tests/slurm/cluster.py)
ClusterName=kcbtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge_socket},cred_expire=10
CredType=cred/munge
StateSaveLocation={work / "state"}
SlurmdSpoolDir={work / "spool"}/%n
SlurmctldPidFile={work / "slurmctld.pid"}
SlurmdPidFile={work / "slurmd-%n.pid"}
SlurmctldLogFile={work / "slurmctld.log"}
SlurmdLogFile={work / "slurmd-%n.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
JobCompType=jobcomp/filetxt
JobCompLoc={cluster.jobcomp_log}
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=1
SlurmdTimeout=60
InactiveLimit=0
MinJobAge=300
KillWait=10
{nodes}
PartitionName={cluster.partition} Nodes={",".join(cluster.nodes)} Default=YES MaxTime=INFINITE State=UP
PartitionName={SECOND_PARTITION} Nodes={cluster.nodes[0]} Default=NO MaxTime=INFINITE State=UP
"""


def _spawn(cluster: SlurmCluster, name: str, argv: list[str]) -> None:
    log = (cluster.workdir / f"{name}.out").open("wb")
    cluster.processes[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ})


def _nodes_idle(cluster: SlurmCluster) -> bool:
    with contextlib.suppress(subprocess.SubprocessError):
        done = cluster.command("sinfo", "-h", "-N", "-o", "%N %T", check=False)
        states = dict(line.split() for line in done.stdout.splitlines() if line.strip())  # a line per partition
        return set(states) == set(cluster.nodes) and all(state == "idle" for state in states.values())
    return False


def _wait_for(ready: object, timeout: float, what: str, cluster: SlurmCluster) -> None:
    assert callable(ready)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, process in cluster.processes.items():
            if process.poll() is not None:
                log = (cluster.workdir / f"{name}.out").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{name} exited {process.returncode} while waiting for {what}:\n{log}")
        if ready():
            return
        time.sleep(0.5)
    raise RuntimeError(f"timed out after {timeout:g} s waiting for {what} (logs in {cluster.workdir})")
