"""Static checks of the three Dockerfiles: hadolint, and label defaults that match the locks."""

from __future__ import annotations

import re

import pytest
from image_helpers import REPO, lock_pins, run

DOCKERFILES = ("Dockerfile.cpu", "Dockerfile.gpu", "Dockerfile.cpu-compiled")
HADOLINT = REPO / ".venv" / "bin" / "hadolint"
# Build-argument defaults -> (lock, package) they must equal, per Dockerfile.
VERSION_ARGS = {"KERAS_VERSION": "keras", "JAX_VERSION": "jax", "TORCH_VERSION": "torch"}
TENSORFLOW_PACKAGE = {
    "Dockerfile.cpu": "tensorflow-cpu",
    "Dockerfile.gpu": "tensorflow",
    "Dockerfile.cpu-compiled": "tensorflow-cpu",
}
LOCK = {"Dockerfile.cpu": "bench-cpu", "Dockerfile.gpu": "bench-gpu", "Dockerfile.cpu-compiled": "bench-cpu"}


def arg_defaults(dockerfile: str) -> dict[str, set[str]]:
    """Every `ARG NAME=default` of the file; a name declared in several stages keeps all its defaults."""
    defaults: dict[str, set[str]] = {}
    for name, value in re.findall(r"^ARG (\w+)=(\S*)", (REPO / dockerfile).read_text(), re.MULTILINE):
        defaults.setdefault(name, set()).add(value)
    return defaults


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_hadolint_clean(dockerfile: str) -> None:
    result = run([str(HADOLINT), "--failure-threshold", "info", dockerfile], cwd=REPO, check=False)
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_label_versions_default_to_the_lock(dockerfile: str) -> None:
    pins, defaults = lock_pins(LOCK[dockerfile]), arg_defaults(dockerfile)
    expected = {arg: pins[package] for arg, package in VERSION_ARGS.items()}
    expected["TENSORFLOW_VERSION"] = pins[TENSORFLOW_PACKAGE[dockerfile]]
    assert {arg: defaults.get(arg) for arg in expected} == {arg: {v} for arg, v in expected.items()}


def test_compiled_image_builds_the_locked_tensorflow() -> None:
    assert arg_defaults("Dockerfile.cpu-compiled")["TF_VERSION"] == {lock_pins("bench-cpu")["tensorflow-cpu"]}


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_defaults_build_anywhere(dockerfile: str) -> None:
    """A public base image by default, the runner as entrypoint, a non-root numeric user."""
    text = (REPO / dockerfile).read_text()
    assert arg_defaults(dockerfile)["BASE_IMAGE"] == {"python:3.11-slim-bookworm"}
    assert re.search(r"^USER 1000:1000$", text, re.MULTILINE)
    entrypoint = re.findall(r"^ENTRYPOINT (.*)$", text, re.MULTILINE)
    assert entrypoint in (['["python", "-m", "benchmarks"]'], ['["bench-entrypoint"]'])
