"""Prepare the benchmark host: a usable Docker engine (and NVIDIA's container toolkit on GPU hosts), the run's
directories and the dataset cache. Every step checks first and changes nothing that is already right, so
preparing twice is cheap (a warm host costs a few short commands).
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass

from orchestrate.private_files import private
from orchestrate.remote import Host

# Docker from the distribution's packages: docker.io on Debian/Ubuntu, docker on Amazon Linux/Fedora/RHEL.
INSTALL_DOCKER = r"""
set -eu
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo -n"
if command -v apt-get >/dev/null 2>&1; then
  $SUDO apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io
elif command -v dnf >/dev/null 2>&1; then
  $SUDO dnf install -y -q docker
elif command -v yum >/dev/null 2>&1; then
  $SUDO yum install -y -q docker
else
  echo "no apt-get, dnf or yum on this host: install Docker by hand" >&2; exit 1
fi
$SUDO systemctl enable --now docker 2>/dev/null || $SUDO service docker start
[ "$(id -u)" = 0 ] || $SUDO usermod -aG docker "$(id -un)"
"""

# NVIDIA's documented install of the container toolkit
# (docs.nvidia.com/datacenter/cloud-native/container-toolkit), then registering its runtime with Docker.
# The GPU driver must already be there (the catalog's GPU images ship it): installing one needs a reboot.
INSTALL_NVIDIA_TOOLKIT = r"""
set -eu
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo -n"
base=https://nvidia.github.io/libnvidia-container
if command -v apt-get >/dev/null 2>&1; then
  keyring=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg
  curl -fsSL "$base/gpgkey" | $SUDO gpg --batch --yes --dearmor -o "$keyring"
  curl -fsSL "$base/stable/deb/nvidia-container-toolkit.list" \
    | sed "s#deb https://#deb [signed-by=$keyring] https://#g" \
    | $SUDO tee /etc/apt/sources.list.d/nvidia-container-toolkit.list >/dev/null
  $SUDO apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q nvidia-container-toolkit
elif command -v dnf >/dev/null 2>&1 || command -v yum >/dev/null 2>&1; then
  curl -fsSL "$base/stable/rpm/nvidia-container-toolkit.repo" \
    | $SUDO tee /etc/yum.repos.d/nvidia-container-toolkit.repo >/dev/null
  if command -v dnf >/dev/null 2>&1; then $SUDO dnf install -y -q nvidia-container-toolkit
  else $SUDO yum install -y -q nvidia-container-toolkit; fi
else
  echo "no apt-get, dnf or yum on this host: install the NVIDIA container toolkit by hand" >&2; exit 1
fi
$SUDO nvidia-ctk runtime configure --runtime=docker
$SUDO systemctl restart docker 2>/dev/null || $SUDO service docker restart
"""


DRIVER_POLL_S = 10.0


class HostSetupError(RuntimeError):
    """The host cannot run the benchmark containers; the message says what is missing and how to fix it."""


@dataclass(frozen=True)
class HostInfo:
    docker: str  # the command prefix that reaches the engine: "docker" or "sudo -n docker"
    uid: int
    gid: int
    home: str
    root: str  # absolute: <remote dir>, holding cache/ and runs/
    installed: tuple[str, ...] = ()  # what this preparation installed

    @property
    def cache_dir(self) -> str:
        return f"{self.root}/cache/keras"

    def run_dir(self, run_id: str) -> str:
        return run_dir(self.root, run_id)

    def logs_dir(self, run_id: str) -> str:
        return f"{self.run_dir(run_id)}/logs"


def run_dir(root: str, run_id: str) -> str:
    """A run's folder under the host's work folder; its `logs/` is mounted at the container's /logs."""
    return f"{root}/runs/{run_id}"


def prepare_host(
    host: Host,
    *,
    remote_dir: str,
    run_id: str,
    gpu: bool,
    install: bool,
    driver_wait_s: float = 0.0,
    new_run: bool = True,
) -> HostInfo:
    """Make the host ready; HostSetupError with the fix when it cannot be, and `install` is False.

    `driver_wait_s`: how long a GPU host may take to get its NVIDIA driver working (cloud images install it
    at first boot); 0 for a host that should already have it. `new_run`: the run's folder must not exist yet
    (it would hold another run's results under this run id: refused, never overwritten).
    """
    installed: list[str] = []
    docker = _docker_command(host)
    if docker is None:
        if not install:
            raise HostSetupError(
                f"Docker is not usable on {host.description}: install Docker and add the user to the docker "
                "group (https://docs.docker.com/engine/install/), or pass --install-host-software to let the "
                "orchestrator install it (needs root or passwordless sudo)"
            )
        _install(host, INSTALL_DOCKER, "Docker")
        installed.append("docker")
        docker = _docker_command(host)
        if docker is None:
            raise HostSetupError(f"Docker was installed on {host.description} but `docker info` still fails")
    if gpu:
        _check_gpu(host, docker, install, installed, driver_wait_s)
    ids = host.run('printf "%s %s %s" "$(id -u)" "$(id -g)" "$HOME"').stdout.split(" ", 2)
    uid, gid, home = int(ids[0]), int(ids[1]), ids[2]
    root = remote_dir.replace("~", home, 1) if remote_dir.startswith("~") else remote_dir
    if not root.startswith("/"):
        root = f"{home}/{root}"
    info = HostInfo(docker=docker, uid=uid, gid=gid, home=home, root=root, installed=tuple(installed))
    if new_run and host.run(f"test -e {host.quote(info.run_dir(run_id))}", check=False).exit_code == 0:
        raise HostSetupError(
            f"run id {run_id} already has a folder on {host.description} ({info.run_dir(run_id)}): its results "
            "are not overwritten; choose another --run-id, or recover it with `python -m orchestrate sweep`"
        )
    host.run(private(f"mkdir -p {host.quote(info.cache_dir)}/datasets {host.quote(info.logs_dir(run_id))}"))
    host.run(f"chmod 700 {host.quote(info.run_dir(run_id))}")  # also where runs/ existed, made under another umask
    return info


def _docker_command(host: Host) -> str | None:
    for candidate in ("docker", "sudo -n docker"):
        if host.run(f"{candidate} info --format '{{{{.ServerVersion}}}}'", check=False, timeout=60).exit_code == 0:
            return candidate
    return None


def _check_gpu(host: Host, docker: str, install: bool, installed: list[str], driver_wait_s: float) -> None:
    deadline = time.monotonic() + driver_wait_s
    while host.run("nvidia-smi -L", check=False, timeout=60).exit_code != 0:
        if time.monotonic() >= deadline:
            waited = f" within {driver_wait_s:g} s" if driver_wait_s else ""
            raise HostSetupError(
                f"no working NVIDIA driver on {host.description}{waited} (`nvidia-smi -L` failed): use a GPU "
                "image with the driver installed, or install it and reboot"
            )
        time.sleep(DRIVER_POLL_S)
    runtimes = host.run(f"{docker} info --format '{{{{json .Runtimes}}}}'", check=False).stdout
    if "nvidia" in runtimes:
        return
    if not install:
        raise HostSetupError(
            f"Docker on {host.description} has no NVIDIA runtime: install the NVIDIA container toolkit "
            "(https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html) "
            "or pass --install-host-software"
        )
    _install(host, INSTALL_NVIDIA_TOOLKIT, "the NVIDIA container toolkit")
    installed.append("nvidia-container-toolkit")


def _install(host: Host, script: str, what: str) -> None:
    output = io.BytesIO()
    code = host.stream("bash -s", output, stdin=[script.encode()])
    if code != 0:
        tail = " | ".join(output.getvalue().decode(errors="replace").strip().splitlines()[-5:])
        raise HostSetupError(f"installing {what} on {host.description} failed (exit {code}): {tail}")


def clean_run_dir(host: Host, info: HostInfo, run_id: str) -> None:
    """Delete the run's folder on the host (its logs were pulled); the dataset cache stays for the next run.

    Containers run as the SSH user (`--user UID:GID`), so that user can delete everything they wrote.
    """
    host.run(f"rm -rf {host.quote(info.run_dir(run_id))}")
