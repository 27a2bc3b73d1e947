"""The CPU image, built for real by `make image-cpu`, running a workload with the logs and the dataset cache
mounted from the host; the CSV and metadata are then read on the host."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import pytest
from image_helpers import REPO, expected_git_commit, image_env, image_labels, inspect, lock_pins, make, run

from benchmarks.logs import metadata_path, read_epoch_log

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PLATFORM = "docker-cpu-test"


def writable_mounts(*folders: Path) -> list[str]:
    """docker-run arguments so the container may write to the host folders: as root on the host, hand them to
    the image's own non-root user (uid 1000); otherwise run the container as the calling user."""
    if os.geteuid() == 0:
        for folder in folders:
            for path in [folder, *folder.rglob("*")]:
                os.chown(path, 1000, 1000)
        return []
    return ["--user", f"{os.getuid()}:{os.getgid()}"]


def test_help_is_the_runners(cpu_image: str) -> None:
    result = run(["docker", "run", "--rm", cpu_image, "--help"])
    assert result.stdout.startswith("usage: python -m benchmarks")
    assert "fetch-data" in result.stdout


def test_make_records_the_checked_out_commit() -> None:
    dry_run = run(["make", "-f", "mk/images.mk", "-n", "image-cpu"], cwd=REPO).stdout
    assert f"--build-arg 'GIT_COMMIT={expected_git_commit()}' " in dry_run


def test_labels_env_and_user(cpu_image: str) -> None:
    pins = lock_pins("bench-cpu")
    labels = image_labels(cpu_image)
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?|unknown", labels["org.opencontainers.image.revision"])
    assert labels["io.keras-cloud-bench.tensorflow.version"] == pins["tensorflow-cpu"]
    assert labels["io.keras-cloud-bench.torch.version"] == pins["torch"] == "2.13.0+cpu"
    assert labels["io.keras-cloud-bench.jax.version"] == pins["jax"]
    assert labels["io.keras-cloud-bench.keras.version"] == pins["keras"]
    env = image_env(cpu_image)
    assert env["BENCH_IMAGE"] == cpu_image
    assert env["BENCH_GIT_COMMIT"] == labels["org.opencontainers.image.revision"]
    assert env["KERAS_HOME"] == "/data/keras"
    assert inspect(cpu_image, "{{.Config.User}}") == "1000:1000"
    whoami = run(["docker", "run", "--rm", "--entrypoint", "id", cpu_image]).stdout
    assert whoami.startswith("uid=1000(bench)")


def test_environment_is_exactly_the_lock(cpu_image: str) -> None:
    """Torch is the CPU build and nothing outside the lock (but the project itself) is installed."""
    script = (
        "import torch, tensorflow as tf, jax; "
        "print(torch.__version__, torch.version.cuda, tf.__version__, jax.devices()[0].platform)"
    )
    result = run(["docker", "run", "--rm", "--entrypoint", "python", cpu_image, "-c", script], timeout=300)
    assert result.stdout.split() == ["2.13.0+cpu", "None", "2.21.0", "cpu"]
    listed = run(["docker", "run", "--rm", "--entrypoint", "pip", cpu_image, "list", "--format", "json"]).stdout
    installed = {re.sub(r"[-_.]+", "-", item["name"]).lower() for item in json.loads(listed)}
    assert installed - set(lock_pins("bench-cpu")) == {"pip", "keras-cloud-bench"}


def test_workload_runs_on_real_data_and_logs_to_the_host(cpu_image: str, keras_cache: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    user = writable_mounts(logs, keras_cache)
    digest = inspect(cpu_image, "{{.Id}}")
    run(
        [
            "docker",
            "run",
            "--rm",
            *user,
            "--network",
            "none",
            "-v",
            f"{logs}:/logs",
            "-v",
            f"{keras_cache}:/data/keras",
            "-e",
            f"BENCH_IMAGE_DIGEST={digest}",
            cpu_image,
            "mnist_mlp",
            "--backend",
            "jax",
            "--dataset",
            "fashion_mnist",
            "--epochs",
            "2",
            "--train-limit",
            "2048",
            "--val-limit",
            "512",
            "--offline",
            "--platform",
            PLATFORM,
            "--out",
            "/logs",
            "--run-id",
            "image-test",
        ],
        timeout=900,
    )
    csv = logs / PLATFORM / "image-test" / "mnist_mlp_jax.csv"
    log = read_epoch_log(csv)
    meta = json.loads(metadata_path(csv).read_text())  # the file as written
    assert [epoch.epoch for epoch in log.epochs] == [0, 1]  # 0-based, as the published logs
    assert meta["status"] == "complete" and meta["epochs_completed"] == 2
    assert meta["container"] == {"image": cpu_image, "digest": digest}
    assert meta["git_commit"] == image_labels(cpu_image)["org.opencontainers.image.revision"]
    assert meta["data"]["dataset"] == "fashion_mnist" and meta["data"]["source"] == "real"
    shipped = {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in (keras_cache / "datasets" / "fashion-mnist").glob("*.gz")
    }
    assert {Path(f["name"]).name: f["sha256"] for f in meta["data"]["files"]} == shipped
    assert meta["software"]["framework_version"] == lock_pins("bench-cpu")["jax"]


def test_make_bench_docker_writes_logs_to_the_host(
    cpu_image: str, keras_cache: Path, tmp_path: Path, build_logs: Path
) -> None:
    """The target with a one-workload slice of the quick suite (the whole suite takes minutes per backend)."""
    logs = tmp_path / "logs"
    make(
        "bench-docker",
        f"IMAGE_CPU={cpu_image}",
        f"LOGS_DIR={logs}",
        f"KERAS_CACHE={keras_cache}",
        "BENCH_ARGS=--backends jax --workloads mnist_mlp --train-limit 1024 --val-limit 256 --epochs 1",
        log=build_logs / "bench-docker.log",
    )
    csvs = sorted(logs.glob("docker-cpu/*/mnist_mlp_jax*.csv"))
    assert len(csvs) == 1, (build_logs / "bench-docker.log").read_text()[-3000:]
    read_epoch_log(csvs[0])
    meta = json.loads(metadata_path(csvs[0]).read_text())
    assert meta["status"] == "complete" and meta["suite"] == "quick"
    assert meta["container"]["digest"] == inspect(cpu_image, "{{.Id}}")
    assert csvs[0].stat().st_uid == os.getuid()
