"""The log format: our files round-trip through the reader, and the published 2017 logs parse with it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.logs import (
    COLUMNS,
    PUBLISHED_COLUMNS,
    EpochLogWriter,
    EpochRecord,
    LogFormatError,
    find_logs,
    metadata_path,
    read_epoch_log,
    read_metadata,
    write_metadata,
)
from benchmarks.metadata import Container, DataRecord, GpuUtilization, RunMetadata, StabilityLabel, Status

REFERENCE = Path(os.environ.get("KCB_SHARED_DIR", Path(__file__).resolve().parents[3] / "shared")) / "reference"


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    path = tmp_path / "mnist_mlp_jax.csv"
    records = [
        EpochRecord(0, 4.5, 0.8, 0.7, 0.6, 0.75, 1333.3, True, 6000, 0.0),
        EpochRecord(1, 0.43, 0.5, 0.8, 0.45, 0.83, 13953.4, False, 6000, 4.6),
    ]
    writer = EpochLogWriter(path)
    for record in records:
        writer.append(record)
    writer.close()
    write_metadata(path, {"workload": "mnist_mlp", "status": "complete"})

    log = read_epoch_log(path)
    assert log.columns == COLUMNS
    assert log.columns[: len(PUBLISHED_COLUMNS)] == PUBLISHED_COLUMNS
    assert log.epochs == records
    assert log.metadata is not None and log.metadata.workload == "mnist_mlp"
    assert log.metadata.schema_version == 2  # benchmarks.metadata.SCHEMA_VERSION
    assert log.steady_epochs == records[1:]
    assert log.total_elapsed == pytest.approx(4.93)


def test_every_published_log_parses_with_the_same_reader() -> None:
    tables = ("derived_totals.csv", "table1.csv", "siamese_lstm_epochs.csv")  # summaries, not per-epoch logs
    paths = [p for p in find_logs(REFERENCE) if p.name not in tables]
    # 63 files of the July 2017 study, 14 of the June 2017 one, 39 of the November 2017 one.
    assert len(paths) == 116, f"expected the published logs under {REFERENCE}"
    for path in paths:
        log = read_epoch_log(path)
        assert log.status == "complete" and log.metadata is None
        assert [e.epoch for e in log.epochs] == list(range(len(log.epochs)))
        assert all(e.elapsed > 0 for e in log.epochs)
        assert log.first_epoch is not None and log.first_epoch.compiled is None


def test_published_totals_match_the_derived_table() -> None:
    gpu_mlp = read_epoch_log(REFERENCE / "deep-learning-cpu-gpu-benchmark/logs/gpu/mnist_mlp_tensorflow.csv")
    assert round(gpu_mlp.total_elapsed, 3) == 65.097  # derived_totals.csv, cpu-or-gpu-2017-07 gpu mnist_mlp
    text_gen = read_epoch_log(REFERENCE / "keras-cntk-benchmark/logs/text_generator_keras_tensorflow.csv")
    assert text_gen.columns == ("epoch", "elapsed", "loss") and text_gen.final.acc is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "empty file"),
        ("epoch,loss\n0,1.0\n", "missing column(s) elapsed"),
        ("epoch,elapsed,loss\n", "no epochs"),
        ("epoch,elapsed,loss\n0,fast,1.0\n", ":2: bad value"),
    ],
)
def test_malformed_logs_name_the_file(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "broken.csv"
    path.write_text(content)
    with pytest.raises(LogFormatError) as error:
        read_epoch_log(path)
    assert str(path) in str(error.value) and message in str(error.value)
    assert "\n" not in str(error.value)


def test_bad_metadata_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "run.csv"
    path.write_text("epoch,elapsed\n0,1.0\n")
    path.with_suffix(".json").write_text("{not json")
    with pytest.raises(LogFormatError, match=r"run\.json: not valid JSON"):
        read_epoch_log(path)


def test_metadata_reads_as_the_typed_schema(tmp_path: Path) -> None:
    path = tmp_path / "mnist_mlp_jax.csv"
    written = RunMetadata(
        run_id="r",
        workload="mnist_mlp",
        backend="jax",
        platform="local",
        status=Status.COMPLETE,
        data=DataRecord("mnist", "real", 6000, 1000, [{"name": "mnist.npz", "sha256": "ab"}]),
        container=Container("kcb:cpu", "sha256:1"),
        gpu_utilization=GpuUtilization(mean_pct=91.5, max_pct=100, samples=12, interval_s=0.5),
    )
    write_metadata(path, written.to_dict())
    assert read_metadata(path) == written
    assert read_metadata(tmp_path / "no_such_run.csv") is None


def test_a_version_1_metadata_file_is_migrated_as_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "mnist_mlp_jax.csv"
    metadata_path(path).write_text(
        '{"schema_version": 1, "workload": "mnist_mlp", "backend": "jax", "platform": "local", "status": "complete",'
        ' "data": {"dataset": "mnist", "source": "real", "train_samples": 60000}, "gpu_utilization": null}'
    )
    meta = read_metadata(path)
    assert meta is not None and meta.schema_version == 1 and meta.status is Status.COMPLETE
    assert meta.data.train_samples == 60000 and meta.data.files == [] and meta.gpu_utilization is None
    assert meta.stability is None and meta.repeat is None and meta.fingerprint is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ('"status": "done"', "field 'status' is 'done'; expected one of complete, partial, running"),
        ('"workload": 7', "field 'workload' is 7; expected a string"),
        ('"epochs_planned": "20"', "field 'epochs_planned' is '20'; expected an integer or null"),
        ('"data": [1]', "field 'data' is list; expected an object"),
        ('"stability": {"label": "shaky"}', "field 'stability.label' is 'shaky'; expected one of stable, unstable"),
        ('"stability": {"host_bound": 1}', "field 'stability.host_bound' is 1; expected true or false or null"),
        ('"energy": {"gpu_joules_per_epoch": [1.5, "x"]}', "field 'energy.gpu_joules_per_epoch[1]' is 'x'"),
        ('"repeat": {"index": 2}', "field 'repeat.group' is missing"),
    ],
)
def test_metadata_of_the_wrong_kind_names_the_file_and_field(tmp_path: Path, fields: str, message: str) -> None:
    path = tmp_path / "mnist_mlp_jax.csv"
    metadata_path(path).write_text('{"workload": "mnist_mlp", "status": "complete", ' + fields + "}")
    with pytest.raises(LogFormatError) as error:
        read_metadata(path)
    assert str(metadata_path(path)) in str(error.value) and message in str(error.value)


def test_a_stability_label_reads_as_the_vocabulary(tmp_path: Path) -> None:
    path = tmp_path / "mnist_mlp_jax.csv"
    metadata_path(path).write_text('{"status": "partial", "stability": {"label": "too few epochs"}}')
    meta = read_metadata(path)
    assert meta is not None and meta.status is Status.PARTIAL
    assert meta.stability is not None and meta.stability.label is StabilityLabel.TOO_FEW_EPOCHS
