"""Getting the benchmark image onto the host: already there, pulled from a registry, streamed from this
machine over SSH (`docker save | docker load`), or built on the host from this checkout.

`auto` picks the cheapest way that gives the host the same image as this machine has: a host that already
holds that image ID costs one `docker image inspect`.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO, cast

import docker
from docker.utils import build as docker_build

from orchestrate.remote import Host, LocalHost

IMAGE_SOURCES = ("auto", "present", "pull", "stream", "build")
SOURCE_TREE = Path(__file__).resolve().parents[1]  # the checkout holding Dockerfile.<variant>

Log = BinaryIO


class ImageError(RuntimeError):
    """The image cannot be made available on the host; the message says why and what to do."""


@dataclass(frozen=True)
class ImageInfo:
    ref: str
    image_id: str
    digest: str  # the registry digest when the image came from one, else the image ID
    how: str  # what this run did to get it there


@dataclass(frozen=True)
class BuildSpec:
    context: Path
    dockerfile: str  # relative to the context
    build_args: dict[str, str]


def default_image_ref(variant: str) -> str:
    return f"keras-cloud-bench:{variant}"


def default_build_spec(variant: str, ref: str) -> BuildSpec | None:
    """Building on the host needs this project's source tree (a checkout, not an installed wheel)."""
    dockerfile = f"Dockerfile.{variant}"
    if not (SOURCE_TREE / dockerfile).is_file():
        return None
    args = {"IMAGE_NAME": ref}
    commit = git_commit()
    if commit:
        args["GIT_COMMIT"] = commit
    return BuildSpec(context=SOURCE_TREE, dockerfile=dockerfile, build_args=args)


def is_registry_ref(ref: str) -> bool:
    """Docker's rule: a first path component with a dot or a port, or `localhost`, names a registry."""
    first, slash, _ = ref.partition("/")
    return bool(slash) and ("." in first or ":" in first or first == "localhost")


def ensure_image(
    host: Host,
    docker_cmd: str,
    ref: str,
    source: str,
    *,
    build: BuildSpec | None,
    log: Log,
    note: Callable[[str], None],
) -> ImageInfo:
    """Make `ref` available to the host's engine by `source`; return what it is and how it got there."""
    if source not in IMAGE_SOURCES:
        raise ImageError(f"unknown image source '{source}'; use one of {', '.join(IMAGE_SOURCES)}")
    remote = _inspect_remote(host, docker_cmd, ref)
    local_id = None if isinstance(host, LocalHost) else _local_image_id(ref)
    how = _choose(source, ref, remote, local_id, build, host)
    if how == "streamed":
        note(f"streaming {ref} from this machine to {host.description}")
        _stream(host, docker_cmd, ref, log)
    elif how == "pulled":
        note(f"pulling {ref} on {host.description}")
        _run_logged(host, f"{docker_cmd} pull {shlex.quote(ref)}", log, f"docker pull {ref}")
    elif how == "built on host":
        assert build is not None
        note(f"building {ref} on {host.description} from {build.context / build.dockerfile}")
        _build(host, docker_cmd, ref, build, log)
    if how != "already on host":
        remote = _inspect_remote(host, docker_cmd, ref)
        if remote is None:
            raise ImageError(f"{ref} is still missing on {host.description} after it was {how}")
    assert remote is not None
    return _info(ref, remote, how)


def _choose(
    source: str, ref: str, remote: dict | None, local_id: str | None, build: BuildSpec | None, host: Host
) -> str:
    if source == "present" or (source == "auto" and remote is not None and local_id in (None, remote["Id"])):
        if remote is None:
            raise ImageError(f"{ref} is not on {host.description} (--image-source present)")
        return "already on host"
    if source == "stream" or (source == "auto" and local_id is not None):
        if isinstance(host, LocalHost):
            raise ImageError("--image-source stream copies an image to another host; this run is local")
        if local_id is None:
            raise ImageError(f"{ref} is not in this machine's Docker engine: build it first (make image-cpu)")
        return "streamed"
    if source == "pull" or (source == "auto" and is_registry_ref(ref)):
        return "pulled"
    if build is None:
        raise ImageError(
            f"{ref} is neither on {host.description} nor on this machine, and there is no Dockerfile to "
            "build it from: build it here (make image-cpu / make image-gpu) or pass --image REGISTRY/NAME:TAG"
        )
    return "built on host"


def _inspect_remote(host: Host, docker_cmd: str, ref: str) -> dict | None:
    result = host.run(f"{docker_cmd} image inspect --format '{{{{json .}}}}' {shlex.quote(ref)}", check=False)
    if result.exit_code != 0:
        return None
    return json.loads(result.stdout)


def _local_image_id(ref: str) -> str | None:
    try:
        return docker.from_env().images.get(ref).id
    except docker.errors.DockerException:  # no such image, or no engine here
        return None


def _stream(host: Host, docker_cmd: str, ref: str, log: Log) -> None:
    client = docker.from_env()
    chunks: Iterator[bytes] = client.images.get(ref).save(chunk_size=1 << 20, named=True)
    code = host.stream(f"{docker_cmd} load", log, stdin=chunks)
    if code != 0:
        raise ImageError(f"`docker load` of {ref} on {host.description} exited {code}; see the run's image.log")


def _build(host: Host, docker_cmd: str, ref: str, spec: BuildSpec, log: Log) -> None:
    context = _context_tar(spec)
    args = " ".join(f"--build-arg {shlex.quote(f'{k}={v}')}" for k, v in sorted(spec.build_args.items()))
    # --force-rm: a failed step's container is removed too, as a successful one's is; none is left on the host
    command = f"{docker_cmd} build --force-rm -f {shlex.quote(spec.dockerfile)} -t {shlex.quote(ref)} {args} -"
    code = host.stream(command, log, stdin=iter(lambda: context.read(1 << 20), b""))
    if code != 0:
        raise ImageError(f"building {ref} on {host.description} exited {code}; see the run's image.log")


def _context_tar(spec: BuildSpec) -> IO[bytes]:
    """The build context as Docker's CLI would send it: .dockerignore applied, the Dockerfile kept.

    Gzipped: `docker build -` recognises a plain tar by its first 512 bytes, and Python's tarfile starts with a PAX
    header there (for the files' sub-second mtimes) that the CLI does not take for an archive; gzip's magic it does.
    """
    ignore_file = spec.context / ".dockerignore"
    exclude = None
    if ignore_file.is_file():
        lines = (line.strip() for line in ignore_file.read_text().splitlines())
        exclude = [line for line in lines if line and not line.startswith("#")]
    # Without a fileobj, tar() returns the temporary file it wrote (its stub also allows a caller's fileobj).
    return cast(
        IO[bytes], docker_build.tar(spec.context, exclude=exclude, dockerfile=(spec.dockerfile, None), gzip=True)
    )


def _run_logged(host: Host, command: str, log: Log, what: str) -> None:
    code = host.stream(command, log)
    if code != 0:
        raise ImageError(f"`{what}` on {host.description} exited {code}; see the run's image.log")


def _info(ref: str, inspect: dict, how: str) -> ImageInfo:
    digests = inspect.get("RepoDigests") or []
    return ImageInfo(ref=ref, image_id=inspect["Id"], digest=digests[0] if digests else inspect["Id"], how=how)


def git_commit(path: Path = SOURCE_TREE) -> str | None:
    """The checkout's commit, for the image's GIT_COMMIT build argument; None outside a git checkout."""
    try:
        done = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True)
    except FileNotFoundError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None
