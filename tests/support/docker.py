"""The Docker engine and the project's images, for tests that need them.

    from tests.support.docker import build_cpu_image, require_engine, containers_of_run

The engine and images are real; a missing engine FAILS the test with the command that provides it
(`bash ../shared/tools/docker-offline.sh` starts dockerd and builds the offline base image). `build_cpu_image`
builds the CPU image from this checkout through `make image-cpu` (mk/images.mk); Docker's layer cache makes
a rebuild after a source change quick.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Its own tag, so a rebuild by another test session cannot retag it mid-run; the layers are shared through the
# build cache with tests/images, which builds the same Dockerfile.
TEST_CPU_IMAGE = "keras-cloud-bench-orchestrate-test:cpu"
BASE_IMAGE = os.environ.get("BASE_IMAGE", "local/python:3.11-slim-bookworm")
BUILD_TIMEOUT_S = 3600
ENGINE_HINT = "start one with: bash ../shared/tools/docker-offline.sh"


def require_engine() -> None:
    try:
        done = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, timeout=60)
    except FileNotFoundError:
        pytest.fail(f"no docker client on PATH; {ENGINE_HINT}")
    if done.returncode != 0:
        pytest.fail(f"no Docker engine answers ({done.stderr.decode().strip()}); {ENGINE_HINT}")


def image_id(ref: str) -> str | None:
    done = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def build_cpu_image(log: Path, tag: str = TEST_CPU_IMAGE) -> str:
    """`make image-cpu` for this checkout (no baked datasets: tests mount a filled cache); return the tag."""
    require_engine()
    if image_id(BASE_IMAGE) is None:
        pytest.fail(f"base image {BASE_IMAGE} is missing; {ENGINE_HINT}")
    command = [
        "make",
        "-f",
        "mk/images.mk",
        "image-cpu",
        f"IMAGE_CPU={tag}",
        "DATASETS=none",
        f"BASE_IMAGE={BASE_IMAGE}",
    ]
    with log.open("w") as out:
        done = subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT_S)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(command)} exited {done.returncode}:\n{log.read_text()[-4000:]}")
    return tag


# The mechanics image's entrypoint: the runner's arguments in, the runner's file names out, a sleep between.
MECHANICS_ENTRYPOINT = """#!/bin/sh
workload=$1; shift
while [ $# -gt 0 ]; do
  case $1 in
    --backend) backend=$2; shift ;;
    --platform) platform=$2; shift ;;
    --run-id) run_id=$2; shift ;;
    --out) out=$2; shift ;;
    --repeat-index) repeat=$(printf '.r%02d' "$2"); shift ;;
  esac
  shift
done
stem="$out/$platform/$run_id/${workload}_${backend}${repeat}"
mkdir -p "$out/$platform/$run_id"
echo epoch,elapsed > "$stem.csv"
echo '{"status": "running"}' > "$stem.json"
case $workload in
  mnist_mlp) sleep 2 ;;
  imdb_fasttext) sleep 6 ;;
  cifar10_cnn) trap 'echo "{\\"status\\": \\"partial\\"}" > "$stem.json"; exit 143' TERM; sleep 600 & wait $! ;;
  imdb_bidirectional_lstm)  # chatty: prints without pause, an epoch every 0.2 s, until SIGTERM
    trap 'echo "{\\"status\\": \\"partial\\"}" > "$stem.json"; exit 143' TERM
    epoch=0
    while true; do
      epoch=$((epoch + 1)); echo "$epoch,0.2" >> "$stem.csv"; echo "epoch $epoch done"
      i=0; while [ $i -lt 200 ]; do echo "step $i of epoch $epoch: loss 0.1"; i=$((i + 1)); done
      sleep 0.2 & wait $!
    done ;;
  *) sleep 600 ;;
esac
echo 1,1.0 >> "$stem.csv"
echo '{"status": "complete"}' > "$stem.json"
"""


def build_mechanics_image(workdir: Path, tag: str = "kcb-test/lifecycle-mechanics:latest") -> str:
    """A purpose-built image for lifecycle MECHANICS tests only (interrupts, preemption, relaunch, recovery): it
    benchmarks nothing. Its entrypoint takes the runner's arguments, writes a CSV and a metadata JSON under the
    runner's file names (status "running"), sleeps (2 s for mnist_mlp, 6 s for imdb_fasttext, 600 s for anything
    else, so a test can interrupt a run that is surely still going), then marks them complete. cifar10_cnn stops
    at SIGTERM as the runner does (metadata "partial", exit 143); imdb_bidirectional_lstm too, and until then
    prints without pause and adds an epoch to its CSV every 0.2 s; anything else ignores SIGTERM (PID 1 without a
    handler), like a slow-stopping container: `docker stop` waits its grace period, then kills it."""
    require_engine()
    if image_id(BASE_IMAGE) is None:
        pytest.fail(f"base image {BASE_IMAGE} is missing; {ENGINE_HINT}")
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "entrypoint.sh").write_text(MECHANICS_ENTRYPOINT)
    (workdir / "Dockerfile").write_text(
        f'FROM {BASE_IMAGE}\nCOPY entrypoint.sh /entrypoint.sh\nENTRYPOINT ["sh", "/entrypoint.sh"]\n'
    )
    subprocess.run(["docker", "build", "-q", "-t", tag, str(workdir)], check=True, capture_output=True, timeout=600)
    return tag


def containers_of_run(run_id: str) -> list[str]:
    """Names of containers (running or not) labelled with exactly this run id, as the orchestrator labels them."""
    done = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"label=run-id={run_id}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split()


def remove_containers_of_run(run_id: str) -> None:
    """Test cleanup only: whatever a failed assertion left behind."""
    for name in containers_of_run(run_id):
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
