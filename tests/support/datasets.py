"""The real Keras datasets this environment has, copied where the benchmark containers look for them.

    from tests.support.datasets import prefill_keras_cache

Only tests read ../shared beside the checkout (or $KCB_SHARED_DATASETS); the product downloads datasets on the host.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

# ../shared/datasets beside the checkout (where CI puts it), unless KCB_SHARED_DATASETS says otherwise.
SHARED_DATASETS = Path(
    os.environ.get("KCB_SHARED_DATASETS", Path(__file__).resolve().parents[3] / "shared" / "datasets")
)
FILES = (
    "fashion-mnist/train-images-idx3-ubyte.gz",
    "fashion-mnist/train-labels-idx1-ubyte.gz",
    "fashion-mnist/t10k-images-idx3-ubyte.gz",
    "fashion-mnist/t10k-labels-idx1-ubyte.gz",
    "nietzsche.txt",
    "imdb_word_index.json",
)


def prefill_keras_cache(keras_home: Path) -> Path:
    """Copy the shared dataset files into `<keras_home>/datasets/` (the Keras cache layout); return it."""
    target = keras_home / "datasets"
    for relpath in FILES:
        source = SHARED_DATASETS / relpath
        if not source.is_file():
            pytest.fail(f"dataset file {source} is missing (set KCB_SHARED_DATASETS to the datasets folder)")
        destination = target / relpath
        destination.parent.mkdir(parents=True, exist_ok=True)
        if not destination.exists():
            shutil.copyfile(source, destination)
    return target
