"""The GPU-session script's planning and result collection, checked on the CPU."""

from __future__ import annotations

import argparse
import functools
import io
import json
import shlex
import tarfile
import time
from pathlib import Path

import pytest

from benchmarks.cli import build_parser
from benchmarks.logs import EpochLogWriter, EpochRecord, LogFormatError, write_metadata
from benchmarks.repeats import fill_levels, round_order
from benchmarks.workloads import WORKLOADS, spec
from campaign import gpu_session, headroom
from tests.support.processes import running


def test_sweep_runs_defaults_first_and_alternatives_where_they_apply() -> None:
    items = gpu_session.plan("sweep", ["jax", "torch"])
    configs = [(item.backend, item.config) for item in items]
    assert configs[:2] == [("jax", "default"), ("torch", "default")]
    by_config = {(item.backend, item.config): item for item in items}
    assert by_config["jax", "default"].workloads == WORKLOADS
    assert by_config["jax", "jit-off"].workloads == gpu_session.EAGER_JAX_WORKLOADS
    assert by_config["torch", "torch-compile"].workloads == gpu_session.TORCH_COMPILE_WORKLOADS
    assert ("torch", "steps-per-execution-8") not in by_config  # Keras allows only 1 on torch
    assert all(item.epochs == gpu_session.SWEEP_EPOCHS for item in items)
    # Both LSTM kernels are timed on the same slice, so their epochs compare.
    cudnn, generic = by_config["torch", "lstm-cudnn-slice"], by_config["torch", "lstm-generic-slice"]
    assert cudnn.workloads == generic.workloads == gpu_session.LSTM_SLICE_WORKLOADS
    assert cudnn.flags[:2] == ("--lstm-kernel", "auto") and generic.flags[:2] == ("--lstm-kernel", "generic")
    assert cudnn.flags[2:] == generic.flags[2:] == gpu_session.LSTM_SLICE


def test_configurations_name_real_workloads_and_slices_count_samples() -> None:
    for configs in gpu_session.CONFIGURATIONS.values():
        for config in configs.values():
            assert set(config.workloads) <= set(WORKLOADS)
    for name in gpu_session.LSTM_SLICE_WORKLOADS:
        assert spec(name).uses_lstm and spec(name).datasets[0] in ("imdb", "voxceleb")
    assert set(gpu_session.LSTM_WORKLOADS) == {name for name in WORKLOADS if spec(name).uses_lstm}


def test_a_sweep_can_be_narrowed_to_some_configurations() -> None:
    items = gpu_session.plan("sweep", ["jax"], configs=["steps-per-execution-8"])
    assert [(i.backend, i.config) for i in items] == [("jax", "steps-per-execution-8")]


def test_suite_runs_every_workload_with_published_epochs() -> None:
    [jax, torch] = gpu_session.plan("suite", ["jax", "torch"], dataset="fashion_mnist")
    command = jax.command("python3", "h100", Path("/out"))
    assert jax.workloads == WORKLOADS and jax.epochs is None and "--epochs" not in command
    assert command[command.index("--suite") + 1] == "bounded"
    assert command[command.index("--prefer-dataset") + 1] == "fashion_mnist"
    assert command[command.index("--run-id") + 1] == "gpu-suite-jax-default" and torch.backend == "torch"


def test_fashion_mnist_stands_in_only_when_mnist_was_not_carried(tmp_path: Path) -> None:
    datasets = tmp_path / "keras" / "datasets"
    (datasets / "fashion-mnist").mkdir(parents=True)
    assert gpu_session._preferred_dataset(tmp_path) == "fashion_mnist"
    (datasets / "mnist.npz").write_bytes(b"")
    assert gpu_session._preferred_dataset(tmp_path) is None


def test_an_item_past_the_budget_is_skipped_not_started(tmp_path: Path) -> None:
    [item] = gpu_session.plan("suite", ["jax"])
    entry = gpu_session._run_item(item, "gpu", tmp_path, {}, None, deadline=0.0)
    assert entry["skipped"] == "time budget spent" and entry["returncode"] is None


def _write_run(root: Path, name: str, status: str = "complete") -> Path:
    path = root / "h100" / "gpu-suite-jax-default" / name
    writer = EpochLogWriter(path)
    writer.append(EpochRecord(0, 3.0, 0.5, 0.8, 0.4, 0.85, 20000.0, True, 60000, 0.0))
    writer.append(EpochRecord(1, 1.0, 0.3, 0.9, 0.3, 0.88, 60000.0, False, 60000, 3.0))
    writer.close()
    write_metadata(path, {"workload": "mnist_mlp", "backend": "jax", "status": status})
    return path


def test_collect_unpacks_into_the_log_tree_and_reads_every_log(tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    _write_run(remote, "mnist_mlp_jax.csv")
    _write_run(remote, "cifar10_cnn_jax.csv", status="running")  # stopped at the time budget
    tarball = tmp_path / "logs-suite-jax.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(remote, arcname=".")
    collected = gpu_session.collect([tarball], tmp_path / "logs")
    assert collected == [tmp_path / "logs" / "h100" / "gpu-suite-jax-default" / "mnist_mlp_jax.csv"]
    assert collected[0].with_suffix(".json").is_file()


def test_collect_rejects_a_broken_log(tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    path = _write_run(remote, "mnist_mlp_jax.csv")
    path.write_text("epoch,elapsed\n0,soon\n")
    tarball = tmp_path / "logs.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(remote, arcname=".")
    with pytest.raises(LogFormatError, match="bad value"):
        gpu_session.collect([tarball], tmp_path / "logs")


def _write_repeat(root: Path, index: int, steady: float) -> Path:
    path = root / "h200" / "gpu-repeats-a" / f"mnist_mlp_jax.r{index:02d}.csv"
    writer = EpochLogWriter(path)
    writer.append(EpochRecord(0, 3.0, compiled=True))
    writer.append(EpochRecord(1, steady, compiled=False))
    writer.close()
    repeat = {"group": "gpu-repeats-a", "index": index, "planned": 3, "target_ci_pct": None}
    write_metadata(path, {"workload": "mnist_mlp", "backend": "jax", "status": "complete", "repeat": repeat})
    return path


def _tarball(remote: Path, where: Path) -> Path:
    with tarfile.open(where, "w:gz") as archive:
        archive.add(remote, arcname=".")
    return where


def test_repeats_of_several_calls_are_renumbered_not_replaced(tmp_path: Path) -> None:
    """Each call on a GPU machine numbers its repeats from 1: collecting two calls keeps all four repeats, and
    collecting the same call again adds nothing."""
    first, second = tmp_path / "call1", tmp_path / "call2"
    _write_repeat(first, 1, 0.30), _write_repeat(first, 2, 0.31)
    _write_repeat(second, 1, 0.40), _write_repeat(second, 2, 0.41)
    calls = [_tarball(first, tmp_path / "1.tar.gz"), _tarball(second, tmp_path / "2.tar.gz")]
    logs = tmp_path / "logs"
    gpu_session.collect(calls, logs)
    gpu_session.collect(calls[:1], logs)
    folder = logs / "h200" / "gpu-repeats-a"
    assert sorted(p.name for p in folder.glob("*.csv")) == [f"mnist_mlp_jax.r0{i}.csv" for i in (1, 2, 3, 4)]
    assert json.loads((folder / "mnist_mlp_jax.r04.json").read_text())["repeat"]["index"] == 4
    assert "0.41" in (folder / "mnist_mlp_jax.r04.csv").read_text()


def test_scaling_compares_one_device_with_each_count_under_both_policies() -> None:
    configs = gpu_session.scaling_configs([4, 2, 2])
    assert [c.name for c in configs] == [
        "1gpu",
        "2gpu-same-global",
        "2gpu-per-device",
        "4gpu-same-global",
        "4gpu-per-device",
    ]


def test_a_scaling_round_runs_a_workloads_configurations_back_to_back_and_rotates() -> None:
    configs = gpu_session.scaling_configs([2])
    first = gpu_session.scaling_order(["a", "b"], configs, 0)
    second = gpu_session.scaling_order(["a", "b"], configs, 1)
    assert [w for w, _ in first] == ["a", "a", "a", "b", "b", "b"]
    assert [w for w, _ in second] == ["b", "b", "b", "a", "a", "a"]
    assert [c.name for _, c in first[:3]] == ["1gpu", "2gpu-same-global", "2gpu-per-device"]
    assert [c.name for _, c in second[:3]] == ["2gpu-same-global", "2gpu-per-device", "1gpu"]
    assert sorted((w, c.name) for w, c in first) == sorted((w, c.name) for w, c in second)


def test_the_scaling_phase_refuses_several_backends_and_bad_counts(tmp_path: Path) -> None:
    base = ["run", "--carry", str(tmp_path), "--phase", "scaling", "--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit, match="one backend"):
        gpu_session.main([*base, "--backends", "jax,torch"])
    with pytest.raises(SystemExit, match="--device-counts"):
        gpu_session.main([*base, "--backends", "jax", "--device-counts", "two"])
    assert not (tmp_path / "out").exists()


def test_a_later_scaling_call_tops_up_the_thinnest_configurations_first(tmp_path: Path) -> None:
    configs = gpu_session.scaling_configs([2])
    folder = tmp_path / "gpu-scaling-a-1gpu"
    folder.mkdir()
    for index in (1, 2):
        (folder / f"mnist_mlp_jax.r{index:02d}.csv").write_text("")
    (folder / "mnist_cnn_jax.r01.csv").write_text("")
    workloads = ["mnist_mlp", "mnist_cnn", "siamese_lstm"]
    counts = gpu_session.existing_scaling_repeats(tmp_path, "a", "jax", workloads, configs)
    assert counts[("mnist_mlp", "1gpu")] == 2 and counts[("mnist_cnn", "1gpu")] == 1
    assert counts[("siamese_lstm", "1gpu")] == counts[("mnist_mlp", "2gpu-per-device")] == 0
    assert list(fill_levels(counts, 2)) == [1, 2]
    first = gpu_session.scaling_round(workloads, configs, 0, counts, 1)
    # mnist_cnn's and mnist_mlp's one-GPU runs are already at the level; the workload with none goes first
    assert [(w, c.name) for w, c in first] == [
        ("siamese_lstm", "1gpu"),
        ("siamese_lstm", "2gpu-same-global"),
        ("siamese_lstm", "2gpu-per-device"),
        ("mnist_cnn", "2gpu-same-global"),
        ("mnist_cnn", "2gpu-per-device"),
        ("mnist_mlp", "2gpu-same-global"),
        ("mnist_mlp", "2gpu-per-device"),
    ]
    for w, c in first:
        counts[w, c.name] += 1
    second = gpu_session.scaling_round(workloads, configs, 1, counts, 2)
    assert ("mnist_mlp", "1gpu") not in [(w, c.name) for w, c in second] and len(second) == 8


def test_without_earlier_logs_each_round_is_one_repeat_of_everything() -> None:
    configs = gpu_session.scaling_configs([2])
    counts = gpu_session.existing_scaling_repeats(None, "a", "jax", ["mnist_mlp", "mnist_cnn"], configs)
    assert list(fill_levels(counts, 3)) == [1, 2, 3]
    assert len(gpu_session.scaling_round(["mnist_mlp", "mnist_cnn"], configs, 0, counts, 1)) == 6


def test_a_scaling_call_stops_each_configuration_at_the_repeats_counting_the_collected_ones(
    tmp_path: Path, monkeypatch
) -> None:
    from argparse import Namespace

    folder = tmp_path / "gpu-scaling-a-1gpu"
    folder.mkdir()
    for index in (1, 2):
        (folder / f"mnist_mlp_jax.r{index:02d}.csv").write_text("")
    started: list[tuple[str, str, int]] = []

    def process(args, env, logs, console, deadline, workload, config, index):
        started.append((workload, config.name, index))
        return {"workload": workload, "run_id": config.name}

    monkeypatch.setattr(gpu_session, "_scaling_process", process)
    args = Namespace(
        device_counts=[2],
        existing=tmp_path,
        tag="a",
        backends=("jax",),
        workloads=("mnist_mlp", "mnist_cnn"),
        repeats=2,
        round_offset=4,
    )
    entries = gpu_session._scaling(args, {}, tmp_path, None, time.monotonic() + 3600)
    assert len(entries) == 2 * 3 * 2 - 2  # mnist_mlp's two collected one-GPU runs are not run again
    assert ("mnist_mlp", "1gpu") not in {(w, c) for w, c, _ in started}
    assert {index for *_, index in started} == {5, 6}  # the rounds carry on from --round-offset
    assert [w for w, *_ in started[:3]] == ["mnist_cnn"] * 3  # the least measured workload first


def test_a_scaling_process_is_a_runner_command_the_runner_parses(tmp_path: Path, monkeypatch) -> None:
    from argparse import Namespace
    from io import StringIO

    from benchmarks.cli import build_parser

    seen = recorded_commands(monkeypatch)
    args = Namespace(tag="a", backends=("jax",), platform="gpu-x2", carry=tmp_path)
    config = gpu_session.ScalingConfig(2, "per-device")
    entry = gpu_session._scaling_process(args, {}, tmp_path, StringIO(), time.monotonic() + 60, "mnist_cnn", config, 3)
    assert entry["returncode"] == 0 and entry["run_id"] == "gpu-scaling-a-2gpu-per-device"
    parsed = build_parser().parse_args(seen[0][3:])
    assert (parsed.workload, parsed.backend, parsed.suite, parsed.platform) == ("mnist_cnn", "jax", "short", "gpu-x2")
    assert (parsed.gpus, parsed.batch_policy, parsed.repeat_index, parsed.repeat_group) == (
        2, "per-device", 3, "gpu-scaling-a-2gpu-per-device",
    )  # fmt: skip
    assert parsed.offline and parsed.allow_synthetic and parsed.run_id == "gpu-scaling-a-2gpu-per-device"


def _repeat_log(root: Path, tag: str, stem: str, index: int) -> None:
    folder = root / f"gpu-repeats-{tag}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.r{index:02d}.csv").write_text("epoch\n")


def test_repeats_count_every_machines_collected_runs_and_start_with_the_least_measured(tmp_path: Path) -> None:
    """A later call (or a second machine) continues where the collected logs stand: the items with the fewest
    repeats come first, and an item already at --repeats is not run again."""
    _repeat_log(tmp_path, "h100-a", "mnist_mlp_jax", 1)
    _repeat_log(tmp_path, "h100-a", "mnist_mlp_jax", 2)
    _repeat_log(tmp_path, "h100-b", "mnist_mlp_jax", 1)
    _repeat_log(tmp_path, "h100-a", "cifar10_cnn_torch_synthetic", 1)
    items = [("mnist_mlp", "jax"), ("cifar10_cnn", "torch"), ("siamese_lstm", "torch")]
    counts = gpu_session.existing_repeats(tmp_path, items)
    assert counts == {("mnist_mlp", "jax"): 3, ("cifar10_cnn", "torch"): 1, ("siamese_lstm", "torch"): 0}
    levels = fill_levels(counts, 3)
    assert list(levels) == [1, 2, 3]
    assert round_order(items, 0, counts, 1) == [("siamese_lstm", "torch")]
    assert round_order(items, 0, counts, 3) == [("siamese_lstm", "torch"), ("cifar10_cnn", "torch")]
    assert gpu_session.existing_repeats(None, items) == dict.fromkeys(items, 0)


def test_each_process_design_counts_only_its_own_collected_repeats(tmp_path: Path) -> None:
    """The report pools neither design with the other, so a call of one design fills its own repeats."""
    from benchmarks.logs import write_metadata

    _repeat_log(tmp_path, "h100-a", "mnist_mlp_jax", 1)
    _repeat_log(tmp_path, "h100-a-round", "mnist_mlp_jax", 1)
    _repeat_log(tmp_path, "h100-a-round", "mnist_mlp_jax", 2)
    for index in (1, 2):
        path = tmp_path / "gpu-repeats-h100-a-round" / f"mnist_mlp_jax.r{index:02d}.csv"
        write_metadata(path, {"workload": "mnist_mlp", "process": {"position": 1, "workloads": 9}})
    items = [("mnist_mlp", "jax")]
    assert gpu_session.existing_repeats(tmp_path, items) == {("mnist_mlp", "jax"): 1}
    assert gpu_session.existing_repeats(tmp_path, items, "round") == {("mnist_mlp", "jax"): 2}


def test_a_preloaded_call_counts_only_the_repeats_forked_from_a_preloaded_parent(tmp_path: Path) -> None:
    _repeat_log(tmp_path, "h100-a", "mnist_mlp_jax", 1)  # no metadata: a fresh process, as the earliest logs were
    _repeat_log(tmp_path, "h100-a-round", "mnist_mlp_jax", 1)
    write_metadata(
        tmp_path / "gpu-repeats-h100-a-round" / "mnist_mlp_jax.r01.csv",
        {"workload": "mnist_mlp", "process": {"position": 2, "workloads": 9}},
    )
    for index in (1, 2, 3):
        _repeat_log(tmp_path, "h100-a-pre", "mnist_mlp_jax", index)
        write_metadata(
            tmp_path / "gpu-repeats-h100-a-pre" / f"mnist_mlp_jax.r{index:02d}.csv",
            {"workload": "mnist_mlp", "process": {"position": 1, "workloads": 1, "preloaded": index != 3}},
        )  # the third was an ordinary fresh process that happened to land in the folder
    items = [("mnist_mlp", "jax")]
    counts = {
        design: gpu_session.existing_repeats(tmp_path, items, design)[items[0]]
        for design in ("repeat", "round", "preloaded")
    }
    assert counts == {"repeat": 2, "round": 1, "preloaded": 2}


def test_round_walls_sum_each_rounds_processes_per_backend() -> None:
    entries = [
        {"round": 1, "backend": "jax", "wall_s": 10.0},
        {"round": 1, "backend": "torch", "wall_s": 50.5},
        {"round": 2, "backend": "jax", "wall_s": 4.0},
    ]
    walls = gpu_session.round_walls(entries)
    assert walls["1"] == {"processes": 2, "wall_s": 60.5, "by_backend": {"jax": 10.0, "torch": 50.5}}
    assert walls["2"]["wall_s"] == 4.0


def test_the_run_command_takes_a_compile_cache_folder() -> None:
    args = gpu_session._parser().parse_args(
        ["run", "--carry", "c", "--phase", "repeats", "--out", "o", "--compile-cache", "/tmp/cache"]
    )
    assert args.compile_cache == Path("/tmp/cache")


def recorded_commands(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The command lines the session's processes would run, each recorded as finished at once, in order."""
    commands: list[list[str]] = []

    def record(command: list[str], env: dict, console: object, deadline: float, entry: dict, stopped: str) -> dict:
        commands.append(command)
        return {**entry, "returncode": 0, "wall_s": 1.0}

    monkeypatch.setattr(gpu_session, "_run_until", record)
    return commands


def repeats_phase(tmp_path: Path, backends: tuple[str, ...], workloads: tuple[str, ...], *flags: str) -> list[dict]:
    """The repeats phase's entries for `workloads` on `backends` under `flags` (record the commands first:
    recorded_commands)."""
    base = ["run", "--carry", str(tmp_path), "--phase", "repeats", "--out", str(tmp_path)]
    args = gpu_session._parser().parse_args([*base, *flags])
    args.backends, args.workloads = backends, workloads
    return gpu_session._repeats(args, {}, tmp_path / "logs", io.StringIO(), time.monotonic() + 600)


def two_rounds_of_three_workloads(tmp_path: Path, design: str) -> list[dict]:
    """The repeats phase's entries for 2 repeats of mnist_mlp, mnist_cnn and imdb_fasttext on JAX and PyTorch
    under `--processes design` (record the commands first: recorded_commands)."""
    workloads = ("mnist_mlp", "mnist_cnn", "imdb_fasttext")
    return repeats_phase(tmp_path, ("jax", "torch"), workloads, "--repeats", "2", "--processes", design)


def test_collect_brings_headroom_records_beside_the_runs(tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    record = remote / "h100" / "gpu-headroom-a" / f"mnist_mlp{gpu_session.HEADROOM_SUFFIX}"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"workload": "mnist_mlp", "steady_median_s": 0.02}))
    collected = gpu_session.collect([_tarball(remote, tmp_path / "h.tar.gz")], tmp_path / "logs")
    target = tmp_path / "logs" / "h100" / "gpu-headroom-a" / f"mnist_mlp{gpu_session.HEADROOM_SUFFIX}"
    assert collected == [target] and json.loads(target.read_text())["steady_median_s"] == 0.02


def test_the_headroom_phase_trains_the_supported_workloads_on_the_short_suites_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "carry" / "keras" / "datasets" / "fashion-mnist").mkdir(parents=True)
    commands = recorded_commands(monkeypatch)
    args = gpu_session._parser().parse_args(
        ["run", "--carry", str(tmp_path / "carry"), "--phase", "headroom", "--out", str(tmp_path), "--tag", "c",
         "--platform", "NVIDIA-H100", "--workloads", "siamese_lstm,mnist_cnn,mnist_mlp"]
    )  # fmt: skip
    args.workloads = tuple(args.workloads.split(","))
    assert gpu_session.HEADROOM_WORKLOADS == headroom.SUPPORTED
    entries = gpu_session._headroom(args, {}, tmp_path / "logs", io.StringIO(), time.monotonic() + 600)
    assert [e["workload"] for e in entries] == ["mnist_cnn", "mnist_mlp"]  # siamese_lstm has no compiled loop
    folder = tmp_path / "logs" / "NVIDIA-H100" / "gpu-headroom-c"
    assert commands[0][1:] == [
        "-m", "campaign.headroom", "--workload", "mnist_cnn", "--cut", "short", "--allow-synthetic",
        "--out", str(folder / "mnist_cnn.headroom.json"), "--prefer-dataset", "fashion_mnist",
    ]  # fmt: skip


def test_a_round_design_trains_each_backends_workloads_of_the_round_in_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--processes round`: one runner process per backend per round, its workloads in the round's rotated order;
    every workload still gets one repeat per round, each from another process. The runner parses the command."""
    commands = recorded_commands(monkeypatch)
    entries = two_rounds_of_three_workloads(tmp_path, "round")
    assert [(e["round"], e["backend"], e["workloads"]) for e in entries] == [
        (1, "jax", ["mnist_mlp", "mnist_cnn", "imdb_fasttext"]),
        (1, "torch", ["mnist_mlp", "mnist_cnn", "imdb_fasttext"]),
        (2, "jax", ["mnist_cnn", "imdb_fasttext", "mnist_mlp"]),  # round 2's rotated order starts one item later
        (2, "torch", ["mnist_mlp", "mnist_cnn", "imdb_fasttext"]),
    ]
    parsed = build_parser().parse_args(commands[2][3:])
    assert (parsed.workload, parsed.backend, parsed.suite) == ("mnist_cnn,imdb_fasttext,mnist_mlp", "jax", "short")
    assert (parsed.repeat_index, parsed.repeat_group, parsed.repeat_planned) == (2, "gpu-repeats-a", 2)


def test_a_preloaded_design_forks_a_child_per_workload_from_one_parent_per_backend_per_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--processes preloaded`: a round's processes are a round design's, but each is a preloaded parent whose
    --run, one per workload in the round's order, is a runner command of that one workload on its backend."""
    from campaign import preload

    commands = recorded_commands(monkeypatch)
    entries = two_rounds_of_three_workloads(tmp_path, "preloaded")
    assert [(e["round"], e["backend"], e["design"]) for e in entries] == [
        (1, "jax", "preloaded"), (1, "torch", "preloaded"), (2, "jax", "preloaded"), (2, "torch", "preloaded"),
    ]  # fmt: skip
    for entry, command in zip(entries, commands, strict=True):
        assert command[1:6] == ["-m", "campaign.preload", "--backend", entry["backend"], "--run"]
        runs = command[6::2]
        assert command[5::2] == ["--run"] * len(entry["workloads"]) == ["--run"] * 3
        children = preload.child_argvs(entry["backend"], runs)  # what the parent checks before it imports
        parsed = [build_parser().parse_args(argv) for argv in children]
        assert [(p.command, p.workload, p.backend) for p in parsed] == [
            ("run", w, entry["backend"]) for w in entry["workloads"]
        ]
        assert {(p.repeat_index, p.repeat_group, p.run_id, p.suite) for p in parsed} == {
            (entry["repeat"], "gpu-repeats-a", "gpu-repeats-a", "short")
        }
    assert entries[2]["workloads"] == ["mnist_cnn", "imdb_fasttext", "mnist_mlp"]  # round 2's rotated order


def test_a_repeat_argv_of_another_design_is_the_runner_command_itself(tmp_path: Path) -> None:
    args = gpu_session._parser().parse_args(
        ["run", "--carry", str(tmp_path), "--phase", "repeats", "--out", str(tmp_path), "--processes", "round"]
    )
    assert args.processes == ("round",)
    runner = functools.partial(gpu_session._short_suite_repeat, args, tmp_path, run_id="gpu-repeats-a", index=3)
    jax_runner = functools.partial(runner, backend="jax")

    argv = gpu_session._repeat_argv("round", "jax", ("mnist_mlp", "mnist_cnn"), jax_runner)
    assert argv[0] == "benchmarks"
    parsed = build_parser().parse_args(argv[1:])
    assert (parsed.command, parsed.workload, parsed.backend, parsed.repeat_index) == (
        "run",
        "mnist_mlp,mnist_cnn",
        "jax",
        3,
    )
    argv = gpu_session._repeat_argv("preloaded", "jax", ("mnist_mlp",), jax_runner)
    assert argv[:4] == ["campaign.preload", "--backend", "jax", "--run"] and len(argv) == 5
    assert build_parser().parse_args(shlex.split(argv[4])).workload == "mnist_mlp"
    torch_runner = functools.partial(runner, backend="torch")
    argv = gpu_session._repeat_argv("staged", "torch", ("mnist_mlp", "mnist_cnn"), torch_runner)
    assert argv[:5] == ["campaign.preload", "--backend", "torch", "--staged", "--run"] and len(argv) == 8
    assert [build_parser().parse_args(shlex.split(a)).workload for a in argv[5::2]] == ["mnist_mlp", "mnist_cnn"]


def test_two_designs_alternate_whole_rounds_a_b_b_a(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--processes repeat,staged --repeats 2`: fresh processes, a staged parent, a staged parent, fresh processes;
    every workload in every round, numbered on from one round to the next whichever design ran it."""
    from campaign import preload

    commands = recorded_commands(monkeypatch)
    flags = ("--repeats", "2", "--processes", "repeat,staged", "--epochs", "3")
    entries = repeats_phase(tmp_path, ("torch",), ("mnist_mlp", "mnist_cnn"), *flags)
    assert [(e["round"], e["design"], e.get("workload") or e["workloads"], e["repeat"]) for e in entries] == [
        (1, "repeat", "mnist_mlp", 1), (1, "repeat", "mnist_cnn", 1),
        (2, "staged", ["mnist_cnn", "mnist_mlp"], 2),
        (3, "staged", ["mnist_mlp", "mnist_cnn"], 3),
        (4, "repeat", "mnist_cnn", 4), (4, "repeat", "mnist_mlp", 4),
    ]  # fmt: skip
    assert commands[2][2:4] == ["campaign.preload", "--backend"] and "--staged" in commands[2]
    staged = [build_parser().parse_args(a) for a in preload.child_argvs("torch", commands[2][7::2])]
    assert [(p.workload, p.repeat_index, p.epochs) for p in staged] == [("mnist_cnn", 2, 3), ("mnist_mlp", 2, 3)]
    assert build_parser().parse_args(commands[0][3:]).repeat_index == 1


def test_alternating_designs_put_each_first_as_often_as_second() -> None:
    assert gpu_session.alternating(("a", "b"), 1) == ["a", "b"]
    assert gpu_session.alternating(("a", "b"), 3) == ["a", "b", "b", "a", "a", "b"]


@pytest.mark.parametrize("designs", ["repeat,repeat", "repeat,staged,round", "repeat,fresh", ","])
def test_process_designs_are_one_or_two_different_known_ones(tmp_path: Path, designs: str, capsys) -> None:
    base = ["run", "--carry", str(tmp_path), "--phase", "repeats", "--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit):
        gpu_session.main([*base, "--processes", designs])
    assert "--processes: " in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_alternating_designs_refuse_existing_counts(tmp_path: Path) -> None:
    base = ["run", "--carry", str(tmp_path), "--phase", "repeats", "--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit, match=r"^error: --existing: alternating designs"):
        gpu_session.main([*base, "--processes", "repeat,staged", "--backends", "torch", "--existing", str(tmp_path)])
    assert not (tmp_path / "out").exists()


def test_epochs_reach_every_preloaded_child_and_the_manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--epochs 3`: each child trains 3 epochs of the short suite's slice, and the manifest says so, so that a round
    of fewer epochs is never costed as a round of the suite's 5."""
    from campaign import preload

    commands = recorded_commands(monkeypatch)
    flags = ("--repeats", "1", "--processes", "preloaded", "--epochs", "3")
    entries = repeats_phase(tmp_path, ("jax",), ("mnist_mlp", "mnist_cnn"), *flags)
    assert [(e["design"], e["epochs"]) for e in entries] == [("preloaded", 3)]
    children = preload.child_argvs("jax", commands[0][6::2])
    assert [(p.workload, p.epochs, p.suite) for p in map(build_parser().parse_args, children)] == [
        ("mnist_mlp", 3, "short"), ("mnist_cnn", 3, "short"),
    ]  # fmt: skip


@pytest.mark.parametrize("epochs", ["1", "0", "-2"])
def test_fewer_than_two_epochs_leave_no_steady_epoch_and_are_refused(tmp_path: Path, epochs: str) -> None:
    base = ["run", "--carry", str(tmp_path), "--phase", "repeats", "--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit, match=r"^error: --epochs: at least 2"):
        gpu_session.main([*base, "--epochs", epochs])
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("design", "backends"),
    [("preloaded", "tensorflow"), ("preloaded", "jax,tensorflow"), ("staged", "jax"), ("staged", "torch,jax")],
)
def test_a_forking_design_refuses_a_backend_it_cannot_fork(tmp_path: Path, design: str, backends: str) -> None:
    """TensorFlow starts threads on import; JAX children side by side would share the device's memory."""
    base = ["run", "--carry", str(tmp_path), "--phase", "repeats", "--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit, match=f"--processes {design}: --backends") as raised:
        gpu_session.main([*base, "--processes", design, "--backends", backends])
    assert str(raised.value).startswith("error: ")
    assert not (tmp_path / "out").exists()  # refused before anything was set up


def test_a_process_past_its_deadline_goes_down_with_the_processes_it_forked(tmp_path: Path) -> None:
    """A preloaded parent's child does the work: stopping the parent alone at the time budget would leave the
    child training on the device after the session moved on."""
    import os
    import sys

    pid_file = tmp_path / "child.pid"
    script = (
        "import os, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    time.sleep(120)\n"
        "    os._exit(0)\n"
        f"open({str(pid_file)!r}, 'w').write(str(pid))\n"
        "os.waitpid(pid, 0)\n"
    )
    started = time.monotonic()
    with (tmp_path / "console.txt").open("w") as console:
        entry = gpu_session._run_until(
            [sys.executable, "-c", script], dict(os.environ), console, started + 5, {"returncode": None}, "stopped"
        )
    assert (entry["returncode"], entry["skipped"]) == (-1, "stopped") and entry["wall_s"] < 60
    child = int(pid_file.read_text())
    while running(child) and time.monotonic() < started + 30:
        time.sleep(0.05)
    assert not running(child)


def test_a_process_past_its_deadline_is_asked_to_stop_before_it_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM first, so that a runner records its run as partial with its finished epochs; one that will not stop
    (here: ignores SIGTERM) is killed once the grace has passed."""
    import os
    import sys

    monkeypatch.setattr(gpu_session, "STOP_GRACE_S", 1.0)
    recorded = tmp_path / "recorded"
    script = (
        "import signal, sys, time\n"
        "def stop(signum, frame):\n"
        f"    open({str(recorded)!r}, 'w').write('partial')\n"
        "    if sys.argv[1] == 'ends':\n"
        "        sys.exit(130)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "while True:\n"
        "    time.sleep(0.05)\n"
    )
    for behaviour in ("ends", "lingers"):
        recorded.unlink(missing_ok=True)
        started = time.monotonic()
        with (tmp_path / "console.txt").open("w") as console:
            entry = gpu_session._run_until(
                [sys.executable, "-c", script, behaviour], dict(os.environ), console, started + 3,
                {"returncode": None}, "stopped",
            )  # fmt: skip
        assert (entry["returncode"], entry["skipped"]) == (-1, "stopped")
        assert recorded.read_text() == "partial"
        assert entry["wall_s"] < 3 + gpu_session.STOP_GRACE_S + 5


def test_the_per_repeat_design_starts_a_process_per_workload() -> None:
    chosen = [("mnist_mlp", "jax"), ("mnist_cnn", "jax"), ("mnist_mlp", "torch")]
    assert gpu_session.process_groups(chosen, "repeat") == [(i,) for i in chosen]
    assert gpu_session.process_groups(chosen, "round") == [(("mnist_mlp", "jax"), ("mnist_cnn", "jax")),
                                                          (("mnist_mlp", "torch"),)]  # fmt: skip


def test_the_variance_phase_builds_runner_commands_the_runner_parses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from argparse import Namespace

    seen: list[list[str]] = []
    monkeypatch.setattr(
        gpu_session.subprocess, "run", lambda command, **_: seen.append(command) or Namespace(returncode=0)
    )
    args = Namespace(tag="a", repeats=1, platform="gpu", carry=tmp_path)
    entries = gpu_session._variance(args, {}, tmp_path, io.StringIO(), time.monotonic() + 600)
    assert [e["run_id"] for e in entries] == [f"gpu-variance-a-{name}" for name in gpu_session.VARIANCE_VARIANTS]
    for command, (prefix, gc) in zip(seen, gpu_session.VARIANCE_VARIANTS.values(), strict=True):
        assert command[: len(prefix)] == list(prefix)
        parsed = build_parser().parse_args(command[len(prefix) + 3 :])
        assert (parsed.workload, parsed.backend, parsed.epochs) == ("mnist_mlp", "jax", gpu_session.VARIANCE_EPOCHS)
        assert parsed.host_gc == (gc or "on") and parsed.repeat_index == 1 and parsed.offline


def test_a_process_ends_when_the_session_that_started_it_is_killed_outright(tmp_path: Path) -> None:
    """kill -9 of gpu_session runs no cleanup of its own: the kernel's parent-death signal stops its process."""
    import signal
    import subprocess
    import sys

    pid_file = tmp_path / "worker.pid"
    worker = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    session = (
        "import os, sys, time\n"
        "from campaign import gpu_session\n"
        f"with open({str(tmp_path / 'console.txt')!r}, 'w') as console:\n"
        f"    gpu_session._run_until([sys.executable, '-c', {worker!r}], dict(os.environ), console,\n"
        "                           time.monotonic() + 120, {}, 'stopped')\n"
    )
    with subprocess.Popen([sys.executable, "-c", session], cwd=Path(__file__).resolve().parents[2]) as killed:
        started = time.monotonic()
        while not pid_file.exists() and time.monotonic() < started + 60:
            time.sleep(0.05)
        worker_pid = int(pid_file.read_text())
        killed.send_signal(signal.SIGKILL)
    while running(worker_pid) and time.monotonic() < started + 90:
        time.sleep(0.05)
    assert not running(worker_pid)
    assert killed.returncode == -signal.SIGKILL


def test_the_reference_workloads_run_in_the_repeats_phase_on_the_short_slices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--workloads resnet50,gpt_nietzsche` is accepted and each repeat trains the short suite's slice."""
    chosen: list[argparse.Namespace] = []
    monkeypatch.setattr(gpu_session, "run", lambda args: chosen.append(args) or 0)
    base = ["run", "--carry", str(tmp_path), "--phase", "repeats", "--out", str(tmp_path / "out")]
    assert gpu_session.main([*base, "--workloads", "resnet50,gpt_nietzsche"]) == 0
    assert chosen[0].workloads == ("resnet50", "gpt_nietzsche")
    commands = recorded_commands(monkeypatch)
    repeats_phase(tmp_path, ("jax", "torch"), chosen[0].workloads, "--repeats", "1")
    parsed = [build_parser().parse_args(command[command.index("run") :]) for command in commands]
    assert sorted((p.workload, p.backend, p.suite) for p in parsed) == [
        ("gpt_nietzsche", "jax", "short"), ("gpt_nietzsche", "torch", "short"),
        ("resnet50", "jax", "short"), ("resnet50", "torch", "short"),
    ]  # fmt: skip


def test_torch_native_runs_the_native_twins_only_and_its_sweep_compiles_in_either_precision() -> None:
    items = gpu_session.plan("sweep", ["torch-native"])
    assert {i.workloads for i in items} == {("resnet50", "gpt_nietzsche")}
    flags = {i.config: i.flags for i in items}
    assert flags["torch-compile-bfloat16"] == ("--jit-compile", "on", "--precision", "bfloat16")
    [suite] = gpu_session.plan("suite", ["torch-native"])
    assert suite.workloads == ("resnet50", "gpt_nietzsche")
    assert gpu_session.applies("mnist_mlp", "jax") and not gpu_session.applies("mnist_mlp", "torch-native")
    with pytest.raises(SystemExit, match="torch-native trains only resnet50, gpt_nietzsche"):
        gpu_session.main(["run", "--carry", ".", "--phase", "repeats", "--backends", "torch-native",
                          "--workloads", "mnist_mlp", "--out", "/tmp/unused"])  # fmt: skip


def test_the_overhead_table_gives_the_runners_share_of_the_plain_epoch() -> None:
    figures = {"epoch_s": 0.5, "direct_s": 0.001, "ab_s": 0.005, "runner_s": 0.507}
    entries = [
        {"workload": "gpt_nietzsche", "backend": "jax", "overhead": figures},
        {"workload": "resnet50", "backend": "torch-native", "overhead": None},
    ]
    table = gpu_session.overhead_table(entries).splitlines()
    assert table[1].split() == ["gpt_nietzsche", "jax", "0.5000", "0.200", "+1.00", "+1.40"]
    assert "no figures" in table[2]
