"""A Slurm profile's settings (its catalog `extra` table), validated before anything is submitted.

[profiles.mycluster-a100]
provider = "slurm"
accelerator = "a100"            # the GRES type: --gres=gpu:a100:2 (or --gpus=a100:2 with gpu_flag = "gpus")
accelerator_count = 2           # GPUs per task (one work item)
docker_image = "gpu"
on_demand = { usd_per_hour = 2.10, date = "2026-11-01", source = "HPC centre rate sheet 2026/27" }
billing_minimum_s = 0
[profiles.mycluster-a100.extra]
login = "mycluster"             # the login node: user@host or an ~/.ssh/config alias (ProxyJump works)
partition = "a100"
shared_dir = "/scratch/me/kcb"  # a folder the login node and the compute nodes both see
runtime = "apptainer"           # docker | podman | apptainer | singularity | pyxis | venv
price_unit = "gpu-hour"         # what the price is per: gpu-hour or node-hour (one task's allocation)
cpus = "8"                      # --cpus-per-task
mem = "64G"                     # --mem
time = "02:00:00"               # --time (default: the run's --max-lifetime)
account = "proj123"             # --account
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from orchestrate.provider import ProviderError, SSHTarget
from orchestrate.providers.ssh import parse_target
from records.catalog import Profile

RUNTIMES = ("docker", "podman", "apptainer", "singularity", "pyxis", "venv")
PRICE_UNITS = ("node-hour", "gpu-hour")
GPU_FLAGS = ("gres", "gpus")
KEYS = (
    "login",
    "port",
    "identity_file",
    "partition",
    "shared_dir",
    "runtime",
    "price_unit",
    "cpus",
    "mem",
    "time",
    "account",
    "gpu_flag",
    "slurm_conf",
    "venv",
    "source_dir",
)
REQUIRED = ("login", "partition", "shared_dir")
# matched whole (fullmatch): `$` alone would let a trailing newline into an #SBATCH line
SLURM_NAME = re.compile(r"[A-Za-z0-9_.-]+")  # partition, account, GRES type
MEMORY = re.compile(r"[0-9]+[KMGT]?")
TIME = re.compile(r"(?:[0-9]+-)?[0-9]+(?::[0-9]{2}){0,2}")  # minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]
ABSOLUTE = re.compile(r"/[A-Za-z0-9_./+@-]*")  # shell-quoted anyway; no spaces, to stay one word in #SBATCH
COUNT = re.compile(r"[0-9]+")  # ASCII digits only: str.isdigit() also takes "²", which int() refuses


@dataclass(frozen=True)
class SlurmSettings:
    login: SSHTarget
    partition: str
    shared_dir: str
    runtime: str = "docker"
    price_unit: str = "node-hour"
    gpus: int = 0
    gpu_type: str | None = None
    gpu_flag: str = "gres"
    cpus: int | None = None
    mem: str | None = None
    time: str | None = None
    account: str | None = None
    slurm_conf: str | None = None  # SLURM_CONF for the client commands, where the cluster needs one named
    venv: str | None = None  # runtime venv: the virtual environment's folder on the shared file system
    source_dir: str | None = None  # runtime venv: this project's source on the shared file system

    @property
    def cluster(self) -> str:
        """The login node as written: names the cluster in instance ids and messages."""
        return self.login.display()

    def sbatch_resources(self, nodes: int = 1) -> list[str]:
        """The job's resource flags, one `--key=value` word each: the GPUs are per node (`--gres` counts per node;
        `--gpus` per job, so several nodes take `--gpus-per-node`), the CPUs per process."""
        flags = [f"--partition={self.partition}"]
        if self.gpus:
            kind = f"{self.gpu_type}:" if self.gpu_type else ""
            if self.gpu_flag == "gres":
                flags.append(f"--gres=gpu:{kind}{self.gpus}")
            else:
                flags.append(f"--gpus{'-per-node' if nodes > 1 else ''}={kind}{self.gpus}")
        flags += [f"--cpus-per-task={self.cpus}"] if self.cpus else []
        flags += [f"--mem={self.mem}"] if self.mem else []
        flags += [f"--account={self.account}"] if self.account else []
        return flags


def settings_of(profile: Profile) -> SlurmSettings:
    """The profile's Slurm settings; ProviderError naming the profile and the bad field."""

    def fail(key: str, problem: str) -> ProviderError:
        return ProviderError(f"profile '{profile.name}': extra.{key}: {problem}")

    extra = profile.extra
    unknown = sorted(set(extra) - set(KEYS))
    if unknown:
        raise fail(unknown[0], f"unknown Slurm setting; known: {', '.join(KEYS)}")
    for key in REQUIRED:
        if not extra.get(key):
            raise fail(key, "required for a Slurm profile")
    login = parse_target(extra["login"], extra.get("port"), extra.get("identity_file"))
    runtime = extra.get("runtime", "docker")
    if runtime not in RUNTIMES:
        raise fail("runtime", f"{runtime!r} is not one of {', '.join(RUNTIMES)}")
    price_unit = extra.get("price_unit", "node-hour")
    if price_unit not in PRICE_UNITS:
        raise fail("price_unit", f"{price_unit!r} is not one of {', '.join(PRICE_UNITS)}")
    if price_unit == "gpu-hour" and not profile.has_gpu:
        raise fail("price_unit", "gpu-hour prices need accelerator_count > 0")
    gpu_flag = extra.get("gpu_flag", "gres")
    if gpu_flag not in GPU_FLAGS:
        raise fail("gpu_flag", f"{gpu_flag!r} is not one of {', '.join(GPU_FLAGS)}")
    for key in ("partition", "account"):
        if extra.get(key) and not SLURM_NAME.fullmatch(extra[key]):
            raise fail(key, f"{extra[key]!r} is not a Slurm name (letters, digits, _ . -)")
    if profile.accelerator and profile.has_gpu and not SLURM_NAME.fullmatch(profile.accelerator):
        raise ProviderError(f"profile '{profile.name}': accelerator {profile.accelerator!r} is not a GRES type")
    for key in ("shared_dir", "slurm_conf", "venv", "source_dir"):
        if extra.get(key) and not ABSOLUTE.fullmatch(extra[key]):
            raise fail(key, f"{extra[key]!r} must be an absolute path without spaces")
    cpus = extra.get("cpus")
    if cpus is not None and (not COUNT.fullmatch(cpus) or int(cpus) < 1):
        raise fail("cpus", f"{cpus!r} is not a positive whole number")
    if extra.get("mem") and not MEMORY.fullmatch(extra["mem"]):
        raise fail("mem", f"{extra['mem']!r} is not a Slurm memory size (e.g. 64G, 4096M)")
    if extra.get("time") and not TIME.fullmatch(extra["time"]):
        raise fail("time", f"{extra['time']!r} is not a Slurm time (minutes, HH:MM:SS or D-HH:MM:SS)")
    if runtime == "venv" and not (extra.get("venv") and extra.get("source_dir")):
        raise fail("venv", "runtime venv needs extra.venv and extra.source_dir (paths on the shared file system)")
    if profile.spot is not None:
        raise ProviderError(f"profile '{profile.name}': spot: a Slurm allocation has one price (use on_demand)")
    return SlurmSettings(
        login=login,
        partition=extra["partition"],
        shared_dir=extra["shared_dir"].rstrip("/") or "/",
        runtime=runtime,
        price_unit=price_unit,
        gpus=profile.accelerator_count,
        gpu_type=profile.accelerator if profile.has_gpu else None,
        gpu_flag=gpu_flag,
        cpus=int(cpus) if cpus else None,
        mem=extra.get("mem"),
        time=extra.get("time"),
        account=extra.get("account"),
        slurm_conf=extra.get("slurm_conf"),
        venv=extra.get("venv"),
        source_dir=extra.get("source_dir"),
    )


def slurm_time(seconds: int) -> str:
    """A time limit in Slurm's D-HH:MM:SS, rounded up to the minute."""
    minutes = max(1, -(-seconds // 60))
    days, minutes = divmod(minutes, 24 * 60)
    return f"{days}-{minutes // 60:02d}:{minutes % 60:02d}:00"
