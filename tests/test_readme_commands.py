"""Every command in the README's bash blocks, and in the bash blocks of the pages under docs/, runs as printed, in a
copy of this checkout, offline and with no cloud credentials. Commands that launch machines run as dry runs
(DRY_RUN=1 / --dry-run, which must then say nothing is launched); image builds run as `make -n`; `make bench` runs
two workloads on two backends. The few that cannot run here are listed in EXCEPTIONS with the reason. A page shows a
command it does not mean to be run here (a synopsis, a command for a GPU machine) in a plain ``` block.
`make bench-local` runs for real, small, in the CPU image built from this checkout, so the report commands read
both `make bench`'s logs (no image) and its (an image)."""

from __future__ import annotations

import itertools
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks.logs import find_logs, read_epoch_log
from tests.support.datasets import prefill_keras_cache
from tests.support.docker import build_cpu_image

ROOT = Path(__file__).resolve().parents[1]

EXCEPTIONS = {
    "make test": "the whole test suite, this test included",
    "make bench REPEATS=3": "repeats of make bench take minutes; tests/benchmarks/test_bench_repeats.py runs them",
    "make bench TARGET_CI=2 BUDGET=30m": "up to 30 minutes; tests/benchmarks/test_bench_repeats.py runs it small",
    "python -m benchmarks suite --suite short --backends jax,torch --repeats 5": "5 repeats of the short suite",
    "python -m benchmarks run --workload mnist_mlp --backend jax --target-ci 2": "up to an hour of adaptive repeats",
    "docker run": "needs the built image; tests/images runs these commands against it",
    ".venv/bin/python -m benchmarks fetch-data": "downloads every dataset; this machine is offline",
    ".venv/bin/python -m benchmarks run --workload mnist_cnn --backend jax --gpus 2": "12 full epochs on two GPUs",
    "python -m orchestrate status RUN_ID": "RUN_ID stands for a detached run of yours",
    "python -m orchestrate collect RUN_ID": "RUN_ID stands for a detached run of yours",
    "python -m orchestrate schedule list": "lists the schedules in your AWS and Google Cloud accounts",
    "python -m orchestrate schedule collect NAME": "NAME stands for a schedule of yours",
    "python -m orchestrate schedule delete NAME": "NAME stands for a schedule of yours",
}
# `make bench` as printed runs 9 workloads x 3 backends (minutes); here two workloads, one of them on real data (the
# machine has Nietzsche, not MNIST), on the two backends the report commands below name.
SMALL_BENCH = ["WORKLOADS=mnist_mlp,lstm_text_generation", "BACKENDS=jax,tensorflow"]
SMALL_SUITE = ["--workloads", "mnist_mlp"]  # `benchmarks suite --suite quick`: one workload of the suite
# `make bench-local` as printed runs the quick suite in the CPU image; here one workload on real data (Nietzsche), two
# epochs of a slice, on the backends the report commands name: enough to give each its second configuration.
SMALL_LOCAL = ["WORKLOADS=lstm_text_generation", "BACKENDS=jax,tensorflow"]
SMALL_LOCAL_ARGS = "--epochs 2 --train-limit 512 --val-limit 128"
LAUNCHERS = ("make bench-", "make reproduce", "python -m orchestrate run", "python -m orchestrate schedule create")


DOCS = ROOT / "docs"
GENERATED = {DOCS / "results.md"}  # made by `python -m report --markdown`: its commands are the report's


def documented_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(set(DOCS.glob("*.md")) - GENERATED)]


def page_commands(text: str) -> list[str]:
    """Each command of a page's bash blocks, continuation lines joined, comments dropped."""
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.M | re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words:
                commands.append(shlex.join(words))
    return commands


def readme_commands() -> list[str]:
    return page_commands((ROOT / "README.md").read_text())


def documented_commands() -> list[str]:
    """The README's commands, then the docs pages', each once."""
    return list(dict.fromkeys(c for page in documented_pages() for c in page_commands(page.read_text())))


def exception(command: str) -> str | None:
    return next((reason for prefix, reason in EXCEPTIONS.items() if command.startswith(prefix)), None)


def as_run_here(command: str, image: str = "", host_dir: Path | None = None) -> tuple[list[str], bool]:
    """The command as this test runs it, and whether it must be a dry run (`make bench-local` runs in `image`,
    its host folder `host_dir`)."""
    words = shlex.split(command)
    assignments = list(itertools.takewhile(lambda w: re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", w), words))
    if assignments:  # `VAR=value command ...`, as a shell runs it: the command with those variables set
        rest, dry = as_run_here(shlex.join(words[len(assignments) :]), image, host_dir)
        return ["env", *assignments, *rest], dry
    if words[:2] == ["make", "bench"] and len(words) == 2:
        return words + SMALL_BENCH, False
    if words == ["make", "bench-local"]:
        return [*words, *SMALL_LOCAL, f"ARGS=--image {image} --remote-dir {host_dir} {SMALL_LOCAL_ARGS}"], False
    if words[0] == "make" and len(words) > 1 and words[1].startswith(("image-", "bench-docker")):
        return ["make", "-n", *words[1:]], False
    if command.startswith(".venv/bin/python -m benchmarks suite"):
        return words + SMALL_SUITE, False
    if command.startswith(LAUNCHERS) and words[1:2] not in (["bench-profiles"], ["bench-providers"], ["bench-cost"]):
        if words[0] == "make":
            return (words if any(w.startswith("DRY_RUN=") for w in words) else [*words, "DRY_RUN=1"]), True
        return (words if "--dry-run" in words else [*words, "--dry-run"]), True
    return words, False


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The working tree's files (tracked and new), with this checkout's .venv: the commands write logs and reports."""
    copy = tmp_path_factory.mktemp("checkout")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)  # mtimes kept: the venv stamp stays newer than the locks
    (copy / ".venv").symlink_to(ROOT / ".venv")
    return copy


def images_logged(logs: Path) -> set[str | None]:
    """The container images of the runs under `logs` (None: run without one, as `make bench` runs)."""
    found = set()
    for path in find_logs(logs):
        meta = read_epoch_log(path).metadata
        if meta is not None:
            found.add(meta.container.image if meta.container else None)
    return found


REPORTS = ("make report", "python -m report")


@pytest.mark.slow
@pytest.mark.docker
def test_every_documented_command_runs_as_printed(checkout: Path, tmp_path: Path) -> None:
    image = build_cpu_image(tmp_path / "image-cpu.log")
    host_dir = tmp_path / "host"
    prefill_keras_cache(host_dir / "cache" / "keras")
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GOOGLE_", "CLOUDSDK_", "KCB_"))},
        "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",  # `python` is the project's venv
        "HOME": str(home),  # an empty ledger, no cloud configuration
        "KERAS_HOME": str(prefill_keras_cache(tmp_path / "keras").parent),
        "BENCH_OFFLINE": "1",
    }
    readme = readme_commands()
    assert "make bench" in readme and any(c.startswith("make reproduce") for c in readme)
    failures = []
    ran: set[tuple[str, ...]] = set()
    # both kinds of local run first, so that every report command reads their logs side by side
    local_runs_first = sorted(documented_commands(), key=lambda c: c not in ("make bench", "make bench-local"))
    for command in local_runs_first:
        words, dry = as_run_here(command, image, host_dir)
        if exception(command) or tuple(words) in ran:  # a launch and its dry run are the same command here
            continue
        ran.add(tuple(words))
        if command.startswith(REPORTS):  # the report commands read the logs of both kinds of local run
            assert images_logged(checkout / "logs" / "local") == {None, image}, f"before {command}"
        done = subprocess.run(words, cwd=checkout, env=env, capture_output=True, text=True, timeout=600)
        out = done.stdout + done.stderr
        if done.returncode != 0 or (dry and not re.search(r"dry run|nothing is launched|nothing of this", out)):
            failures.append(f"{shlex.join(words)} -> exit {done.returncode}\n{out[-1500:]}")
    assert not failures, "\n\n".join(failures)


def test_the_readmes_python_commands_name_the_interpreter_its_set_up_creates() -> None:
    """The README sets up with `make bench` (which creates .venv) and activates nothing: a bare `python` there has
    neither Keras nor pandas, so every Python command it prints names `.venv/bin/python`."""
    commands = readme_commands()
    assert any(c.startswith(".venv/bin/python -m report ") for c in commands)
    assert [c for c in commands if c.split()[0] == "python"] == []


def test_each_exception_names_a_documented_command() -> None:
    """An exception whose command left the README and the docs is stale."""
    commands = documented_commands()
    assert all(any(c.startswith(prefix) for c in commands) for prefix in EXCEPTIONS)
