"""The runner end to end: every workload on every backend trains a tiny slice and writes a valid CSV and metadata.

One process per backend (each imports its framework once), through the `suite` command users run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import workloads
from benchmarks.harness.backends import BACKENDS
from benchmarks.logs import COLUMNS, metadata_path, read_epoch_log
from benchmarks.metadata import key_list
from benchmarks.workloads import REFERENCE_WORKLOADS, spec
from tests.benchmarks.conftest import run_benchmarks

# The 2017-2018 scripts, which train on these tiny slices in seconds; the reference workloads (ResNet-50, the GPT)
# are trained on their own quick slices in test_reference_workloads.py.
WORKLOADS = tuple(w for w in workloads.WORKLOADS if w not in REFERENCE_WORKLOADS)

pytestmark = pytest.mark.slow

METADATA_KEYS = set(key_list()[""])  # every key of the schema is written, null where unknown


@pytest.fixture(scope="module")
def tiny_suite(keras_home: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("logs")
    args = ["suite", "--suite", "quick", "--platform", "ci", "--out", str(out), "--run-id", "tiny"]
    args += ["--epochs", "2", "--train-limit", "96", "--val-limit", "32", "--offline"]
    args += ["--workloads", ",".join(WORKLOADS)]
    result = run_benchmarks(args, keras_home, timeout=1800)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return out / "ci" / "tiny", result.stdout


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("workload", WORKLOADS)
def test_every_workload_writes_a_valid_log(tiny_suite: tuple[Path, str], workload: str, backend: str) -> None:
    run_dir, _ = tiny_suite
    [path] = list(run_dir.glob(f"{workload}_{backend}*.csv"))
    log = read_epoch_log(path)
    meta = json.loads(metadata_path(path).read_text())  # the file as written
    assert log.columns == COLUMNS
    assert meta is not None and set(meta) >= METADATA_KEYS
    identity = (meta["workload"], meta["backend"], meta["platform"], meta["status"])
    assert identity == (workload, backend, "ci", "complete")
    assert [e.epoch for e in log.epochs] == [0, 1] and meta["epochs_completed"] == 2
    assert [e.compiled for e in log.epochs] == [True, False]
    assert all(e.elapsed > 0 and e.loss is not None for e in log.epochs)
    assert meta["timing"]["first_epoch_s"] == log.epochs[0].elapsed
    assert meta["timing"]["steady_median_s"] == log.epochs[1].elapsed
    assert all(meta["timing"][step] > 0 for step in ("data_s", "build_s", "describe_s"))  # before the first epoch
    assert meta["timing"]["turn_wait_s"] is None  # no staged parent: it waited for nobody
    assert meta["software"]["framework"] == backend and meta["software"]["keras"].startswith("3.")
    assert meta["hardware"]["accelerator"] == "cpu" and meta["hardware"]["cpu_cores_logical"] >= 1
    assert meta["settings"]["dtype_policy"] == "float32"
    # One steady epoch: too few to judge stability; the fingerprint and host telemetry are there on a CPU too.
    assert meta["stability"]["label"] == "too few epochs" and meta["stability"]["host_bound"] is None
    assert meta["fingerprint"]["device"] == "cpu" and meta["fingerprint"]["gemm_tflops"] > 0
    assert meta["telemetry"]["gpus"] is None and len(meta["telemetry"]["epochs"]) == 2
    assert meta["repeat"] is None and meta["schema_version"] == 2
    # The suite trains a backend's workloads in one process, in order: each run says where it stood.
    assert meta["process"] == {
        "position": WORKLOADS.index(workload) + 1,
        "workloads": len(WORKLOADS),
        "design": None,
    }
    assert meta["settings"]["lstm_kernel"] == ("generic" if spec(workload).uses_lstm else None)  # no GPU here
    # Synthetic data is never silent: the file name and the metadata both say so, with the reason.
    synthetic = meta["data"]["source"] == "synthetic"
    assert path.stem.endswith("_synthetic") == synthetic
    assert synthetic == (meta["data"]["synthetic_reason"] is not None)


def test_real_datasets_are_used_where_present(tiny_suite: tuple[Path, str]) -> None:
    run_dir, _ = tiny_suite
    for workload in ("lstm_text_generation", "text_generator_keras"):
        meta = json.loads(next(run_dir.glob(f"{workload}_jax.json")).read_text())
        assert meta["data"]["dataset"] == "nietzsche" and meta["data"]["source"] == "real"
        assert meta["data"]["files"][0]["sha256"].startswith("23cf6987")


def test_suite_prints_the_table_and_each_missing_file_once(tiny_suite: tuple[Path, str]) -> None:
    _, stdout = tiny_suite
    assert stdout.count("note: mnist.npz: not found offline") == 1
    table, next_steps = stdout[stdout.index("workload  ") :].split("\nlogs: ")
    table = table.splitlines()
    assert len(table) == 2 + len(WORKLOADS) * len(BACKENDS)
    # The suite ends with where its logs are and the command that reports them.
    run_dir, _ = tiny_suite
    assert next_steps.startswith(f"{run_dir}/ ") and f" -m report {run_dir.parent} --out report-out" in next_steps
    assert any("synthetic:mnist (synthetic)" in line and "mnist_mlp" in line for line in table)
    assert all(line.rstrip().endswith("complete") for line in table[2:])
