"""The benchmark containers on a host: the command of one (the run spec's, orchestrate.runspec), the run's payload
carried there, the dataset cache seed, finding and stopping a run's containers. Shared by the lifecycle (one run),
the Slurm provider (the payload into its shared folder) and the sweep (recovering the containers of a dead run).

Containers are found by their `project` and `run-id` labels, never by name: `run-id=relp` must not match run
`relp-2`, and a label filter (`label=run-id=relp`) is an exact match.
"""

from __future__ import annotations

import io
import shlex
from collections.abc import Sequence

from orchestrate.container_command import seed_argv, seed_marker, unpack_payload
from orchestrate.hostprep import HostInfo
from orchestrate.images import ImageInfo
from orchestrate.provider import PROJECT_TAG
from orchestrate.remote import Host, RemoteError
from orchestrate.runspec import CHUNK_BYTES, PAYLOAD_FOLDER, Payload, RunSpec, SpecItem, payload_archive

STOP_GRACE_S = 10  # `docker stop` waits this long for the runner to record a partial run


def places(run_dir: str, logs: str, cache: str) -> dict[str, str]:
    """Where a run's mounts are on a host: its logs, the shared dataset cache, and its payload's folders."""
    payload = f"{run_dir}/{PAYLOAD_FOLDER}"
    return {"logs": logs, "cache": cache, "workloads": f"{payload}/workloads", "data": f"{payload}/data"}


def container_command(spec: RunSpec, item: SpecItem, info: HostInfo, image: ImageInfo, machine: str) -> str:
    """The shell command that runs one item's container as the SSH user, who then owns (pulls, deletes) its files."""
    assert spec.run_id is not None  # a run on a host is named before it starts
    where = places(info.run_dir(spec.run_id), info.logs_dir(spec.run_id), info.cache_dir)
    words = spec.container(
        item, "docker", where, image.digest, engine=shlex.split(info.docker), user=f"{info.uid}:{info.gid}",
        labels={"machine": machine},
    )  # fmt: skip
    return shlex.join(words)


def deliver_payload(host: Host, run_dir: str, payload: Payload) -> None:
    """The run's payload into its folder on the host: one archive streamed over the connection (one transfer, however
    many files), unpacked and checked there against its manifest, so what trains is what was checked here."""
    output = io.BytesIO()
    with payload_archive(payload) as archive:
        chunks = iter(lambda: archive.read(CHUNK_BYTES), b"")
        code = host.stream(unpack_payload(f"{run_dir}/{PAYLOAD_FOLDER}", payload.sha256), output, stdin=chunks)
    if code != 0:
        tail = " | ".join(output.getvalue().decode(errors="replace").strip().splitlines()[-3:])
        raise RemoteError(
            f"the run's files did not arrive whole on {host.description} (exit {code}): {tail or 'no output'}"
        )


def seed_dataset_cache(host: Host, info: HostInfo, image: ImageInfo) -> None:
    """The datasets an image holds, copied into the host's cache once per image: the cache's mount would hide them."""
    marker = seed_marker(image.image_id)
    if host.run(f"test -e {shlex.quote(f'{info.cache_dir}/{marker}')}", check=False).exit_code == 0:
        return
    seed = seed_argv("docker", image.ref, info.cache_dir, marker, user=f"{info.uid}:{info.gid}",
                     engine=shlex.split(info.docker))  # fmt: skip
    host.run(shlex.join(seed), timeout=600)


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
