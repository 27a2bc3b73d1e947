"""`make bench-<profile>`: a pattern rule for any profile of any catalog; every knob reaches the CLI as data; every
target that can launch or spend honours DRY_RUN.

The sandbox tests run every target for real with the programs it starts (python, docker, uv, ruff, mypy,
lint-imports) replaced by a recorder, so what each command received is checked word for word and nothing is
launched."""

from __future__ import annotations

import itertools
import os
import re
import shlex
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FRAGMENTS = ["-f", "mk/orchestrate.mk"]
MAKEFILES = [ROOT / "Makefile", *sorted((ROOT / "mk").glob("*.mk"))]


def make_dry(*args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("make") is None:
        pytest.fail("GNU make is missing (apt-get install -y make)")
    return subprocess.run(["make", "-s", "-n", *FRAGMENTS, *args], cwd=ROOT, capture_output=True, text=True)


def test_any_profile_has_a_target_without_a_generated_file(tmp_path: Path) -> None:
    """A user or plug-in catalog's profile runs through the pattern rule: no tracked file lists the profiles."""
    catalog = tmp_path / "catalog.toml"
    catalog.write_text('[profiles.mycloud-a10]\nprovider = "ssh"\n')
    assert not (ROOT / "mk" / "profiles.mk").exists()
    done = make_dry("bench-mycloud-a10", f"CATALOG={catalog}")
    assert done.returncode == 0, done.stderr
    assert shlex.split(done.stdout)[3:8] == ["run", "--profile", "mycloud-a10", "--catalog", str(catalog)]
    dry = subprocess.run(
        ["make", "-s", "bench-mycloud-a10", f"CATALOG={catalog}", "HOST=me@box", "DRY_RUN=1"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert "Plan (dry run: nothing is launched)" in dry.stdout and "mycloud-a10: me@box" in dry.stdout


@pytest.mark.parametrize(
    "variable",
    [
        "HOST",
        "PORT",
        "IDENTITY",
        "BACKENDS",
        "WORKLOADS",
        "RUN_PLATFORM",
        "SUITE",
        "REPEATS",
        "PROVIDER_SETTINGS",
        "BUCKET",
        "DATA_DIR",
    ],
)
def test_make_variables_never_reach_the_shell_as_syntax(tmp_path: Path, variable: str) -> None:
    """`make bench-ssh 'HOST=x;touch /tmp/p;true' DRY_RUN=1` once ran `touch` here, then a real run, and exit 0."""
    marker = tmp_path / "pwned"
    host = [] if variable == "HOST" else ["HOST=me@box"]
    done = subprocess.run(
        ["make", "-s", "bench-ssh", *host, f"{variable}=x --ssh-timeout 1;touch {marker};true", "DRY_RUN=1"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert not marker.exists()
    if variable == "IDENTITY":  # a key path is only read at connect time: the dry run names it, whole, as data
        assert f"the SSH key x --ssh-timeout 1;touch {marker};true does not exist" in done.stdout
    else:  # the CLI refused the value in one line, and make failed with it
        assert done.returncode != 0 and done.stderr.startswith("error: ") and "Plan" not in done.stdout


def test_cloud_target_passes_the_knobs() -> None:
    done = make_dry("bench-gce-t4", "SUITE=full", "BACKENDS=jax,torch", "WORKLOADS=mnist_mlp", "DRY_RUN=1", "SPOT=1")
    assert done.returncode == 0, done.stderr
    assert shlex.split(done.stdout) == [
        ".venv/bin/python", "-m", "orchestrate", "run", "--profile", "gce-t4", "--suite", "full",
        "--backends", "jax,torch", "--workloads", "mnist_mlp", "--dry-run", "--spot",
    ]  # fmt: skip


def test_a_workload_file_and_a_data_folder_reach_the_cli() -> None:
    done = make_dry("bench-local", "WORKLOAD_FILE=my model.py", "DATA_DIR=my data")
    words = shlex.split(done.stdout)
    assert (
        words[words.index("--workload-file") + 1] == "my model.py" and words[words.index("--data-dir") + 1] == "my data"
    )


def test_repeats_gpus_and_batch_policy_reach_the_cli() -> None:
    done = make_dry("bench-ssh-gpu", "HOST=me@box", "REPEATS=3", "GPUS=all", "BATCH_POLICY=per-device")
    words = shlex.split(done.stdout)
    assert words[words.index("--repeats") + 1] == "3" and words[words.index("--gpus") + 1] == "all"
    assert words[words.index("--batch-policy") + 1] == "per-device"


def test_nodes_reach_the_cli() -> None:
    words = shlex.split(make_dry("bench-ssh-gpu", "HOST=me@box", "NODES=2").stdout)
    assert words[words.index("--nodes") + 1] == "2"


def test_ssh_target_passes_host_and_port() -> None:
    done = make_dry("bench-ssh", "HOST=bench@gpu-box", "PORT=2222", "VENV=/opt/venv")
    words = shlex.split(done.stdout)
    assert words[:6] + words[words.index("--host") : words.index("--host") + 4] == [
        "/opt/venv/bin/python", "-m", "orchestrate", "run", "--profile", "ssh",
        "--host", "bench@gpu-box", "--port", "2222",
    ]  # fmt: skip


def test_the_top_level_makefile_passes_no_stray_platform() -> None:
    """The top-level Makefile's PLATFORM (for `make bench`) must not leak into orchestrated runs."""
    done = subprocess.run(["make", "-s", "-n", "bench-gce-t4"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert shlex.split(done.stdout)[3:6] == ["run", "--profile", "gce-t4"] and "--platform" not in done.stdout
    named = subprocess.run(
        ["make", "-s", "-n", "bench-ssh", "HOST=me@box", "RUN_PLATFORM=home-1080ti"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert "--platform home-1080ti" in " ".join(shlex.split(named.stdout))


# ---- every target, every variable, in a sandbox of recorders -------------------------------------------------

RECORDER = """#!/bin/bash
# Records its argv (NUL-separated, one record per call) and does nothing else.
{ printf '\\036'; printf '%s\\0' "$(basename "$0")" "$@"; } >> "$KCB_RECORD"
"""
# Read-only orchestrate commands: they print the catalog, the providers, the ledger or a detached run's progress.
READ_ONLY = {"profiles", "providers", "cost", "status"}
# Programs the targets run: the sandbox points them at the recorders, so they are not tried as data.
PROGRAMS = {"VENV", "PYTHON", "DOCKER", "UV"}
# Not run in the sandbox: it deletes the virtual environment (here, the recorders); it launches nothing.
NOT_RUN = {"clean-venv"}
# Knobs that hold a list of words (split on whitespace by make, each word one argument).
LISTS = {"PROVIDER_SETTINGS", "PRICES"}
# Knobs that hold shell words, split by shlex (mk/words.py) and appended to the command.
WORDS = {"ARGS", "REPRODUCE_FLAGS", "REPORT_FLAGS", "BENCH_ARGS", "PYTEST_ARGS", "LOCK_UPGRADE"}


@dataclass
class Sandbox:
    tmp: Path
    record: Path
    base: list[str]  # variables every call passes: recorders, and folders inside tmp

    def make(self, *args: str, **environ: str) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
        self.record.write_bytes(b"")
        env = {**os.environ, **environ, "KCB_RECORD": str(self.record), "HOME": str(self.tmp / "home")}
        for name in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT"):
            env.pop(name, None)  # no credentials: nothing could launch even if a command tried
        done = subprocess.run(
            ["make", "-s", "-k", *self.base, *args], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env
        )
        raw = self.record.read_bytes().decode()
        calls = [record.split("\0")[:-1] for record in raw.split("\x1e")[1:]]
        return done, calls


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    if shutil.which("make") is None:
        pytest.fail("GNU make is missing (apt-get install -y make)")
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    for program in ("python", "ruff", "mypy", "lint-imports", "uv", "docker"):
        (bin_dir / program).write_text(RECORDER)
        (bin_dir / program).chmod(0o755)
    (tmp_path / "venv" / ".installed").touch()  # newer than every lock: `venv` has nothing to do
    (tmp_path / "home").mkdir()
    (tmp_path / "datasets").mkdir()
    base = [
        f"VENV={tmp_path / 'venv'}", f"DOCKER={bin_dir / 'docker'}", f"WHEELHOUSE={tmp_path / 'wheelhouse'}",
        f"HOST_KERAS_DATASETS={tmp_path / 'datasets'}", f"LOGS_DIR={tmp_path / 'logs'}",
        f"REPORT_OUT={tmp_path / 'report-out'}", "TORCH_CPU_WHEEL_DIR=",
    ]  # fmt: skip
    return Sandbox(tmp_path, tmp_path / "record", base)


def make_targets() -> list[str]:
    """Every target the Makefile and mk/*.mk define, read from make's own database (so a new one is covered), with
    each pattern rule instantiated for one profile of every provider in the catalog, and a retired one."""
    done = subprocess.run(["make", "-pRrq", ":"], cwd=ROOT, capture_output=True, text=True)
    lines = done.stdout.splitlines()
    targets, patterns = set(), set()
    for previous, line in itertools.pairwise(lines):
        match = re.match(r"([A-Za-z0-9][^\s:=#$]*):(?!=)", line)
        if not match or previous == "# Not a target:" or (ROOT / match.group(1)).is_file():
            continue
        (patterns if "%" in match.group(1) else targets).add(match.group(1))
    catalog = tomllib.loads((ROOT / "records" / "catalog.toml").read_text())["profiles"]
    live = [(name, profile) for name, profile in catalog.items() if not profile.get("retired")]
    by_provider = {profile["provider"]: name for name, profile in reversed(live)}
    stems = [*sorted(by_provider.values()), next(n for n, p in catalog.items() if p.get("retired"))]
    targets |= {pattern.replace("%", stem) for pattern in patterns for stem in stems}
    return sorted(targets - NOT_RUN)


def knobs() -> list[str]:
    """Every variable a user may set: those the Makefile and its fragments give a default with `?=`."""
    names = {m for f in MAKEFILES for m in re.findall(r"^([A-Z][A-Z0-9_]*) \?=", f.read_text(), flags=re.M)}
    return sorted(names - PROGRAMS)


def orchestrate_calls(calls: list[list[str]]) -> list[list[str]]:
    return [call[3:] for call in calls if call[:3] == ["python", "-m", "orchestrate"]]


def test_every_target_that_can_launch_honours_dry_run(sandbox: Sandbox) -> None:
    targets = make_targets()
    assert {"bench-local", "bench-ssh", "bench-sweep", "bench-collect", "reproduce", "report"} <= set(targets)
    for spelling in ("1", "TRUE", "on", "Yes", "y"):
        knobs_given = ["HOST=me@box", "STUDY=benchmark-gpus-2017-11", "RUN=run-1", f"DRY_RUN={spelling}"]
        for extra in ([], ["PROFILES=gce-k80,gce-l4"], ["DETACH=1"]):
            done, calls = sandbox.make(*targets, *knobs_given, *extra)
            launched = [c for c in orchestrate_calls(calls) if c[0] not in READ_ONLY and "--dry-run" not in c]
            assert launched == [], f"DRY_RUN={spelling} {extra}: {launched}"
            assert any(c[:2] == ["run", "--profile"] for c in orchestrate_calls(calls))  # the targets did run
            # bench-collect has no dry run: make refuses it, by name, before it runs
            assert "bench-collect has no dry run" in done.stderr, done.stderr


@pytest.mark.parametrize("value", ["TRUE", "on", "Yes", "y", "1"])
def test_dry_run_true_spellings_reach_the_cli(value: str) -> None:
    words = shlex.split(make_dry("bench-gce-t4", f"DRY_RUN={value}").stdout)
    assert "--dry-run" in words


@pytest.mark.parametrize("variable", ["DRY_RUN", "SPOT", "DETACH"])
@pytest.mark.parametrize("value", ["ture", "2", "yes please", "-1", "enable"])
def test_an_unrecognised_yes_no_value_stops_make_before_anything_runs(
    sandbox: Sandbox, variable: str, value: str
) -> None:
    done, calls = sandbox.make("bench-gce-t4", "bench-sweep", f"{variable}={value}")
    assert done.returncode == 2 and calls == []
    assert len(done.stderr.strip().splitlines()) == 1 and f"{variable}={value}: expected 1, true" in done.stderr


@pytest.mark.parametrize("variable", ["DRY_RUN", "SPOT", "DETACH"])
@pytest.mark.parametrize("value", ["", " ", "\t", "  \n "])
@pytest.mark.parametrize("where", ["command line", "environment"])
def test_a_yes_no_knob_given_blank_stops_make_before_anything_runs(
    sandbox: Sandbox, variable: str, value: str, where: str
) -> None:
    """`DRY_RUN=' '` once ran for real: a blank value was read as "not given", so "no"."""
    args = [f"{variable}={value}"] if where == "command line" else []
    environ = {variable: value} if where == "environment" else {}
    done, calls = sandbox.make("bench-gce-t4", "bench-sweep", *args, **environ)
    assert done.returncode == 2 and calls == []
    assert len(done.stderr.strip().splitlines()) == 1 and f"{variable}=(blank): expected 1, true" in done.stderr


def test_false_spellings_launch_nothing_different() -> None:
    for value in ("0", "False", "NO", "off", "n"):
        words = shlex.split(make_dry("bench-gce-t4", f"DRY_RUN={value}", f"SPOT={value}").stdout)
        assert "--dry-run" not in words and "--spot" not in words and "--on-demand" in words
    words = shlex.split(make_dry("bench-gce-t4").stdout)  # not given: the CLI's own default
    assert not {"--dry-run", "--spot", "--on-demand"} & set(words)


@pytest.mark.parametrize("knob", knobs())
def test_every_variable_is_data(sandbox: Sandbox, knob: str) -> None:
    """Make code, shell syntax, quotes and a newline in any variable: nothing runs, and the value arrives verbatim
    in the command that reads it (or make refuses it by name)."""
    marker = sandbox.tmp / "ran"
    value = f"{sandbox.tmp}/v $(shell touch {marker}) `touch {marker}` ;touch {marker}; \"q'q\" it's\nnext $$(x)"
    if knob in WORDS:  # shell words: quotes must pair for shlex
        value = f"--v $(shell touch {marker}) `touch {marker}` ;touch {marker}; \"q'q\" 'it s'\nnext $$(x)"
    others = {"HOST": "HOST=me@box", "STUDY": "STUDY=benchmark-gpus-2017-11"}
    given = [v for k, v in others.items() if k != knob] + (["PROFILES=gce-t4,gce-l4"] if knob == "MAX_COST" else [])
    if knob in {"DRY_RUN", "SPOT", "DETACH"}:  # yes/no knobs refuse anything else: see the test above
        value = "yes"
    done, calls = sandbox.make(*make_targets(), *given, f"{knob}={value}")
    assert not marker.exists(), f"{knob}: a command ran"
    arguments = [argument for call in calls for argument in call]
    if knob in WORDS:
        words = shlex.split(value)
        assert any(call[-len(words) :] == words for call in calls), f"{knob}: {calls}"
    elif knob in LISTS:
        assert all(word in arguments or any(a.endswith(word) for a in arguments) for word in value.split())
    elif knob == "HOST_KERAS_DATASETS":  # read by `test -d` and `cp` in the shell: a folder that does not exist
        assert not (sandbox.tmp / "wheelhouse" / "keras-datasets").exists()
    elif knob in {"DRY_RUN", "SPOT", "DETACH"}:
        assert any({"--dry-run", "--spot", "--detach"} & set(call) for call in calls)
    else:
        # refused by name: make's own check, or a data folder that does not exist (its value, quoted, tested first)
        refused = re.search(rf"\*\*\* {knob} must be|error: {knob} .*: no such folder", done.stderr, re.S) is not None
        assert refused or any(value in argument for argument in arguments), f"{knob}: {done.stderr}"


def test_make_bench_takes_workloads(sandbox: Sandbox) -> None:
    """`make bench WORKLOADS=...` runs those workloads (it was ignored without a word)."""
    _, calls = sandbox.make("bench", "WORKLOADS=mnist_mlp,imdb_fasttext", "BACKENDS=jax")
    assert calls == [
        ["python", "-m", "benchmarks", "suite", "--suite", "quick", "--platform", "local", "--backends", "jax",
         "--workloads", "mnist_mlp,imdb_fasttext"],
    ]  # fmt: skip


def test_a_variable_from_the_environment_is_data_too(sandbox: Sandbox) -> None:
    marker = sandbox.tmp / "ran"
    value = f"me@box $(shell touch {marker}) `touch {marker}`"
    done, calls = sandbox.make("bench-ssh", "bench-status", DRY_RUN="1", HOST=value, RUN=f"r;touch {marker}")
    assert not marker.exists(), done.stderr
    assert [c[c.index("--host") + 1] for c in calls if "--host" in c] == [value]
    assert ["python", "-m", "orchestrate", "status", f"r;touch {marker}"] in calls


def test_make_test_spreads_the_tests_over_workers_that_keep_each_file_together(sandbox: Sandbox) -> None:
    _, calls = sandbox.make("test", "PYTEST_ARGS=")
    pytest_call = next(call for call in calls if call[:3] == ["python", "-m", "pytest"])
    assert pytest_call[3:] == ["-n", "auto", "--dist", "loadfile"]
    _, calls = sandbox.make("test", "TEST_WORKERS=0", "PYTEST_ARGS=-k makefile -x")
    pytest_call = next(call for call in calls if call[:3] == ["python", "-m", "pytest"])
    assert pytest_call[3:] == ["-n", "0", "--dist", "loadfile", "-k", "makefile", "-x"]
