"""The GPU configuration table and the default check, decided by repeats and the rank-sum test, not by eye."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import median

from benchmarks.logs import EpochLogWriter, EpochRecord, write_metadata
from benchmarks.workloads import REFERENCE_WORKLOADS, WORKLOADS, spec
from campaign import configurations
from records.loading import load_runs


def _write_timed(
    root: Path,
    run_id: str,
    steady: float,
    samples: int = 60000,
    index: int = 1,
    process: dict | None = None,
    **settings,
) -> None:
    path = root / "h200" / run_id / f"mnist_mlp_torch.r{index:02d}.csv"
    writer = EpochLogWriter(path)
    writer.append(EpochRecord(0, 9.0, compiled=True))
    writer.append(EpochRecord(1, steady, compiled=False))
    writer.append(EpochRecord(2, steady * 1.2, compiled=False))
    writer.close()
    meta = {"workload": "mnist_mlp", "backend": "torch", "status": "complete", "run_id": run_id, "platform": "h200"}
    meta |= {"data": {"train_samples": samples}, "settings": {"steps_per_execution": 1, **settings}}
    write_metadata(path, {**meta, "process": process})


def _repeats(root: Path, run_id: str, steadies: list[float], **settings) -> None:
    for index, steady in enumerate(steadies, start=1):
        _write_timed(root, run_id, steady, index=index, **settings)


def test_table_shows_repeats_and_intervals_and_marks_default_and_fastest(tmp_path: Path) -> None:
    _repeats(tmp_path, "gpu-repeats-a", [1.00, 1.02, 0.98], jit_compile=False, float32_matmul="tf32")
    _repeats(tmp_path, "gpu-sweep-torch-torch-compile", [0.50, 0.52, 0.49], jit_compile=True, float32_matmul="tf32")
    _write_timed(tmp_path, "gpu-sweep-torch-slice", 0.1, samples=2500, jit_compile=False)  # compares with no other
    table = configurations.configuration_table(tmp_path)
    assert "| jit on, 1 step/exec, tf32 matmul **fastest** | sweep-torch-torch-compile | 3 | 0.55 [0.54–0.57" in table
    assert "| jit off, 1 step/exec, tf32 matmul **default** | repeats-a | 3 | 1.10 [1.08–1.12" in table
    assert "| 2,500 | jit off, 1 step/exec, framework-default matmul | sweep-torch-slice | 1 | 0.11 |" in table


def test_a_default_beaten_beyond_noise_fails_the_check(tmp_path: Path) -> None:
    _repeats(tmp_path, "gpu-repeats-a", [1.00, 1.02, 0.98, 1.01, 0.99], jit_compile=False)
    _repeats(tmp_path, "gpu-sweep-torch-torch-compile", [0.50, 0.52, 0.49, 0.51, 0.50], jit_compile=True)
    check = configurations.check_defaults(tmp_path)
    [problem] = check.problems
    assert problem.startswith("mnist_mlp on torch (60,000 samples): jit on, 1 step/exec, framework-default matmul is")
    assert "x faster than the default (jit off" in problem and "95% CI" in problem
    assert configurations.main(["check-defaults", str(tmp_path)]) == 1


def test_a_difference_inside_the_noise_or_with_too_few_repeats_does_not_rank(tmp_path: Path) -> None:
    _repeats(tmp_path, "gpu-repeats-a", [1.00, 1.01, 1.02, 1.03, 1.04], jit_compile=False)
    _repeats(tmp_path, "gpu-sweep-torch-torch-compile", [0.995, 1.005, 1.015, 1.025, 1.035], jit_compile=True)
    assert configurations.check_defaults(tmp_path).problems == []
    one = tmp_path / "one"
    _write_timed(one, "gpu-suite-torch-default", 1.0, jit_compile=False)
    _write_timed(one, "gpu-sweep-torch-torch-compile", 0.5, jit_compile=True)  # 2x faster, but one run each
    check = configurations.check_defaults(one)
    assert check.problems == [] and len(check.undecided) == 1 and "too few repeats" in check.undecided[0]


COMMITTED_GPU_LOGS = Path(__file__).resolve().parents[2] / "logs" / "reference" / "NVIDIA-H200"


def test_no_committed_configuration_beats_its_default_beyond_noise() -> None:
    assert configurations.check_defaults(COMMITTED_GPU_LOGS).problems == []


def test_committed_default_runs_ran_with_the_current_gpu_defaults() -> None:
    from benchmarks.harness.backends import default_settings

    defaults = [c for c in configurations.configurations(COMMITTED_GPU_LOGS) if c.is_default]
    assert _default_pairs(defaults)
    paths = [*COMMITTED_GPU_LOGS.glob("gpu-suite-*-default/*.json"), *COMMITTED_GPU_LOGS.glob("gpu-repeats-*/*.json")]
    for path in paths:
        meta = json.loads(path.read_text())
        recorded, expected = meta["settings"], default_settings(meta["backend"], meta["workload"], gpu=True)
        jit = expected.jit_compile if expected.jit_compile != "auto" else meta["backend"] != "torch"
        assert (recorded["jit_compile"], recorded["steps_per_execution"]) == (jit, expected.steps_per_execution), path
        if spec(meta["workload"]).uses_lstm:
            assert recorded["use_cudnn"] == expected.use_cudnn, path
        # Runs from before the precision was recorded ran with each framework's default (docs/results.md).
        assert recorded.get("float32_matmul", expected.float32_matmul) == expected.float32_matmul, path


def test_first_epochs_from_a_warm_compile_cache_are_never_pooled_with_compiled_ones(tmp_path: Path) -> None:
    """Steady epochs run the same programs whether the compile was loaded or not and stay one configuration;
    the first epoch of a cached run measured a load, so each kind of first epoch keeps its own median."""
    cache = {"dir": "/tmp/c", "hits": 9, "misses": 0}
    _write_timed(tmp_path, "gpu-repeats-a", 1.0, index=1, compile_cache={**cache, "state": "cold"})
    _write_timed(tmp_path, "gpu-repeats-a", 1.1, index=2, compile_cache={**cache, "state": "warm"})
    _write_timed(tmp_path, "gpu-repeats-a", 1.2, index=3)
    [config] = configurations.configurations(tmp_path)
    assert len(config.steady_medians) == 3
    assert config.first_epochs == {"compiled": [9.0, 9.0], "compile cache warm": [9.0]}
    row = configurations.configuration_table(tmp_path).splitlines()[2]
    assert "9.00 (compile cache warm, n=1); 9.00 (compiled, n=2)" in row


def test_first_epochs_after_another_workload_in_the_process_are_kept_apart(tmp_path: Path) -> None:
    """A process that trains several workloads pays its start-up in the first one's first epoch only: the others'
    first epochs are their own kind, and the report's pooled first epoch leaves them out."""
    _write_timed(tmp_path, "gpu-repeats-a", 1.0, index=1, process={"position": 1, "workloads": 3})
    _write_timed(tmp_path, "gpu-repeats-a", 1.1, index=2, process={"position": 2, "workloads": 3})
    _write_timed(tmp_path, "gpu-repeats-a", 1.2, index=3)  # written before the place was recorded
    [config] = configurations.configurations(tmp_path)
    assert config.first_epochs == {"compiled": [9.0, 9.0], "compiled, not first in its process": [9.0]}
    runs = sorted(load_runs(tmp_path).runs, key=lambda r: r.metadata.repeat.index if r.metadata.repeat else 0)
    assert [r.first_epoch_s for r in runs] == [9.0, None, 9.0]


def test_the_committed_h100_runs_name_their_cache_state() -> None:
    h100 = COMMITTED_GPU_LOGS.parent / "NVIDIA-H100"
    defaults = [c for c in configurations.configurations(h100) if c.is_default]
    assert _default_pairs(defaults)
    warm = [c for c in defaults if "compile cache warm" in c.first_epochs]
    # JAX's first epochs take less time once every program loads from the cache than when most compile.
    jax_warm = [c for c in warm if c.backend == "jax" and "compile cache mixed" in c.first_epochs]
    assert len([c for c in jax_warm if c.workload not in REFERENCE_WORKLOADS]) == 9  # the 2017-2018 scripts
    assert all(
        median(c.first_epochs["compile cache warm"]) < median(c.first_epochs["compile cache mixed"]) for c in jax_warm
    )


def _default_pairs(defaults: list) -> bool:
    """Every 2017-2018 workload on JAX and PyTorch; the reference workloads where they were run (their native
    twins too)."""
    found = {(c.backend, c.workload) for c in defaults}
    every = {(b, w) for b in ("jax", "torch") for w in WORKLOADS} | {("torch-native", w) for w in REFERENCE_WORKLOADS}
    return {(b, w) for b, w in every if w not in REFERENCE_WORKLOADS} <= found <= every
