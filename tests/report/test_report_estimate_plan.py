"""What the estimator reads of a workload without importing it is what the workload says when imported."""

from __future__ import annotations

import json
import math

import pytest
from report_helpers import REPO

from benchmarks.data import loaders, voxceleb
from benchmarks.workloads import WORKLOADS, UnknownWorkload, spec
from estimator.workload_plan import planned, planned_spec, train_samples


@pytest.mark.parametrize("workload", WORKLOADS)
def test_the_source_read_spec_is_the_imported_one(workload: str) -> None:
    imported, read = spec(workload), planned_spec(workload)
    assert (read.epochs, read.batch_size) == (imported.epochs, imported.batch_size)
    assert all(getattr(imported, name) == read.cuts.get(name) for name in ("quick", "short", "bounded"))


def test_full_data_sizes_are_the_loaders_constants() -> None:
    from benchmarks.data import tweets
    from benchmarks.workloads import lstm_text_generation, text_generator_keras

    assert train_samples("mnist_mlp") == loaders.MNIST_SIZES[0]
    assert train_samples("cifar10_cnn") == loaders.CIFAR10_SIZES[0]
    assert train_samples("imdb_fasttext") == loaders.IMDB_SIZES[0]
    assert train_samples("twitter_sentiment_bilstm") == tweets.CORPUS_TWEETS - tweets.CORPUS_VAL
    assert train_samples("siamese_lstm") == voxceleb.TRAIN_PAIRS
    for module in (lstm_text_generation, text_generator_keras):
        chars = loaders.NIETZSCHE_CHARS
        assert train_samples(module.SPEC.name) == math.ceil((chars - module.MAXLEN) / module.STEP)


def test_planned_samples_are_those_the_runs_recorded() -> None:
    """The committed runs' metadata: the short cut of the text workloads counts characters, not sequences."""
    recorded = {}
    for path in (REPO / "logs" / "reference" / "NVIDIA-H200").glob("*/*.json"):
        meta = json.loads(path.read_text())
        # A workload file's runs (meta["plugin"]) plan from the file, which this test does not load.
        if isinstance(meta, dict) and meta.get("suite") in ("short", "bounded") and not meta.get("plugin"):
            recorded[(meta["suite"], meta["workload"])] = meta["data"]["train_samples"]
    assert recorded[("short", "lstm_text_generation")] == planned("short", "lstm_text_generation")[1] == 16654
    for (suite, workload), samples in recorded.items():
        if suite == "short":
            assert planned(suite, workload)[1] == samples, workload
    assert planned("home-server-2018", "siamese_lstm") == (20, 300000)
    # The runner's --epochs and --train-limit take precedence over the suite's cut, as in the runner.
    assert planned("quick", "mnist_mlp", epochs=7, train_limit=100) == (7, 100)
    assert planned("quick", "lstm_text_generation", train_limit=3040) == (3, 1000)


def test_an_unknown_workload_is_refused() -> None:
    with pytest.raises(UnknownWorkload):
        planned_spec("no_such_workload")
