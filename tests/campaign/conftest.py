"""The campaign's tests share the benchmark tests' pre-filled Keras cache and the report tests' log root."""

from __future__ import annotations

from tests.benchmarks.conftest import keras_home
from tests.report.conftest import logs

__all__ = ["keras_home", "logs"]
