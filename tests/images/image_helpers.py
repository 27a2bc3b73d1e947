"""Helpers shared by the image tests: paths, commands, lock pins, image inspection."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
VENV_PYTHON = REPO / ".venv" / "bin" / "python"
# Set by .ci/run: shared/ (datasets, the offline Docker tool) and the base image that tool built.
SHARED = Path(os.environ.get("KCB_SHARED_DIR", REPO.parent / "shared"))
BASE_IMAGE = os.environ.get("BASE_IMAGE", "local/python:3.11-slim-bookworm")
TEST_IMAGE_REPO = "keras-cloud-bench-test"
# Tags unique to this test session, so that concurrent sessions on one engine never retag each other's images.
SESSION_TAG = f"s{os.getpid()}"
BUILD_TIMEOUT_S = 3600


def load_verify_lock() -> ModuleType:
    """docker/verify_lock.py as a module (a script copied into the images, not part of a package)."""
    spec = importlib.util.spec_from_file_location("verify_lock", REPO / "docker" / "verify_lock.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lock_pins(name: str) -> dict[str, str]:
    """Pins of requirements/<name>.lock, by normalized project name."""
    return load_verify_lock().read_lock(REPO / "requirements" / f"{name}.lock")


def run(
    cmd: Sequence[str], *, timeout: float = 600, check: bool = True, **kwargs: object
) -> subprocess.CompletedProcess:
    """Run a command with text output captured; a failure shows the command and the end of its output."""
    result = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, **kwargs)
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {result.returncode}:\n{(result.stdout + result.stderr)[-6000:]}")
    return result


def make(target: str, *variables: str, log: Path, docker: str = "docker") -> None:
    """Run a target of mk/images.mk from the repository root with the test's variables, output to `log`."""
    cmd = ["make", "-f", "mk/images.mk", target, f"DOCKER={docker}", f"BASE_IMAGE={BASE_IMAGE}", *variables]
    with log.open("w") as handle:
        result = subprocess.run(cmd, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT_S)
    if result.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {result.returncode}:\n{log.read_text()[-6000:]}")


def client_major(client: str) -> int | None:
    """Major version of a docker client binary, None if it does not say."""
    result = run([client, "version", "--format", "{{.Client.Version}}"], check=False)
    head = result.stdout.strip().split(".")[0]
    return int(head) if head.isdigit() else None


def session_image_tag(name: str) -> str:
    return f"{TEST_IMAGE_REPO}:{name}-{SESSION_TAG}"


def inspect(image: str, template: str) -> str:
    return run(["docker", "image", "inspect", "--format", template, image]).stdout.strip()


def image_labels(image: str) -> dict[str, str]:
    return json.loads(inspect(image, "{{json .Config.Labels}}"))


def image_env(image: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in json.loads(inspect(image, "{{json .Config.Env}}")))


def expected_git_commit() -> str:
    """What mk/images.mk records: HEAD, -dirty when tracked files differ, unknown without a commit."""
    head = run(["git", "rev-parse", "HEAD"], cwd=REPO, check=False)
    if head.returncode != 0:
        return "unknown"
    clean = run(["git", "diff", "--quiet", "HEAD", "--"], cwd=REPO, check=False).returncode == 0
    return head.stdout.strip() + ("" if clean else "-dirty")
