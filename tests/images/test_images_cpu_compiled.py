"""The source-compiled CPU image, as far as it can be built here.

Built for real: the `toolchain` stage (everything before the TensorFlow source fetch, which this machine cannot
reach), with the flag mapping checked against its clang; and the prebuilt-wheel path, with PyPI's tensorflow-cpu
wheel standing in for a compiled one. That last build tests the wiring only (stage choice, install beside the
pinned JAX/PyTorch, labels, entrypoint CPU check), nothing about speed. The compile itself is not run here.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from image_helpers import BASE_IMAGE, REPO, image_labels, inspect, lock_pins, make, run, session_image_tag

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# clang's predefined macro -> the /proc/cpuinfo flag of the same extension.
MACRO_TO_CPU_FLAG = {
    "SSE4_2": "sse4_2",
    "POPCNT": "popcnt",
    "AVX": "avx",
    "AVX2": "avx2",
    "BMI": "bmi1",
    "BMI2": "bmi2",
    "F16C": "f16c",
    "FMA": "fma",
    "AVX512F": "avx512f",
    "AVX512CD": "avx512cd",
    "AVX512BW": "avx512bw",
    "AVX512DQ": "avx512dq",
    "AVX512VL": "avx512vl",
    "AVX512VNNI": "avx512_vnni",
    "AVX512IFMA": "avx512ifma",
    "AVX512VBMI": "avx512vbmi",
    "AVX512VBMI2": "avx512_vbmi2",
    "AVX512BITALG": "avx512_bitalg",
    "AVX512VPOPCNTDQ": "avx512_vpopcntdq",
    "AVX512BF16": "avx512_bf16",
    "AVX512FP16": "avx512_fp16",
    "AVX512VP2INTERSECT": "avx512_vp2intersect",
    "AMX_TILE": "amx_tile",
    "AMX_BF16": "amx_bf16",
    "AMX_INT8": "amx_int8",
    "AVXVNNI": "avx_vnni",
}
STAND_IN_DIR = "wheelhouse/tf-stand-in-pypi"


def build_toolchain(client: str, target_arch: str, check: bool = True):
    return run(
        [
            client,
            "build",
            "-f",
            "Dockerfile.cpu-compiled",
            "--target",
            "toolchain",
            "--build-arg",
            f"BASE_IMAGE={BASE_IMAGE}",
            "--build-arg",
            f"TARGET_ARCH={target_arch}",
            "-t",
            session_image_tag("toolchain"),
            ".",
        ],
        cwd=REPO,
        timeout=1800,
        check=check,
        env={**os.environ, "DOCKER_BUILDKIT": "1"},
    )


@pytest.fixture(scope="module")
def toolchain_image(buildkit_docker: str) -> str:
    build_toolchain(buildkit_docker, "x86-64-v3")
    return session_image_tag("toolchain")


def test_cpu_flags_are_what_clang_enables_for_each_target(toolchain_image: str) -> None:
    script = (
        'for t in $(tf-copts --list | grep -v "^native$"); do '
        'echo "$t: $(tf-copts --cpu-flags "$t") |" '
        '$(clang-19 $(tf-copts "$t" | sed "s/--copt=//g") -dM -E -x c /dev/null | grep -o "__[A-Z0-9_]*__"); done'
    )
    output = run(["docker", "run", "--rm", "--entrypoint", "bash", toolchain_image, "-c", script]).stdout
    targets = 0
    for line in output.splitlines():
        target, rest = line.split(": ", 1)
        declared, macros = rest.split("|")
        enabled = {MACRO_TO_CPU_FLAG[m.strip("_")] for m in macros.split() if m.strip("_") in MACRO_TO_CPU_FLAG}
        assert set(declared.split()) == enabled, target
        targets += 1
    assert targets == 13


def test_unknown_target_fails_before_the_source_fetch(buildkit_docker: str, toolchain_image: str) -> None:
    result = build_toolchain(buildkit_docker, "pentium4-turbo", check=False)
    assert result.returncode != 0
    assert "tf-copts: unknown TARGET_ARCH 'pentium4-turbo'" in result.stdout + result.stderr


@pytest.fixture(scope="module")
def stand_in_wheel() -> str:
    """PyPI's tensorflow-cpu wheel, in the build context, posing as a compiled one."""
    pin = lock_pins("bench-cpu")["tensorflow-cpu"]
    folder = REPO / STAND_IN_DIR
    wheels = sorted(folder.glob(f"tensorflow_cpu-{pin}-cp311-*.whl"))
    if not wheels:
        run(
            [
                str(REPO / ".venv/bin/python"),
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary",
                ":all:",
                "-d",
                str(folder),
                f"tensorflow-cpu=={pin}",
            ],
            timeout=900,
        )
        wheels = sorted(folder.glob(f"tensorflow_cpu-{pin}-cp311-*.whl"))
    return str(wheels[0].relative_to(REPO))


@pytest.fixture(scope="module")
def wiring_image(buildkit_docker: str, stand_in_wheel: str, build_logs: Path) -> str:
    tag = session_image_tag("cpu-compiled-wiring")
    make(
        "image-cpu-compiled",
        "TARGET_ARCH=x86-64-v2",
        f"TF_WHEEL={stand_in_wheel}",
        f"IMAGE_CPU_COMPILED={tag}",
        "DATASETS=none",
        docker=buildkit_docker,
        log=build_logs / "image-cpu-compiled.log",
    )
    return tag


def test_prebuilt_wheel_is_installed_and_labelled(wiring_image: str) -> None:
    labels = image_labels(wiring_image)
    assert labels["io.keras-cloud-bench.target-arch"] == "x86-64-v2"
    assert labels["io.keras-cloud-bench.tensorflow.wheel-source"] == "prebuilt"
    script = "import tensorflow as tf, torch, jax; print(tf.__version__, torch.__version__, jax.__version__)"
    versions = run(["docker", "run", "--rm", "--entrypoint", "python", wiring_image, "-c", script], timeout=300)
    pins = lock_pins("bench-cpu")
    assert versions.stdout.split() == [pins["tensorflow-cpu"], pins["torch"], pins["jax"]]


def test_wheel_file_is_in_no_layer(wiring_image: str) -> None:
    """Installed through a bind mount: the final image holds the installed package, never the .whl."""
    found = run(
        [
            "docker",
            "run",
            "--rm",
            "--user",
            "0",
            "--entrypoint",
            "find",
            wiring_image,
            "/",
            "-xdev",
            "-name",
            "tensorflow*.whl",
        ]
    )
    assert found.stdout == ""
    history = run(["docker", "history", "--no-trunc", "--format", "{{.Size}}\t{{.CreatedBy}}", wiring_image])
    assert not re.search(r"COPY .*tensorflow", history.stdout)


def test_entrypoint_refuses_a_cpu_without_the_targets_flags(wiring_image: str, tmp_path: Path) -> None:
    assert run(["docker", "run", "--rm", wiring_image, "--help"]).stdout.startswith("usage: python -m benchmarks")
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse sse2 ssse3 sse4_1\n")
    refused = run(
        [
            "docker",
            "run",
            "--rm",
            "-v",
            f"{cpuinfo}:/tmp/cpuinfo:ro",
            "-e",
            "CPUINFO=/tmp/cpuinfo",
            wiring_image,
            "--help",
        ],
        check=False,
    )
    assert refused.returncode == 2
    assert "compiled for x86-64-v2, but this CPU lacks: sse4_2 popcnt." in refused.stderr
    assert inspect(wiring_image, "{{.Config.User}}") == "1000:1000"
