"""What a suite asks of each workload (epochs and training samples), read without importing a framework.

The workload modules import Keras at the top, and importing Keras imports (and logs from) TensorFlow, so a dry run
must not import them. A workload's SPEC literals (epochs, batch size, the cuts, a plug-in's
`SPEC.shapes.train_samples`) come from its `benchmarks.workload_set.Workload`, read from its source; the built-in
workloads' full data sizes are in data/estimate.toml. A built-in workload may be named by its name alone.
"""

from __future__ import annotations

import math
import tomllib
from functools import cache
from typing import Any

from benchmarks.suites import get_suite
from benchmarks.workload_set import Declared, Workload, built_in
from estimator import DATA_DIR

ESTIMATE_DATA = DATA_DIR / "estimate.toml"


class UnknownSize(ValueError):
    """A plug-in's training samples per epoch are unknown: it declares no SPEC.shapes and no cut limits them."""


@cache
def estimate_data() -> dict[str, Any]:
    return tomllib.loads(ESTIMATE_DATA.read_text())


def planned_spec(workload: str | Workload) -> Declared:
    """A workload's SPEC literals (UnknownWorkload for a name that is no built-in workload's)."""
    return _workload(workload).spec


def train_samples(workload: str | Workload, limit: int | None = None) -> int:
    """Training samples of one epoch, the whole data set or its first `limit` samples (characters of text)."""
    found = _workload(workload)
    if not found.built_in:
        declared = found.spec.train_samples
        if declared is None and not limit:
            raise UnknownSize(f"{found.path.name} declares no SPEC.shapes.train_samples: its epoch's size is unknown")
        return min(limit, declared or limit) if limit else int(declared or 0)
    entry = estimate_data()["workloads"][found.name]
    if "characters" in entry:
        characters = min(limit, entry["characters"]) if limit else entry["characters"]
        return math.ceil((characters - entry["maxlen"]) / entry["step"])
    return min(limit, entry["train_samples"]) if limit else entry["train_samples"]


def planned(
    suite: str, workload: str | Workload, epochs: int | None = None, train_limit: int | None = None
) -> tuple[int, int]:
    """Epochs and training samples per epoch that `suite` runs `workload` with; `epochs` and `train_limit` are the
    runner's flags, which take precedence over the suite's cut as they do in the runner."""
    spec = planned_spec(workload)
    cut_name = get_suite(suite).cut
    cut = spec.cuts.get(cut_name) if cut_name else None
    limit = train_limit or (cut.train_limit if cut else None)
    return epochs or (cut.epochs if cut else spec.epochs), train_samples(workload, limit)


def _workload(workload: str | Workload) -> Workload:
    return built_in()[workload] if isinstance(workload, str) else workload
