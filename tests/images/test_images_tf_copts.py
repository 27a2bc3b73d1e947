"""docker/tf-copts.sh: TARGET_ARCH -> Bazel compiler flags, and the CPU check of the compiled image.

The flag sets are checked against clang itself in test_images_cpu_compiled.py (the toolchain stage's clang).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from image_helpers import REPO, run

SCRIPT = str(REPO / "docker" / "tf-copts.sh")
HASWELL_FLAGS = "fpu sse sse2 ssse3 sse4_1 sse4_2 popcnt avx avx2 bmi1 bmi2 f16c fma"


def tf_copts(*args: str, **env: str) -> tuple[int, str, str]:
    result = run([SCRIPT, *args], check=False, env={"PATH": "/usr/bin:/bin", **env})
    return result.returncode, result.stdout.strip(), result.stderr.strip()


def fake_cpuinfo(tmp_path: Path, flags: str) -> str:
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: {flags}\n\nprocessor\t: 1\n")
    return str(path)


def known_targets() -> list[str]:
    return tf_copts("--list")[1].split("\n")


def test_every_target_maps_to_march_and_mtune() -> None:
    targets = known_targets()
    assert {"native", "haswell", "skylake-avx512", "x86-64-v3", "znver4"} <= set(targets)
    for target in targets:
        code, flags, _ = tf_copts(target)
        tune = "generic" if target.startswith("x86-64-v") else target
        assert (code, flags) == (0, f"--copt=-march={target} --copt=-mtune={tune}")


def test_cpu_flags_grow_with_the_target() -> None:
    flags = {target: set(tf_copts("--cpu-flags", target)[1].split()) for target in known_targets()}
    assert flags["native"] == set()
    assert {"avx2", "fma"} <= flags["haswell"]
    assert flags["haswell"] < flags["skylake-avx512"] < flags["cascadelake"] < flags["icelake-server"]
    assert "avx512f" not in flags["znver3"] and "avx512f" in flags["znver4"]


@pytest.mark.parametrize("args", [("pentium-mmx",), ("--cpu-flags", "bogus"), ("--check", ""), ("--frobnicate",)])
def test_unknown_input_is_refused(args: tuple[str, ...]) -> None:
    code, out, err = tf_copts(*args)
    assert code == 2 and out == ""
    assert err.startswith("tf-copts: ")


def test_check_passes_when_the_cpu_has_every_flag(tmp_path: Path) -> None:
    assert tf_copts("--check", "haswell", CPUINFO=fake_cpuinfo(tmp_path, HASWELL_FLAGS))[0] == 0


def test_check_names_the_missing_flags(tmp_path: Path) -> None:
    code, _, err = tf_copts("--check", "skylake-avx512", CPUINFO=fake_cpuinfo(tmp_path, HASWELL_FLAGS))
    assert code == 2
    assert "compiled for skylake-avx512" in err
    assert "lacks: avx512f avx512cd avx512bw avx512dq avx512vl." in err


def test_check_matches_whole_flag_names(tmp_path: Path) -> None:
    """'avx512f' must not count as present because 'avx512fp16' is."""
    cpuinfo = fake_cpuinfo(tmp_path, HASWELL_FLAGS + " avx512cd avx512bw avx512dq avx512vl avx512fp16")
    code, _, err = tf_copts("--check", "x86-64-v4", CPUINFO=cpuinfo)
    assert code == 2 and "lacks: avx512f." in err
