"""A real one-node Slurm cluster on loopback beside the test sshd, and the catalog that points a profile at it.

The cluster's daemons (munge, slurmctld, slurmd) and the sshd start once for the directory's tests and stop by PID
at the end; the provider reaches the cluster the way it reaches any: over SSH to its "login node" (the test sshd,
through its ssh_config alias), with the cluster's SLURM_CONF named in the profile.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from orchestrate.testing.sshd import SSHServer, start_sshd
from tests.slurm.cluster import SECOND_PARTITION, SlurmCluster, start_cluster
from tests.support.docker import BASE_IMAGE, ENGINE_HINT, image_id, require_engine

PROFILE = "testcluster-cpu"
SECOND_PROFILE = "testcluster-cpu2"  # the cluster's second partition, at another price
PRICE_PER_NODE_HOUR = 0.5
TASK_IMAGE = "kcb-test/slurm-tasks:latest"
# The task image's entrypoint: the runner's arguments in, the runner's file names out. mnist_mlp ends in 2 s,
# imdb_fasttext fails (exit 1), cifar10_cnn runs 10 s (long enough to be requeued), mnist_cnn until the test creates
# release-mnist_cnn in the run's logs folder, anything else 600 s. Each start
# is counted in /logs/starts-<workload>, so a test can tell whether an item ran again.
TASK_ENTRYPOINT = """#!/bin/sh
workload=$1; shift
while [ $# -gt 0 ]; do
  case $1 in
    --backend) backend=$2; shift ;;
    --platform) platform=$2; shift ;;
    --run-id) run_id=$2; shift ;;
    --out) out=$2; shift ;;
  esac
  shift
done
echo start >> "$out/starts-$workload"
stem="$out/$platform/$run_id/${workload}_${backend}"
mkdir -p "$out/$platform/$run_id"
echo epoch,elapsed > "$stem.csv"
echo '{"status": "running"}' > "$stem.json"
trap 'echo "{\\"status\\": \\"partial\\"}" > "$stem.json"; exit 143' TERM
case $workload in
  mnist_mlp) sleep 2 ;;
  imdb_fasttext) echo "failing on purpose" >&2; exit 1 ;;
  cifar10_cnn) sleep 10 & wait $! ;;
  mnist_cnn) while [ ! -e "$out/release-$workload" ]; do sleep 1 & wait $!; done ;;
  *) sleep 600 & wait $! ;;
esac
echo 1,1.0 >> "$stem.csv"
echo '{"status": "complete"}' > "$stem.json"
echo "epoch 1/1 done"
"""


@dataclass
class SlurmSite:
    cluster: SlurmCluster
    server: SSHServer
    shared_dir: Path
    catalog: Path

    def queue(self) -> list[str]:
        """Every job and task in the queue, `jobid|state|name`."""
        return self.cluster.command("squeue", "-h", "-r", "-o", "%i|%T|%j").stdout.split()


def catalog_text(server: SSHServer, cluster: SlurmCluster, shared_dir: Path) -> str:
    return _profile(PROFILE, cluster.partition, PRICE_PER_NODE_HOUR, server, cluster, shared_dir) + _profile(
        SECOND_PROFILE, SECOND_PARTITION, 2 * PRICE_PER_NODE_HOUR, server, cluster, shared_dir
    )


def _profile(name: str, partition: str, price: float, server: SSHServer, cluster: SlurmCluster, shared: Path) -> str:
    return f"""[profiles.{name}]
provider = "slurm"
description = "the one-node test cluster on loopback, partition {partition}"
docker_image = "cpu"
billing_minimum_s = 0
on_demand = {{ usd_per_hour = {price}, date = "2026-11-28", source = "test rate" }}
[profiles.{name}.extra]
login = "{server.alias}"
partition = "{partition}"
shared_dir = "{shared}"
slurm_conf = "{cluster.conf}"
runtime = "docker"
price_unit = "node-hour"
cpus = "1"

"""


@pytest.fixture(scope="package")
def slurm_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmSite]:
    cluster = start_cluster(tmp_path_factory.mktemp("slurm"))
    try:
        server = start_sshd(tmp_path_factory.mktemp("sshd"))
        try:
            shared = tmp_path_factory.mktemp("shared")
            catalog = shared.parent / "slurm-catalog.toml"
            catalog.write_text(catalog_text(server, cluster, shared))
            yield SlurmSite(cluster, server, shared, catalog)
        finally:
            server.stop()
    finally:
        cluster.stop()


@pytest.fixture(scope="package")
def task_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A purpose-built image for the scheduler's MECHANICS (failure, requeue, kill -9): it benchmarks nothing."""
    require_engine()
    if image_id(BASE_IMAGE) is None:
        pytest.fail(f"base image {BASE_IMAGE} is missing; {ENGINE_HINT}")
    workdir = tmp_path_factory.mktemp("task-image")
    (workdir / "entrypoint.sh").write_text(TASK_ENTRYPOINT)
    (workdir / "Dockerfile").write_text(
        f'FROM {BASE_IMAGE}\nCOPY entrypoint.sh /entrypoint.sh\nENTRYPOINT ["sh", "/entrypoint.sh"]\n'
    )
    subprocess.run(["docker", "build", "-q", "-t", TASK_IMAGE, str(workdir)], check=True, capture_output=True)
    return TASK_IMAGE
