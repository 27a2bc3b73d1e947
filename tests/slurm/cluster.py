"""A real one-node Slurm cluster on loopback, from Debian's packages (munge, slurmctld, slurmd), for the tests.

    cluster = start_cluster(workdir)   # every file, socket and state folder under workdir; free loopback ports
    cluster.env                        # SLURM_CONF for the client commands (sbatch, squeue, scontrol, scancel)
    cluster.stop()                     # the three daemons, by their PIDs

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
NODE_CPUS = 2
PARTITION = "debug"
SECOND_PARTITION = "debug2"  # the same node: a fan-out over two partitions


@dataclass
class SlurmCluster:
    workdir: Path
    conf: Path
    node: str
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
    """munged, slurmctld and slurmd for one node of NODE_CPUS CPUs, partition PARTITION; waits until it is idle."""
    missing = [path for path in DAEMONS.values() if not Path(path).exists()]
    missing += [name for name in CLIENTS if shutil.which(name) is None]
    if missing:
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} missing): {INSTALL_HINT}")
    if os.geteuid() != 0:
        pytest.skip("the one-node Slurm cluster needs root (slurmd starts jobs as their owner)")
    workdir.mkdir(parents=True, exist_ok=True)
    for sub in ("state", "spool", "munge"):
        (workdir / sub).mkdir(exist_ok=True)
    node = socket.gethostname().split(".")[0]
    cluster = SlurmCluster(workdir, workdir / "slurm.conf", node, jobcomp_log=workdir / "jobcomp.log")
    key, munge_socket = workdir / "munge" / "munge.key", workdir / "munge" / "munge.socket"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    cluster.conf.write_text(_slurm_conf(cluster, munge_socket))
    try:
        _spawn(cluster, "munged", [DAEMONS["munged"], "-F", "--force", f"--key-file={key}", f"--socket={munge_socket}",
                                   f"--pid-file={workdir / 'munge' / 'munged.pid'}",
                                   f"--log-file={workdir / 'munge' / 'munged.log'}",
                                   f"--seed-file={workdir / 'munge' / 'munged.seed'}"])  # fmt: skip
        _wait_for(lambda: munge_socket.exists(), 20, "munged's socket", cluster)
        _spawn(cluster, "slurmctld", [DAEMONS["slurmctld"], "-D", "-c", "-i", "-f", str(cluster.conf)])
        _spawn(cluster, "slurmd", [DAEMONS["slurmd"], "-D", "-f", str(cluster.conf)])
        _wait_for(lambda: _node_idle(cluster), 60, f"node {node} idle in sinfo", cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _slurm_conf(cluster: SlurmCluster, munge_socket: Path) -> str:
    work = cluster.workdir
    return f"""# one-node test cluster (tests/slurm/cluster.py)
ClusterName=kcbtest
SlurmctldHost={cluster.node}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge_socket},cred_expire=10
CredType=cred/munge
StateSaveLocation={work / "state"}
SlurmdSpoolDir={work / "spool"}
SlurmctldPidFile={work / "slurmctld.pid"}
SlurmdPidFile={work / "slurmd.pid"}
SlurmctldLogFile={work / "slurmctld.log"}
SlurmdLogFile={work / "slurmd.log"}
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
ReturnToService=2
SlurmdTimeout=60
InactiveLimit=0
MinJobAge=300
KillWait=10
NodeName={cluster.node} NodeAddr=127.0.0.1 CPUs={NODE_CPUS} State=UNKNOWN
PartitionName={cluster.partition} Nodes={cluster.node} Default=YES MaxTime=INFINITE State=UP
PartitionName={SECOND_PARTITION} Nodes={cluster.node} Default=NO MaxTime=INFINITE State=UP
"""


def _spawn(cluster: SlurmCluster, name: str, argv: list[str]) -> None:
    log = (cluster.workdir / f"{name}.out").open("wb")
    cluster.processes[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ})


def _node_idle(cluster: SlurmCluster) -> bool:
    with contextlib.suppress(subprocess.SubprocessError):
        done = cluster.command("sinfo", "-h", "-N", "-o", "%T", check=False)
        states = done.stdout.split()  # one line per partition the node is in
        return bool(states) and all(state == "idle" for state in states)
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
