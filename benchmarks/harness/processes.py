"""Where this process stands in a data-parallel job of several processes: its rank, the world size, its rank on
its host (which device it takes) and the coordinator's address, read from the environment its launcher set.

- torchrun's variables (set by this runner's own launcher for `--gpus N` on torch-native, or by a job script):
  RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT;
- Slurm's `srun` (one task per GPU, or per node on CPUs), where those are unset: SLURM_PROCID, SLURM_NTASKS,
  SLURM_LOCALID, and the coordinator is the first host of SLURM_JOB_NODELIST (SLURM_NODELIST) at MASTER_PORT or
  DEFAULT_PORT.

No variable set: one process, rank 0 of 1. Nothing here imports a framework.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_PORT = 29500
LOCALHOST = "127.0.0.1"
# The backends whose runner reads its place in a job from this environment and trains across the job's processes
# (benchmarks.harness.runner): torch-native with DistributedDataParallel (benchmarks.harness.native), Keras on JAX
# with jax.distributed and DataParallel (benchmarks.harness.jax_processes). A job of several nodes (orchestrate's
# `--nodes N`) runs only these.
MULTI_PROCESS_BACKENDS = frozenset({"torch-native", "jax"})


class ProcessEnvironmentError(ValueError):
    """A launcher's variables that do not describe a job; the message names the variable."""


@dataclass(frozen=True)
class Place:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    master_addr: str = LOCALHOST
    master_port: int = DEFAULT_PORT
    launcher: str = "none"  # "torchrun" (RANK, ...), "slurm" or "none"

    @property
    def several(self) -> bool:
        return self.world > 1

    @property
    def writes_logs(self) -> bool:
        """Rank 0 writes the run's CSV and metadata; the others only train (and report their epoch times to it)."""
        return self.rank == 0

    def environment(self) -> dict[str, str]:
        """The torchrun-style variables of this place, for a process this one starts."""
        return {
            "RANK": str(self.rank),
            "WORLD_SIZE": str(self.world),
            "LOCAL_RANK": str(self.local_rank),
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(self.master_port),
        }


def from_environment(env: Mapping[str, str] | None = None) -> Place:
    env = os.environ if env is None else env
    if "RANK" in env or "WORLD_SIZE" in env:
        return _checked(
            Place(
                rank=_integer(env, "RANK"),
                world=_integer(env, "WORLD_SIZE"),
                local_rank=_integer(env, "LOCAL_RANK", default=_integer(env, "RANK")),
                master_addr=env.get("MASTER_ADDR", LOCALHOST),
                master_port=_integer(env, "MASTER_PORT", default=DEFAULT_PORT),
                launcher="torchrun",
            )
        )
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        nodes = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or LOCALHOST
        return _checked(
            Place(
                rank=_integer(env, "SLURM_PROCID"),
                world=_integer(env, "SLURM_NTASKS"),
                local_rank=_integer(env, "SLURM_LOCALID", default=0),
                master_addr=env.get("MASTER_ADDR") or first_host(nodes),
                master_port=_integer(env, "MASTER_PORT", default=DEFAULT_PORT),
                launcher="slurm",
            )
        )
    return Place()


def _integer(env: Mapping[str, str], name: str, default: int | None = None) -> int:
    text = env.get(name)
    if text is None:
        if default is None:
            raise ProcessEnvironmentError(f"{name} is not set (the launcher sets it beside the others)")
        return default
    try:
        return int(text)
    except ValueError:
        raise ProcessEnvironmentError(f"{name}={text!r}: expected an integer") from None


def _checked(place: Place) -> Place:
    if place.world < 1:
        raise ProcessEnvironmentError(f"world size {place.world}: expected at least 1")
    if not 0 <= place.rank < place.world:
        raise ProcessEnvironmentError(f"rank {place.rank} is outside a world of {place.world}")
    if place.local_rank < 0:
        raise ProcessEnvironmentError(f"local rank {place.local_rank}: expected 0 or more")
    return place


def first_host(nodelist: str) -> str:
    """The first host of a Slurm node list: "gpu[03-05,09],cpu1" -> "gpu03"; "node7" -> "node7"."""
    match = re.match(r"([^,\[]+)(?:\[([^\],]+))?", nodelist.strip())
    if match is None:
        raise ProcessEnvironmentError(f"SLURM_JOB_NODELIST={nodelist!r}: no host in it")
    prefix, ranges = match.group(1), match.group(2)
    return prefix + ranges.split("-")[0] if ranges else prefix


def job_fields(process_nodes: list[str], collectives: str) -> dict[str, Any]:
    """What a run of several processes records beside its distribution: the processes, how many nodes they ran
    on, each process's node (in rank order) and what carried the collectives (gloo or nccl)."""
    return {
        "processes": len(process_nodes),
        "nodes": len(set(process_nodes)),
        "process_nodes": process_nodes,
        "collectives": collectives,
    }


def node_name() -> str:
    """The node as the scheduler names it (several Slurm nodes may share one host name), else the host's name."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def free_port() -> int:
    """A TCP port free on this host now, for a coordinator this process starts."""
    with socket.socket() as probe:
        probe.bind((LOCALHOST, 0))
        port: int = probe.getsockname()[1]
        return port


def local_places(world: int, port: int) -> list[Place]:
    """One place per process of a job on this host alone."""
    return [Place(rank, world, rank, LOCALHOST, port, "torchrun") for rank in range(world)]
