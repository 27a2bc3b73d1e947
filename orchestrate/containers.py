"""The benchmark containers on a host: the `docker run` command, the dataset cache seed, finding and stopping a
run's containers. Shared by the lifecycle (one run) and the sweep (recovering the containers of a dead run).

Containers are found by their `project` and `run-id` labels, never by name: `run-id=relp` must not match run
`relp-2`, and a label filter (`label=run-id=relp`) is an exact match.
"""

from __future__ import annotations

import base64
import io
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.command import RunnerCommand
from orchestrate.data_dir import CONTAINER_DIR as DATA_IN_CONTAINER
from orchestrate.data_dir import DataDir, archive_file, chunks
from orchestrate.hostprep import HostInfo
from orchestrate.images import ImageInfo
from orchestrate.provider import PROJECT_TAG
from orchestrate.remote import Host, RemoteError
from orchestrate.workload_files import CONTAINER_DIR, WorkloadFile

STOP_GRACE_S = 10  # `docker stop` waits this long for the runner to record a partial run
DEFAULT_KERAS_HOME = "/data/keras"
WRITE_CHUNK_BYTES = 48 * 1024  # of base64 per shell command: well under one argument's 128 KiB limit
# Beside the logs in a run's folder (a host's, or a Slurm run's on the shared file system): what is mounted read-only
WORKLOADS_FOLDER = "workloads"
DATA_FOLDER = "data"


@dataclass(frozen=True)
class ContainerSpec:
    """One container run: its name and labels, what it mounts and the runner command it runs."""

    name: str
    run_id: str
    command: RunnerCommand
    gpus: bool = False  # `docker run --gpus all`: the container sees every GPU (the runner's --gpus picks how many)


def docker_run_command(spec: ContainerSpec, info: HostInfo, image: ImageInfo) -> str:
    """The shell command that runs one container as the SSH user, with the run's logs and the dataset cache."""
    keras_home = image.keras_home or DEFAULT_KERAS_HOME
    parts = [
        *shlex.split(info.docker),
        "run",
        "--rm",
        "--name",
        spec.name,
        "--user",
        f"{info.uid}:{info.gid}",  # files it writes belong to the SSH user, who pulls and deletes them
        "-e",
        "HOME=/tmp",  # that user has no home in the image
        "-e",
        f"KERAS_HOME={keras_home}",
        "-e",
        f"BENCH_IMAGE_DIGEST={image.digest}",
        "-v",
        f"{info.logs_dir(spec.run_id)}:/logs",
        "-v",
        f"{info.cache_dir}:{keras_home}",
        "--label",
        f"project={PROJECT_TAG}",
        "--label",
        f"run-id={spec.run_id}",
    ]
    if spec.command.workload_files:  # the user's workload files, carried beside the logs: the image stays as it is
        parts += ["-v", f"{workloads_dir(info, spec.run_id)}:{CONTAINER_DIR}:ro"]
    if spec.command.data_dir:  # the user's data folder, carried beside the logs
        parts += ["-v", f"{data_dir_on_host(info, spec.run_id)}:{DATA_IN_CONTAINER}:ro"]
    if spec.gpus:
        parts += ["--gpus", "all"]
    parts += [image.ref, *spec.command.argv(entrypoint=True)]
    return shlex.join(parts)


def workloads_dir(info: HostInfo, run_id: str) -> str:
    return f"{info.run_dir(run_id)}/{WORKLOADS_FOLDER}"


def put_workload_files(host: Host, info: HostInfo, run_id: str, files: Sequence[WorkloadFile]) -> None:
    """Each workload file into the run's folder on the host (see `copy_workload_files`)."""
    copy_workload_files(host, workloads_dir(info, run_id), files)


def copy_workload_files(host: Host, folder: str, files: Sequence[WorkloadFile]) -> None:
    """Each workload file into `folder` on the host, its bytes checked there against the planned hash (the runs
    record that hash), so what trains is what was checked here."""
    host.run(f"mkdir -p {host.quote(folder)}")
    for file in files:
        target = host.quote(f"{folder}/{file.path.name}")
        encoded = base64.b64encode(file.path.read_bytes()).decode()
        host.run(f": > {target}.b64")
        for start in range(0, len(encoded), WRITE_CHUNK_BYTES):
            host.run(f"printf %s {encoded[start : start + WRITE_CHUNK_BYTES]} >> {target}.b64")
        host.run(f"base64 -d {target}.b64 > {target} && rm -f {target}.b64 && chmod a+r {target}")
        found = host.run(f"sha256sum {target}").stdout.split(" ", 1)[0]
        if found != file.sha256:
            raise RemoteError(
                f"{file.path.name} arrived on {host.description} as sha256 {found[:12]}, "
                f"not {file.sha256[:12]}: it changed since it was checked"
            )


def data_dir_on_host(info: HostInfo, run_id: str) -> str:
    return f"{info.run_dir(run_id)}/{DATA_FOLDER}"


def put_data_dir(host: Host, info: HostInfo, run_id: str, data: DataDir) -> None:
    """The user's data folder into the run's folder on the host (see `unpack_data_dir`)."""
    unpack_data_dir(host, data_dir_on_host(info, run_id), data)


def unpack_data_dir(host: Host, target: str, data: DataDir) -> None:
    """The user's data folder into `target` on the host, as one tar streamed over the connection (one transfer,
    however many files), then its file count checked there. Removed with the run's folder."""
    folder = host.quote(target)
    output = io.BytesIO()
    with archive_file(data) as archive:
        code = host.stream(f"mkdir -p {folder} && tar -x -f - -C {folder}", output, stdin=chunks(archive))
    if code != 0:
        tail = " | ".join(output.getvalue().decode(errors="replace").strip().splitlines()[-3:])
        raise RemoteError(f"could not unpack --data-dir on {host.description} (exit {code}): {tail or 'no output'}")
    found = int(host.run(f"find {folder} -type f | wc -l").stdout.strip() or 0)
    if found != len(data.files):
        raise RemoteError(f"--data-dir arrived on {host.description} as {found} file(s), not {len(data.files)}")


def seed_dataset_cache(host: Host, info: HostInfo, image: ImageInfo) -> None:
    """An image that bakes the datasets in would hide them under the mounted cache: copy them out once."""
    if not image.bakes_datasets or not image.keras_home:
        return
    marker = f"{info.cache_dir}/.seeded-{image.image_id.removeprefix('sha256:')[:12]}"
    if host.run(f"test -e {shlex.quote(marker)}", check=False).exit_code == 0:
        return
    host.run(
        f"{info.docker} run --rm --user {info.uid}:{info.gid} -v {shlex.quote(info.cache_dir)}:/seed "
        f"--entrypoint sh {shlex.quote(image.ref)} -c "
        + shlex.quote(f'cp -Rn "{image.keras_home}"/. /seed/ && touch /seed/{marker.rsplit("/", 1)[1]}'),
        timeout=600,
    )


def run_containers(host: Host, docker: str, run_id: str | None = None) -> list[tuple[str, str]]:
    """(name, run id) of every container of this project on the host, running or not; only `run_id`'s if given."""
    filters = [f"label=project={PROJECT_TAG}"] + ([f"label=run-id={run_id}"] if run_id is not None else [])
    listed = host.run(
        f"{docker} ps -a {' '.join(f'--filter {shlex.quote(f)}' for f in filters)} "
        "--format '{{.Names}} {{.Label \"run-id\"}}'",
        timeout=60,
    )
    pairs = (line.split(" ", 1) for line in listed.stdout.splitlines() if line.strip())
    return [(pair[0], pair[1] if len(pair) > 1 else "") for pair in pairs]


def stop_containers(host: Host, docker: str, names: Sequence[str]) -> tuple[list[str], list[str]]:
    """`docker stop` (SIGTERM first: the runner records a partial run) then remove each; (stopped, failures)."""
    stopped: list[str] = []
    failures: list[str] = []
    for name in names:
        try:
            result = host.run(
                f"{docker} stop -t {STOP_GRACE_S} {shlex.quote(name)}", check=False, timeout=STOP_GRACE_S + 60
            )
            host.run(f"{docker} rm -f {shlex.quote(name)}", check=False, timeout=60)
        except RemoteError as exc:
            failures.append(f"could not stop container {name} on {host.description}: {exc}")
            continue
        if result.exit_code == 0:
            stopped.append(f"stopped container {name} on {host.description}")
        elif "No such container" not in result.stderr:  # --rm removed it as it ended: nothing to stop
            failures.append(f"could not stop container {name} on {host.description}: {result.stderr.strip()}")
    return stopped, failures
