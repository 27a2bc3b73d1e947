"""The command line of one benchmark container, for every runtime: docker, podman, Apptainer (Singularity) and
enroot through pyxis; and the two steps around it that every place shares: seeding the dataset cache from the
image, and unpacking the run's payload. Standard library only, Python 3.8+: a detached run's agent imports it on
a bare machine (its boot script writes this file beside the agent), as do the lifecycle (orchestrate.containers),
the Slurm script and `make bench-docker` (`python3 -m orchestrate.container_command`).

    container_argv("docker", "keras-cloud-bench:cpu", ["mnist_mlp", "--backend", "jax"],
                   mounts=[("/srv/run/logs", "/logs", False)], env={"HOME": "/tmp"}, user="1000:1000")
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Mapping, Sequence

# The value of the `project` tag or label on everything this project creates (orchestrate.provider names it too).
PROJECT_TAG = "keras-cloud-bench"
RUNTIMES = ("docker", "podman", "apptainer", "singularity", "pyxis")
ENGINES = ("docker", "podman")  # the runtimes with named, labelled containers and an image store to inspect
RUNNER = ("python", "-m", "benchmarks")  # the image's entrypoint, which the exec-style runtimes name themselves
SEED = "/seed"  # where the seeding container sees the dataset cache
SUMS = "SHA256SUMS"  # the payload's manifest, its first member: `sha256sum -c` checks every file against it


def container_argv(
    runtime: str,
    image: str,
    argv: Sequence[str],
    *,
    mounts: Sequence[tuple[str, str, bool]] = (),
    env: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    name: str | None = None,
    user: str | None = None,
    gpus: bool = False,
    engine: Sequence[str] | None = None,
    processes: bool = False,
) -> list[str]:
    """The words that run the image's runner with `argv` in `runtime`: the mounts (host folder, container folder,
    read-only), the environment and (docker, podman) the name, labels and user; the GPUs where `gpus`. `engine` is
    the command that reaches the runtime (`sudo -n docker`), the runtime's name by default. `processes`: the
    container is one of a job's processes, which reach each other over the host's network (and, between GPUs of
    a node, its shared memory)."""
    env = dict(env or {})
    binds = ",".join(_bind(mount) for mount in mounts)
    if runtime in ENGINES:
        words = [*(engine or [runtime]), "run", "--rm"]
        words += ["--name", name] if name else []
        words += ["--user", user] if user else []
        words += [word for key, value in env.items() for word in ("-e", f"{key}={value}")]
        words += [word for mount in mounts for word in ("-v", _bind(mount))]
        words += [word for key, value in (labels or {}).items() for word in ("--label", f"{key}={value}")]
        if gpus:
            words += ["--gpus", "all"] if runtime == "docker" else ["--device", "nvidia.com/gpu=all"]
        if processes:
            words += ["--network", "host", *(["--ipc", "host"] if gpus else [])]
        return [*words, image, *argv]
    if runtime in ("apptainer", "singularity"):
        contain = "--contain" if processes else "--containall"  # --containall would give each its own IPC
        words = [*(engine or [runtime]), "exec", "--cleanenv", contain, "--bind", binds]
        words += ["--env", ",".join(f"{key}={value}" for key, value in env.items())] if env else []
        words += ["--nv"] if gpus else []  # the allocation's GPUs
        return [*words, _registry_image(image), *RUNNER, *argv]
    if runtime == "pyxis":  # srun passes the named variables into the container; the allocation's GPUs are its own
        variables = ["env", *(f"{key}={value}" for key, value in env.items())] if env else []
        words = [*variables, "srun", "--ntasks=1", f"--container-image={image}", f"--container-mounts={binds}"]
        words += [f"--container-env={','.join(env)}"] if env else []
        return [*words, "--no-container-mount-home", *RUNNER, *argv]
    raise ValueError(f"runtime {runtime!r}: one of {', '.join(RUNTIMES)}")


def seed_argv(
    runtime: str, image: str, cache: str, marker: str, *, user: str | None = None, engine: Sequence[str] | None = None
) -> list[str]:
    """The words that copy the datasets an image holds (`$KERAS_HOME/datasets`, where the project's images bake
    them) into the shared dataset cache without overwriting a file, then write `marker` there. The cache is
    mounted over the image's KERAS_HOME in every container, which would otherwise hide what the image holds."""
    script = f'[ -d "$KERAS_HOME/datasets" ] && cp -Rn "$KERAS_HOME/datasets" {SEED}/; touch {SEED}/{marker}'
    if runtime in ENGINES:
        words = [*(engine or [runtime]), "run", "--rm", *(["--user", user] if user else [])]
        return [*words, "-v", f"{cache}:{SEED}", "--entrypoint", "sh", image, "-c", script]
    if runtime in ("apptainer", "singularity"):
        words = [*(engine or [runtime]), "exec", "--containall", "--bind", f"{cache}:{SEED}"]
        return [*words, _registry_image(image), "sh", "-c", script]
    if runtime == "pyxis":
        words = ["srun", "--ntasks=1", f"--container-image={image}", f"--container-mounts={cache}:{SEED}"]
        return [*words, "--no-container-mount-home", "sh", "-c", script]
    raise ValueError(f"runtime {runtime!r}: one of {', '.join(RUNTIMES)}")


def seed_marker(image_id: str) -> str:
    """The cache's note that an image was copied out (once per image, identified by its ID or reference)."""
    plain = image_id[len("sha256:") :] if image_id.startswith("sha256:") else image_id
    return ".seeded-" + "".join(c if c.isalnum() else "-" for c in plain)[:40]


def unpack_payload(folder: str, sha256: str) -> str:
    """The shell command that unpacks the payload archive read from stdin into `folder` and checks it there: its
    manifest must be the planned one (its sha256, which the run spec holds) and every file must match it. What it
    unpacks is its user's alone (umask 077, and no mode of the archive's wider than that)."""
    where = shlex.quote(folder)
    return (
        f"umask 077 && mkdir -p {where} && tar -x -f - -C {where} && chmod -R go= {where} && cd {where} && "
        f'[ "$(sha256sum < {SUMS} | cut -d " " -f 1)" = {shlex.quote(sha256)} ] && sha256sum --quiet --strict -c {SUMS}'
    )


def _bind(mount: tuple[str, str, bool]) -> str:
    source, target, read_only = mount
    return f"{source}:{target}" + (":ro" if read_only else "")


def _registry_image(image: str) -> str:
    return image if "://" in image else f"docker://{image}"


def main(argv: Sequence[str]) -> int:
    """`python3 orchestrate/container_command.py [options] IMAGE -- RUNNER ARGS`: run one docker container in the
    foreground (what `make bench-docker` does), as the orchestrator would run it."""
    parser = argparse.ArgumentParser(prog="container_command.py")
    parser.add_argument("--engine", default="docker", help="the command that reaches the runtime")
    parser.add_argument("--user")
    for option, shape in (("--mount", "HOST:CONTAINER[:ro]"), ("--env", "NAME=VALUE")):
        parser.add_argument(option, action="append", default=[], metavar=shape)
    parser.add_argument("image")
    parser.add_argument("runner", nargs=argparse.REMAINDER, help="-- then the runner's arguments")
    args = parser.parse_args(argv)
    mounts = [(*m.removesuffix(":ro").split(":", 1), m.endswith(":ro")) for m in args.mount]
    env = dict(e.split("=", 1) for e in args.env)
    runner = args.runner[1:] if args.runner[:1] == ["--"] else args.runner
    words = container_argv("docker", args.image, runner, mounts=mounts, env=env, user=args.user,
                           engine=shlex.split(args.engine))  # fmt: skip
    os.execvp(words[0], words)
    return 127  # execvp does not return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
