"""One run, one spec: a run is planned once into a `RunSpec` (orchestrate.runspec) that every mode delivers and
executes by the one container command (orchestrate.container_command). A runner option added to the options, the
spec and the runner command alone reaches the runner in every mode: attached on this machine and over SSH, a
detached machine's agent, a Slurm task and a scheduled machine; each of those commands is run here for real, in a
Docker image whose entrypoint prints the arguments and the run spec it was given."""

from __future__ import annotations

import argparse
import base64
import gzip
import io
import itertools
import json
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks.command import RunnerCommand
from benchmarks.workload_set import built_in
from orchestrate import machine_agent, runspec
from orchestrate.cli.planning import make_plan
from orchestrate.cli.request import RunOptions
from orchestrate.container_command import container_argv
from orchestrate.containers import container_command
from orchestrate.data_dir import read_data_dir
from orchestrate.detached import DetachedSpec, boot_script
from orchestrate.hostprep import HostInfo
from orchestrate.images import ImageInfo
from orchestrate.lifecycle import Lifecycle
from orchestrate.plan import RunPlan, WorkItem
from orchestrate.progress import Reporter
from orchestrate.provider import Provider
from orchestrate.providers.aws import AWSProvider
from orchestrate.providers.local import LocalProvider
from orchestrate.providers.slurm import SlurmProvider
from orchestrate.providers.slurm.script import batch_script
from orchestrate.providers.slurm.settings import settings_of
from orchestrate.providers.ssh import SSHProvider
from orchestrate.runspec import RunSpec, SpecError, plan_spec
from orchestrate.schedule import check_spec, run_spec
from orchestrate.testing.sshd import SSHServer
from orchestrate.workload_files import run_workloads
from records.catalog import Price, Profile
from records.ledger import Ledger
from tests.orchestrate.orchestrate_helpers import ROOT
from tests.support.datasets import tiny_mlp_data
from tests.support.docker import BASE_IMAGE, remove_containers_of_run, require_engine

ECHO_IMAGE = "kcb-test/runspec-echo:latest"
# An image with a dataset baked into its KERAS_HOME, whose entrypoint prints the arguments it was given, the run spec
# it carried and the baked dataset as the container sees it (through the mounted cache), then exits cleanly.
SHOW = 'echo "argv: $*"; echo "spec: $BENCH_RUN_SPEC"; cat "$KERAS_HOME/datasets/baked.txt"'
ECHO = f"""FROM {{base}}
ENV KERAS_HOME=/data/keras
RUN mkdir -p /data/keras/datasets && echo baked > /data/keras/datasets/baked.txt
ENTRYPOINT {json.dumps(["sh", "-c", SHOW, "runner"])}
"""


@pytest.fixture(scope="module")
def echo_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    require_engine()
    context = tmp_path_factory.mktemp("echo")
    (context / "Dockerfile").write_text(ECHO.format(base=BASE_IMAGE))
    subprocess.run(["docker", "build", "-q", "-t", ECHO_IMAGE, str(context)], check=True, capture_output=True)
    return ECHO_IMAGE


# ---- the spec ------------------------------------------------------------------------------------------------------


def test_a_spec_round_trips_through_json_and_its_sha256_names_what_it_runs() -> None:
    items = (WorkItem("mnist_mlp", "jax", 1), WorkItem("mnist_mlp", "jax", 2))
    spec = plan_spec("r1", "box", "quick", "kcb:cpu", False, items, 2, {"epochs": 3})
    assert RunSpec.from_json(json.loads(json.dumps(spec.to_json(manifest=True)))) == spec
    assert RunSpec.from_json(spec.to_json()).sha256 == spec.sha256
    assert [item.argv[:3] for item in spec.items] == [("mnist_mlp", "--backend", "jax")] * 2
    assert "--epochs" in spec.items[0].argv and "--repeat-index" in spec.items[1].argv
    assert plan_spec("r1", "box", "quick", "kcb:cpu", False, items, 2, {"epochs": 4}).sha256 != spec.sha256
    with pytest.raises(SpecError, match=r"^run spec version 99: this orchestrator reads version 1$"):
        RunSpec.from_json({**spec.to_json(), "version": 99})


@pytest.mark.parametrize(
    ("runtime", "head", "gpus"),
    [
        ("docker", ["docker", "run", "--rm", "--name", "r1-x"], ["--gpus", "all"]),
        ("podman", ["podman", "run", "--rm", "--name", "r1-x"], ["--device", "nvidia.com/gpu=all"]),
        ("apptainer", ["apptainer", "exec", "--cleanenv", "--containall"], ["--nv"]),
        ("pyxis", ["env", "HOME=/tmp", "srun", "--ntasks=1", "--container-image=img"], []),
    ],
)
def test_one_function_renders_every_runtime(runtime: str, head: list[str], gpus: list[str]) -> None:
    words = container_argv(
        runtime, "img", ["mnist_mlp", "--out", "/logs"], mounts=[("/h/logs", "/logs", False), ("/h/d", "/d", True)],
        env={"HOME": "/tmp"}, labels={"run-id": "r1"}, name="r1-x", user="1:1", gpus=True,
    )  # fmt: skip
    assert words[: len(head)] == head
    assert all(word in words for word in gpus)
    assert words[-3:] == ["mnist_mlp", "--out", "/logs"]
    binds = ["/h/logs:/logs", "/h/d:/d:ro"]
    if runtime in ("docker", "podman"):
        assert [words[i + 1] for i, w in enumerate(words) if w == "-v"] == binds and "run-id=r1" in words
    else:  # one comma-separated list, and the runner named (these runtimes do not run the image's entrypoint)
        assert ",".join(binds) in " ".join(words) and words[-6:-3] == ["python", "-m", "benchmarks"]


def _container(words: list[str], image: str) -> dict[str, object]:
    """A docker command as what the runner gets: environment (the image's digest left out: each mode reads its
    own), mount targets, labels (the machine's left out: each mode names its own), name, image and argv."""
    pairs = [(flag, value) for flag, value in itertools.pairwise(words) if flag in ("-e", "-v", "--label")]
    return {
        "env": sorted(v for f, v in pairs if f == "-e" and not v.startswith("BENCH_IMAGE_DIGEST=")),
        "mounts": sorted(v.split(":", 1)[1] for f, v in pairs if f == "-v"),
        "labels": sorted(v for f, v in pairs if f == "--label" and not v.startswith("machine=")),
        "machine": any(v.startswith("machine=") for f, v in pairs if f == "--label"),
        "name": words[words.index("--name") + 1],
        "runner": words[words.index(image) :],
    }


def test_every_mode_runs_the_same_container(tmp_path: Path) -> None:
    """The copies once differed (the agent mounted the dataset cache only for images without datasets, labels
    differed): an attached run's, a detached machine's and a Slurm task's container now have one environment, one
    set of mounts (the cache always, seeded from the image) and one set of labels, each with its machine's."""
    files = run_workloads([ROOT / "examples" / "workloads" / "tiny_mlp.py"])
    data = read_data_dir(tiny_mlp_data(tmp_path / "data"))
    items = (WorkItem("tiny_mlp", "jax", 1),)
    spec = plan_spec("r1", "box", "quick", "img:1", True, items, 2, {"epochs": 1}, files, data)
    info = HostInfo(docker="docker", uid=1000, gid=1000, home="/home/b", root="/home/b/kcb")
    attached = shlex.split(container_command(spec, spec.items[0], info, ImageInfo("img:1", "x", "x", "present"), "m"))
    agent = machine_agent.Run(
        DetachedSpec("aws", "s3://b/p/", spec, endpoints={}).to_json(), SimpleNamespace(instance_id="m"), str(tmp_path)
    )
    agent.status = {"image_digest": "x"}
    detached = agent.container(spec.to_json()["items"][0])
    slurm = Profile(name="hpc", provider="slurm", machine_type=None,
                    extra={"login": "me@login", "partition": "p", "shared_dir": "/s", "runtime": "docker"})  # fmt: skip
    line = next(
        li for li in batch_script(settings_of(slurm), "r1", spec).splitlines() if "docker run --rm --name" in li
    )
    task = shlex.split(line.split(" >> ")[0])
    shapes = [_container(words, "img:1") for words in (attached, detached, task)]
    assert shapes[0] == shapes[1] == shapes[2]
    assert shapes[0]["mounts"] == ["/data/keras", "/data/offline:ro", "/logs", "/workloads:ro"]
    assert shapes[0]["labels"] == ["project=keras-cloud-bench", "run-id=r1"] and shapes[0]["machine"]
    assert f"BENCH_RUN_SPEC={spec.sha256} {spec.payload.sha256} 3 {spec.payload.size}" in shapes[0]["env"]


# ---- a new runner option, in every mode ----------------------------------------------------------------------------


@dataclass(frozen=True)
class DummyCommand(RunnerCommand):
    """The runner command with one more option, as a new one would be added."""

    dummy: str | None = None

    def _options(self) -> list[str]:
        return [*super()._options(), *(["--dummy", self.dummy] if self.dummy else [])]


@dataclass(frozen=True)
class DummyOptions(RunOptions):
    dummy: str | None = None


@pytest.fixture
def dummy_option(monkeypatch: pytest.MonkeyPatch) -> None:
    """The option added where a new runner option is added: the options, the spec's list, the runner command."""
    monkeypatch.setattr(runspec, "RunnerCommand", DummyCommand)
    monkeypatch.setattr(runspec, "RUNNER_OPTIONS", (*runspec.RUNNER_OPTIONS, "dummy"))


def _ran(console: str, spec: RunSpec) -> str:
    """The runner arguments the echo image printed; the run spec it carried is the planned one, and the dataset the
    image holds is seen through the mounted cache (the cache was seeded from the image first)."""
    assert re.search(rf"^spec: {spec.sha256}$", console, re.MULTILINE), console
    assert re.search(r"^baked$", console, re.MULTILINE), console
    match = re.search(r"^argv: (.*)$", console, re.MULTILINE)
    assert match, console
    return match.group(1)


def _plan(options: DummyOptions, run_id: str, profile: Profile, provider: Provider) -> RunPlan:
    return make_plan(DummyOptions(**{**vars(options), "run_id": run_id}), profile, provider, built_in())


def _agent_runs(envelope: dict, work: Path) -> str:
    """What a detached machine's agent runs for the first item, run here; its console."""
    agent = machine_agent.Run(envelope, SimpleNamespace(instance_id="i-echo"), str(work))
    agent.status = {}
    agent.image()  # present on this machine; the dataset cache seeded from it
    agent.run_id = agent.run_id if envelope["run"]["run_id"] else "20260101T000000Z-echo"
    done = subprocess.run(agent.container(envelope["run"]["items"][0]), capture_output=True, text=True, timeout=120)
    return done.stdout + done.stderr


def test_a_new_runner_option_reaches_the_runner_in_every_mode(
    dummy_option: None, echo_image: str, sshd: SSHServer, tmp_path: Path
) -> None:
    options = DummyOptions(
        workloads="mnist_mlp", backends="jax", image=echo_image, image_source="present", dummy="on",
        remote_dir=str(tmp_path / "host"), logs=tmp_path / "logs", epochs=1,
    )  # fmt: skip
    expected = "mnist_mlp --backend jax --platform {platform} --suite quick --run-id {run_id} --out /logs"
    flags = "--epochs 1 --allow-synthetic --dummy on"

    for mode, profile, provider in [
        ("local", Profile(name="local", provider="local", machine_type=None), LocalProvider()),
        ("ssh", Profile(name="ssh", provider="ssh", machine_type=None), SSHProvider(sshd.target())),
    ]:
        plan = make_plan(
            DummyOptions(**{**vars(options), "run_id": f"20260101T000000Z-{mode}"}), profile, provider, built_in()
        )
        try:
            outcome = Lifecycle(plan, provider, Ledger(tmp_path / "l.jsonl"), Reporter(io.StringIO())).run()
        finally:
            remove_containers_of_run(plan.run_id)
        assert outcome.record.status == "complete" and outcome.record.spec == plan.spec.sha256, outcome.record.message
        console = (plan.orchestrator_dir / "mnist_mlp_jax.console.log").read_text()
        assert _ran(console, plan.spec) == f"{expected.format(platform=mode, run_id=plan.run_id)} {flags}", mode
        assert (tmp_path / "host" / "cache" / "keras" / "datasets" / "baked.txt").is_file()  # the host's cache

    aws = Profile(
        name="aws-echo", provider="aws", machine_type="t3.micro", zones=("us-east-1a",),
        on_demand=Price(0.01, "2026-01-01", "a test's price"),
    )  # fmt: skip
    plan = make_plan(
        DummyOptions(**{**vars(options), "run_id": "20260101T000000Z-detd"}), aws, AWSProvider(), built_in()
    )
    detached = DetachedSpec("aws", "s3://bucket/p/", plan.spec, "present", endpoints={})
    assert _ran(_agent_runs(detached.to_json(), tmp_path / "machine"), plan.spec).endswith(flags)
    assert (tmp_path / "machine" / "cache" / "keras" / "datasets" / "baked.txt").is_file()  # the machine's cache

    slurm = Profile(
        name="hpc", provider="slurm", machine_type=None,
        extra={"login": "me@login", "partition": "debug", "shared_dir": str(tmp_path / "shared"), "runtime": "docker"},
    )  # fmt: skip
    plan = make_plan(
        DummyOptions(**{**vars(options), "run_id": "20260101T000000Z-slrm"}), slurm, SlurmProvider(), built_in()
    )
    script = tmp_path / "job.sh"
    script.write_text(batch_script(settings_of(slurm), plan.run_id, plan.spec))
    environment = {"PATH": "/usr/bin:/bin:/usr/local/bin", "SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_JOB_ID": "7"}
    try:
        done = subprocess.run(["bash", str(script)], env=environment, capture_output=True, text=True, timeout=300)
    finally:
        remove_containers_of_run(plan.run_id)
    assert done.returncode == 0, done.stdout + done.stderr
    console = tmp_path / "shared" / "runs" / plan.run_id / "logs" / "hpc" / plan.run_id / "orchestrate"
    assert _ran((console / "mnist_mlp_jax.console.log").read_text(), plan.spec).endswith(flags)
    assert (tmp_path / "shared" / "cache" / "keras" / "datasets" / "baked.txt").is_file()  # the cluster's cache

    args = argparse.Namespace(**{**vars(options), "image": "registry.example/kcb-echo:1", "image_source": "pull"})
    schedule = check_spec("echo", aws, "0 4 * * 1", "UTC", "quick", "jax", "mnist_mlp", None, 60, "me@here")
    run = run_spec(args, schedule, built_in(), None)
    scheduled = DetachedSpec("aws", "s3://bucket/p/schedules/echo/", run, endpoints={})
    packed = re.search(r"> spec.json\n(.*?)\nKCB_FILE", boot_script(scheduled), re.DOTALL)
    assert packed is not None
    envelope = json.loads(gzip.decompress(base64.b64decode(packed.group(1))))
    envelope["image"] = {"ref": echo_image, "source": "present"}  # the image a registry would serve
    envelope["run"]["image"] = echo_image
    argv = _ran(_agent_runs(envelope, tmp_path / "scheduled"), scheduled.run)
    assert argv.startswith("mnist_mlp --backend jax --platform aws-echo --suite quick --run-id 20260101T000000Z-echo")
    assert argv.endswith(flags)
