"""The estimate before renting: throughput scaled to the plan, its bases in order, its stated range, the machine's
start apart, the max-lifetime warning, and a dry run that imports no framework."""

from __future__ import annotations

import datetime as dt
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from report_helpers import REPO, write_run

from benchmarks.suites import get_suite
from benchmarks.workloads import REFERENCE_WORKLOADS
from estimator.backtest import committed_bands
from estimator.basis import COMMITTED_REFERENCE, measured
from estimator.model import (
    Fit,
    Observation,
    Target,
    accelerator_model,
    cpu_machine,
    first_epoch_cached,
    predict,
)
from estimator.suite import Shape, estimate_suite, machine_start, suite_lines
from estimator.workload_plan import planned
from orchestrate.cli import main
from orchestrate.schedule import check_spec, estimate, estimate_text
from records.catalog import load_catalog
from records.loading import load_runs

FIT = Fit(exponent=1.0, pairs=1, widest=2.0)
B200 = {"hardware": {"cpu_model": "Xeon", "accelerator": "gpu", "gpus": [{"name": "NVIDIA B200"}]}}


def observation(**fields: object) -> Observation:
    values: dict[str, object] = {
        "workload": "mnist_mlp", "backend": "jax", "machine": "b200", "batch": 128, "origin": "measured",
        "group": "g", "variant": "", "where": "reference NVIDIA-B200-jax", "samples": 60000, "epochs": 4,
        "first_s": 4.0, "steady_s": 0.5, "total_s": 5.5,
    }  # fmt: skip
    return Observation(**(values | fields))  # type: ignore[arg-type]


def target(**fields: object) -> Target:
    values: dict[str, object] = {
        "workload": "mnist_mlp", "backend": "jax", "machine": "b200", "batch": 128, "samples": 6000, "epochs": 3,
    }  # fmt: skip
    return Target(**(values | fields))  # type: ignore[arg-type]


def test_machine_names() -> None:
    names = ("nvidia-h100-80gb", "NVIDIA H200", "Tesla K80", "A10G", "GeForce GTX 1070 Ti 8 GB", "Quadro P6000", None)
    assert [accelerator_model(t) for t in names] == ["h100", "h200", "k80", "a10g", "gtx1070ti", "p6000", "cpu"]
    # A CPU machine's description names machine families (n1, e2), not accelerators; an instance family (p2)
    # does not hide the GPU named after it.
    assert accelerator_model("GCE preemptible n1-highcpu-32 (Skylake)") == "cpu"
    assert accelerator_model("AWS p2.xlarge: half a Tesla K80") == "k80"
    assert cpu_machine("GCE preemptible n1-highcpu-16 (Skylake)") == "cpu:n1-highcpu-16"
    assert cpu_machine("aws-c5.4xlarge") == "cpu:c5.4xlarge" and cpu_machine("local") == "cpu"


def test_throughput_is_scaled_to_the_planned_slice_with_the_compilation_apart() -> None:
    # 60,000 samples in 0.5 s steady epochs: 120,000 samples/s; the first epoch compiled for 4 - 0.5 = 3.5 s.
    found = predict(target(), [observation()], {})
    assert found is not None and found.basis == "measured"
    assert found.seconds == pytest.approx(3.5 + 3 * 6000 / 120000)
    assert "reference NVIDIA-B200-jax, 1 run of 60,000 samples" in found.where


def test_the_nearest_sample_count_and_the_configuration_measured_most_are_used() -> None:
    slice_run = observation(group="s", samples=5000, steady_s=0.25, first_s=2.25)  # 20,000 samples/s
    generic = observation(group="v", variant="generic LSTM", steady_s=5.0, first_s=6.0)
    pool = [observation(), observation(group="g2"), slice_run, generic]
    assert predict(target(samples=6000), pool, {}).seconds == pytest.approx(2.0 + 3 * 6000 / 20000)  # type: ignore[union-attr]
    assert predict(target(samples=60000), pool, {}).seconds == pytest.approx(3.5 + 3 * 0.5)  # type: ignore[union-attr]
    named = predict(target(samples=60000, variant="generic LSTM"), pool, {})
    assert named is not None and named.seconds == pytest.approx(1.0 + 3 * 5.0)


def test_bases_in_order_measured_published_hardware_else_nothing() -> None:
    published = observation(origin="published", group="p", where="published k80-tensorflow", machine="k80")
    measured = observation(machine="k80", group="m", steady_s=1.0, first_s=1.5)
    assert predict(target(machine="k80"), [published, measured], {}).basis == "measured"  # type: ignore[union-attr]
    assert predict(target(machine="k80"), [published], {}).basis == "published"  # type: ignore[union-attr]
    # A T4 (8.1 TFLOP/s) from the K80 (4.37) with an exponent of 1: 1.85x the throughput.
    related = predict(target(machine="t4"), [published], {"gpu": FIT})
    assert related is not None and related.basis == "hardware" and "(k80, scaled x1.85 for a t4)" in related.where
    assert related.seconds == pytest.approx(3.5 + 3 * 6000 / (120000 * 8.1 / 4.37))
    # No exponent for the kind, a machine with no speed figure, a GPU for a CPU: nothing comparable, no figure.
    assert predict(target(machine="t4"), [published], {}) is None
    assert predict(target(machine="nvidia"), [published], {"gpu": FIT}) is None
    assert predict(target(machine="cpu:n2-highcpu-16"), [published], {"gpu": FIT, "cpu": FIT}) is None


def test_the_quick_suite_on_a_t4_is_minutes_and_slices_are_scaled(tmp_path: Path) -> None:
    """The published K80 epochs ran the whole data set: the quick suite's 1,000 IMDB reviews take seconds."""
    profile = load_catalog()["gce-t4"]
    items = [(w, b) for b in ("tensorflow", "jax", "torch") for w in get_suite("quick").workloads]
    found = estimate_suite(profile, "quick", items, tmp_path)
    # Every run is estimated: TensorFlow from the published GPUs' runs scaled to a T4; JAX and PyTorch from the
    # physics basis (the measured GPUs' rates at the T4's datasheet peak); the reference workloads (ResNet-50, the
    # GPT), which never ran on TensorFlow, from the physics basis at JAX's rates, which says so.
    assert len(found.items) == 33 and len(found.estimated) == 33
    bases = {(i.workload, i.backend): i for i in found.items}
    assert {i.basis for (w, b), i in bases.items() if b == "tensorflow" and w not in ("resnet50", "gpt_nietzsche")} == {
        "hardware"
    }
    assert {i.basis for (_, b), i in bases.items() if b != "tensorflow"} == {"datasheet"}
    borrowed = bases[("resnet50", "tensorflow")]
    assert borrowed.basis == "datasheet" and "tensorflow has no GPU runs: jax's rates stand in" in borrowed.where
    assert 6 * 60 <= found.seconds <= 25 * 60
    assert max(i.seconds or 0 for i in found.items) < 120
    assert found.low < found.seconds < found.high
    assert found.start.seconds == machine_start(profile, 33).seconds > 0


def test_the_home_server_study_on_a_g4dn_is_tens_of_minutes(tmp_path: Path) -> None:
    """20 epochs of 300,000 pairs took 23 min on the study's GTX 1070 Ti: a T4 is a machine of that class."""
    profile = load_catalog()["aws-g4dn.xlarge"]
    found = estimate_suite(profile, "home-server-2018", [("siamese_lstm", "tensorflow")], tmp_path)
    (item,) = found.items
    assert item.basis == "hardware" and "gtx1070ti-home-tensorflow" in item.where
    assert 10 * 60 <= found.runs <= 40 * 60 and found.high < 60 * 60


def test_the_cpu_schedule_fits_its_own_max_lifetime(tmp_path: Path) -> None:
    profile = load_catalog()["gce-n1-highcpu-8"]
    spec = check_spec("cpu-weekly", profile, "0 4 * * 1", "UTC", "quick", None, None, True, 240, "me@box")
    found = estimate(spec, tmp_path, [])
    text = estimate_text(spec, found)
    assert found.high_s < spec.max_lifetime_s and not any("mid-suite" in line for line in text)
    # TensorFlow from the study's own n1-highcpu-8; no JAX or PyTorch run on any CPU, nor the reference workloads on
    # TensorFlow (20 + 6 runs): said, not invented.
    assert "min of runs (basis: published;" in text[1]
    assert text[1].startswith("  per run: at least ") and "(a lower bound: 26 of 33 run(s) not estimated)" in text[1]
    # the month, and the itemised run, are lower bounds too: never a range that counts those runs as nothing
    assert any(line.startswith("  at least $") and "a month (a lower bound: 26 of 33 run" in line for line in text)
    assert any(re.match(r" +at least \$\d+\.\d\d \(a lower bound: 26 of 33 run\(s\) not estimated\) at \$", line)
               for line in text)  # fmt: skip


def test_nothing_comparable_is_said_and_the_totals_are_lower_bounds(logs: Path) -> None:
    profile = load_catalog()["local"]
    lines = suite_lines(estimate_suite(profile, "quick", [("mnist_mlp", "jax")], logs), profile, False, 3600)
    assert (
        "mnist_mlp [jax]: not estimated: nothing comparable (no run of it on cpu, nor on a CPU to relate to)"
        in (lines[2])
    )
    # a run with nothing comparable counts as nothing: the total is "at least", with no high end
    assert re.match(r"  estimate +at least [\d.]+ min \(a lower bound: 1 of 1 run\(s\) not estimated\): ", lines[0])


def test_every_run_of_a_shared_process_counts_its_first_epoch_from_the_one_that_started_it(logs: Path) -> None:
    """`make bench` trains each backend's workloads in one process: the second workload's run counts (its steady
    epochs as any run's), and the first epoch's extra time comes from the run that started the process."""
    shared = {**B200, "process": {"position": 2, "workloads": 2}}
    write_run(logs, platform="NVIDIA-B200", elapsed=(1.5, 0.5, 0.5, 0.5), schema2=shared)
    (warm,) = measured(logs)[:1]
    assert warm.warm_first and warm.machine == "b200"  # kept, no longer dropped
    profile = load_catalog()["runpod-b200"]
    (alone,) = estimate_suite(profile, "full", [("mnist_mlp", "jax")], logs).items
    assert alone.basis == "measured" and "each followed another workload in its process" in alone.where
    write_run(logs, platform="NVIDIA-B200", run_id="first", elapsed=(4.0, 0.5, 0.5, 0.5), schema2=B200)
    (both,) = estimate_suite(profile, "full", [("mnist_mlp", "jax")], logs).items
    assert "the first epoch's compile from the 1 that compiled in a fresh process" in both.where
    pool = measured(logs)
    found = predict(Target("mnist_mlp", "jax", "b200", 128, 60000, 20), pool, {})
    assert found is not None and found.seconds == pytest.approx(3.5 + 20 * 0.5)  # the fresh run's first epoch


def test_range_is_the_backtests_and_warns_when_it_outlives_the_machine(logs: Path) -> None:
    write_run(logs / "reference" / "NVIDIA-B200", platform="NVIDIA-B200", elapsed=(4.0, 0.5, 0.5, 0.5), schema2=B200)
    profile = load_catalog()["runpod-b200"]
    found = estimate_suite(profile, "full", [("mnist_mlp", "jax")] * 3, logs)
    (item,) = found.items
    band = committed_bands()["measured"]
    assert item.basis == "measured" and item.count == 3 and "NVIDIA-B200-jax" in item.where
    outside = item.seconds - (3.5 + 20 * 0.5)  # type: ignore[operator]
    assert item.low == pytest.approx(13.5 * band.low + outside) and item.high == pytest.approx(
        13.5 * band.high + outside
    )
    lines = suite_lines(found, profile, False, found.high - 1)
    warnings = [line for line in lines if line.startswith("warning: the estimate reaches")]
    assert len(warnings) == 1 and "the machine would end itself" in warnings[0]
    assert "mid-suite" not in suite_lines(found, profile, False, found.high)[-1]


def test_a_dry_run_imports_no_framework_and_prints_no_framework_log(tmp_path: Path) -> None:
    command = [sys.executable, "-X", "importtime", "-m", "orchestrate", "run", "--profile", "gce-t4", "--dry-run"]
    done = subprocess.run([*command, "--logs", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    modules = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert modules and not [m for m in modules if re.match(r"(keras|tensorflow|jax|torch)(\.|$)", m)]
    log_lines = [line for line in done.stderr.splitlines() if not line.startswith("import time:")]
    assert not [line for line in log_lines if re.search(r"oneDNN|absl|cpu_feature_guard|TensorFlow", line)]
    assert "imdb_bidirectional_lstm [tensorflow]" in done.stdout


def test_the_runner_flags_shape_the_planned_runs(tmp_path: Path) -> None:
    profile = load_catalog()["runpod-h200-x2"]
    one = estimate_suite(profile, "short", [("mnist_mlp", "jax")], tmp_path).items[0]
    same = estimate_suite(profile, "short", [("mnist_mlp", "jax")], tmp_path, Shape(devices=2)).items[0]
    split = estimate_suite(profile, "short", [("mnist_mlp", "jax")], tmp_path, Shape(devices=2, per_device_batch=True))
    assert "NVIDIA-H200-jax" in one.where and "2 devices same-global" in same.where
    assert "2 devices per-device" in split.items[0].where
    longer = estimate_suite(profile, "short", [("mnist_mlp", "jax")], tmp_path, Shape(epochs=10)).items[0]
    assert longer.seconds is not None and one.seconds is not None and longer.seconds > one.seconds


def test_a_dry_run_on_two_gpus_is_estimated_from_two_gpu_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--profile", "runpod-h200-x2", "--host", "root@pod.invalid", "--gpus", "2", "--backends", "jax"]
    argv += ["--workloads", "mnist_mlp", "--suite", "short", "--dry-run", "--logs", str(tmp_path)]
    assert main([*argv, "--ledger", str(tmp_path / "ledger.jsonl")]) == 0
    assert "mnist_mlp [jax]: " in (out := capsys.readouterr().out) and "NVIDIA-H200-x2-jax [jit on, 2 devices" in out


def test_the_default_settings_are_preferred_to_a_variant_measured_more() -> None:
    """A sweep's variant, or a repeat forked from a preloaded parent, measured more often than the default settings
    is still not what the runner does: the default's runs are the basis."""
    forked = [observation(group=f"p{i}", variant="forked", steady_s=0.25, defaults=False) for i in range(3)]
    found = predict(target(samples=60000), [observation(), observation(group="g2"), *forked], {})
    assert found is not None and found.seconds == pytest.approx(3.5 + 3 * 0.5)
    assert "2 runs of 60,000 samples" in found.where


def _h100_default_medians() -> dict[tuple[str, str], tuple[float, int]]:
    """Per workload and backend, the median wall time (start to end: the epochs and what the run did outside them,
    what an estimate predicts) of the committed H100 repeats of the default settings, each trained alone in a
    fresh process, of the short suite's epochs and samples, and how many runs. The median is of the runs whose first
    epoch compiled, as a fresh machine's does, where any did: most repeats loaded a compile cache kept between them."""
    walls: dict[tuple[str, str], list[tuple[float, bool]]] = {}
    for run in load_runs(COMMITTED_REFERENCE / "NVIDIA-H100").complete_runs:
        meta = run.metadata
        shape = planned("short", run.workload, None, None)
        if (
            not run.default_settings
            or meta.repeat is None  # a repeat trained alone in a fresh process (default_settings says how)
            or (meta.epochs_planned, meta.data.train_samples) != shape
        ):
            continue
        wall = dt.datetime.fromisoformat(str(meta.ended_at)) - dt.datetime.fromisoformat(str(meta.started_at))
        walls.setdefault((run.workload, run.config.backend), []).append((wall.total_seconds(), first_epoch_cached(run)))
    medians = {}
    for key, values in walls.items():
        compiled = [wall for wall, cached in values if not cached]
        medians[key] = (statistics.median(compiled or [wall for wall, _ in values]), len(values))
    return medians


def test_a_p5_is_estimated_from_the_h100s_default_repeats_and_its_ranges_cover_their_medians(tmp_path: Path) -> None:
    # The 18 JAX and PyTorch items of the nine 2017-2018 scripts, each with at least 5 committed H100 repeats (the
    # reference workloads' H100 runs are fewer, and are judged by the backtest like any other).
    items = [(w, b) for w in get_suite("short").workloads if w not in REFERENCE_WORKLOADS for b in ("jax", "torch")]
    medians = {key: value for key, value in _h100_default_medians().items() if key in items}
    assert sorted(medians) == sorted(items) and min(n for _, n in medians.values()) >= 5
    found = estimate_suite(load_catalog()["aws-p5.4xlarge"], "short", items, tmp_path / "no-logs")
    by_item = {(i.workload, i.backend): i for i in found.items}
    cnn = by_item[("mnist_cnn", "jax")]
    assert cnn.basis == "measured" and cnn.where.startswith("reference NVIDIA-H100-jax, 10 runs of 60,000 samples")
    inside = [
        key for key, (median, _) in medians.items() if by_item[key].low is not None
        and by_item[key].low <= median <= (by_item[key].high or 0)
    ]  # fmt: skip
    assert len(inside) >= 0.8 * len(items), sorted(set(medians) - set(inside))
    assert all(by_item[key].basis == "measured" and "NVIDIA-H100" in by_item[key].where for key in items)
