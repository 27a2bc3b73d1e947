"""The runner's command line, built in one place (benchmarks.command) and accepted by the runner's own parser."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.cli import build_parser
from benchmarks.command import RunnerCommand, repeat_stem
from orchestrate.plan import RunPlan, WorkItem
from records.catalog import Profile

ROOT = Path(__file__).resolve().parents[2]


def test_every_field_becomes_a_flag_the_runner_parses() -> None:
    command = RunnerCommand(
        ("mnist_mlp", "imdb_fasttext"), "jax", platform="gce-t4", run_id="r1", out="/logs", suite="quick",
        epochs=2, train_limit=512, val_limit=128, prefer_dataset="fashion_mnist", data_dir="/data",
        offline=True, allow_synthetic=True, seed=7, jit_compile="off", steps_per_execution=4, lstm_kernel="generic",
        float32_matmul="float32", repeat_index=2, repeat_group="r1", repeat_planned=3, gpus="all",
        batch_policy="per-device", target_ci=2.0, host_gc="frozen",
    )  # fmt: skip
    flags = [word for word in command.argv() if word.startswith("--")]
    assert len(flags) == len(set(flags)), f"a flag passed twice: {flags}"
    args = build_parser().parse_args(command.argv())
    assert (args.command, args.workload, args.backend, args.platform, args.run_id) == (
        "run", "mnist_mlp,imdb_fasttext", "jax", "gce-t4", "r1",
    )  # fmt: skip
    assert (args.epochs, args.train_limit, args.val_limit, args.seed, args.steps_per_execution) == (2, 512, 128, 7, 4)
    assert (args.repeat_index, args.repeat_group, args.repeat_planned, args.batch_policy) == (2, "r1", 3, "per-device")
    assert args.offline and args.allow_synthetic and args.prefer_dataset == "fashion_mnist"
    assert (args.target_ci, args.host_gc) == (2.0, "frozen")


def test_the_entrypoint_form_and_the_defaults() -> None:
    command = RunnerCommand(("mnist_mlp",), "torch")
    assert command.argv() == ["run", "--workload", "mnist_mlp", "--backend", "torch"]
    assert command.argv(entrypoint=True) == ["mnist_mlp", "--backend", "torch"]
    with pytest.raises(ValueError, match="exactly one workload"):
        RunnerCommand(("a", "b"), "jax").argv(entrypoint=True)


def test_importable_without_any_framework() -> None:
    code = "import sys, benchmarks.command; print(sorted({'keras', 'jax', 'torch', 'tensorflow'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_repeats_are_interleaved_and_named_as_the_runner_names_them() -> None:
    from benchmarks.workload_set import built_in
    from orchestrate.cli import build_parser as orchestrate_parser
    from orchestrate.cli.planning import make_plan, make_provider
    from orchestrate.cli.request import AttachedRun, request_of
    from records.catalog import get_profile, load_catalog

    request = request_of(orchestrate_parser().parse_args(
        ["run", "--profile", "ssh-gpu", "--host", "me@box", "--workloads", "mnist_mlp,imdb_fasttext",
         "--backends", "jax,tensorflow", "--repeats", "2", "--gpus", "2", "--batch-policy", "per-device",
         "--run-id", "g"]
    ))  # fmt: skip
    assert isinstance(request, AttachedRun)
    profile = get_profile(load_catalog(), "ssh-gpu")
    plan = make_plan(request.options, profile, make_provider(profile, request.options), built_in())
    items = [(w, b) for b in ("jax", "tensorflow") for w in ("mnist_mlp", "imdb_fasttext")]
    # repeat 1 of every item, then repeat 2, each round starting one item later (benchmarks.repeats.round_order)
    assert [(i.workload, i.backend, i.repeat) for i in plan.items] == [
        *((w, b, 1) for w, b in items),
        *((w, b, 2) for w, b in [*items[1:], items[0]]),
    ]
    argv = list(plan.spec.items[4].argv)
    assert argv[:3] == ["imdb_fasttext", "--backend", "jax"]
    flags = dict(zip(argv[3::2], argv[4::2], strict=False))
    assert flags["--repeat-index"] == "2" and flags["--repeat-group"] == "g" and flags["--repeat-planned"] == "2"
    assert flags["--gpus"] == "2" and flags["--batch-policy"] == "per-device"
    item = WorkItem("mnist_mlp", "jax", 2)
    assert item.stem == repeat_stem("mnist_mlp_jax", 2) == "mnist_mlp_jax.r02"
    assert item.owns_log("mnist_mlp_jax.r02.csv") and item.owns_log("mnist_mlp_jax_synthetic.r02.json")
    assert not item.owns_log("mnist_mlp_jax.csv") and not item.owns_log("mnist_mlp_jax.r12.csv")
    assert WorkItem("mnist_mlp", "jax").owns_log("mnist_mlp_jax_synthetic.csv")
    assert item.container_name("g") == "g-mnist_mlp-jax-r2"


def test_a_single_measurement_passes_no_repeat_flags() -> None:
    plan = RunPlan(
        run_id="r", profile=Profile(name="local", provider="local", machine_type=None), platform="local",
        suite="quick", items=(WorkItem("mnist_mlp", "jax"),), spot=False, image_ref="i", image_source="present",
        build=None, logs_dir=Path("logs"), owner="me@here",
    )  # fmt: skip
    argv = plan.spec.items[0].argv
    assert not any(flag.startswith(("--repeat", "--gpus", "--batch-policy")) for flag in argv)


def test_the_benchmarks_cli_reports_a_bad_value_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "run", "--workload", "mnist_mlp", "--backend", "cntk"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("error: argument --backend: invalid choice: 'cntk'")
    assert len(done.stderr.strip().splitlines()) == 1 and "usage:" not in done.stderr


def test_the_container_sees_the_gpus_and_carries_the_exact_run_id_label() -> None:
    import shlex

    from orchestrate.containers import container_command
    from orchestrate.hostprep import HostInfo
    from orchestrate.images import ImageInfo
    from orchestrate.runspec import plan_spec

    info = HostInfo(docker="sudo -n docker", uid=1000, gid=1000, home="/home/b", root="/home/b/kcb")
    image = ImageInfo("kcb:gpu", "sha256:abc", "sha256:abc", "present")
    items = (WorkItem("mnist_mlp", "jax", 1),)
    spec = plan_spec("r1", "box", "quick", "kcb:gpu", True, items, 2, {"gpus": "all"})
    words = shlex.split(container_command(spec, spec.items[0], info, image, "box"))
    assert words[:3] == ["sudo", "-n", "docker"]
    assert words[words.index("--gpus") + 1] == "all"
    assert "run-id=r1" in words and "project=keras-cloud-bench" in words and "machine=box" in words
    assert words[words.index("--name") + 1] == "r1-mnist_mlp-jax-r1"
    assert words[words.index("kcb:gpu") :] == ["kcb:gpu", *spec.items[0].argv]
    cpu_spec = plan_spec("r1", "box", "quick", "kcb:gpu", False, items, 2, {"gpus": "all"})
    cpu = shlex.split(container_command(cpu_spec, cpu_spec.items[0], info, image, "box"))
    assert "--gpus" not in cpu[: cpu.index("kcb:gpu")]  # a CPU host: no device request (the runner's flag stays)
