"""The real Keras datasets this environment has, copied where the benchmark containers look for them; and a
user's own data folder for the example workload file (`--data-dir`).

    from tests.support.datasets import prefill_keras_cache, tiny_mlp_data

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


def tiny_mlp_data(folder: Path) -> Path:
    """examples/workloads/tiny_mlp.py's real data, tiny_mlp.npz (500 training and 100 validation samples), in a
    folder of its own with a nested file beside it, as a user's data folder has."""
    import numpy as np

    (folder / "notes").mkdir(parents=True)
    (folder / "notes" / "README.txt").write_text("where the arrays came from\n")
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(600, 32)).astype("float32"), rng.integers(0, 4, 600)
    np.savez(folder / "tiny_mlp.npz", x_train=x[:500], y_train=y[:500], x_val=x[500:], y_val=y[500:])
    return folder
