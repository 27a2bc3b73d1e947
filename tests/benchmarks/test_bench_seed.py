"""Seeding a run: Keras's seeds everywhere, TensorFlow only imported where it trains."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.benchmarks.conftest import REPO

SCRIPT = """
import json, random, sys
import keras
from keras.src.utils.rng_utils import get_random_seed  # Keras's record of the global seed; no public getter
from benchmarks.harness import backends

def draws():
    backends.set_random_seed(sys.argv[1], 7)
    return [random.random(), float(keras.ops.convert_to_numpy(keras.random.uniform((1,)))[0])]

first, again = draws(), draws()
print(json.dumps({"same": first == again, "seed": get_random_seed(), "tensorflow": "tensorflow" in sys.modules}))
"""


def _seeded(backend: str) -> dict:
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, backend], cwd=REPO, env=env, capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.parametrize(("backend", "tensorflow"), [("jax", False), ("torch", False), ("tensorflow", True)])
def test_a_run_is_seeded_alike_and_imports_tensorflow_only_to_train_on_it(backend: str, tensorflow: bool) -> None:
    """TensorFlow is installed here: keras.utils.set_random_seed alone would import it into every process."""
    seeded = _seeded(backend)
    assert seeded == {"same": True, "seed": 7, "tensorflow": tensorflow}
