"""What a suite asks of each workload (epochs and training samples), read without importing a framework.

The workload modules import Keras at the top, and importing Keras imports (and logs from) TensorFlow, so a dry run
must not import them. Their `SPEC = WorkloadSpec(...)` holds only literals where the estimate needs them (epochs,
batch size, the cuts), so it is read from the module's source; the full data sizes are in data/estimate.toml.
A user's workload file is read the same way (benchmarks.plugins.declared) once `add_plugin` is given it:
its full data size is the `SPEC.shapes.train_samples` it declares.
"""

from __future__ import annotations

import ast
import importlib.util
import math
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from benchmarks.plugins import Declared, spec_call
from benchmarks.suites import get_suite
from benchmarks.workloads import WORKLOADS, Cut, UnknownWorkload
from estimator import DATA_DIR

ESTIMATE_DATA = DATA_DIR / "estimate.toml"
SPEC_FIELDS = ("epochs", "batch_size")
CUTS = ("quick", "short", "bounded")


@dataclass(frozen=True)
class PlannedSpec:
    """The literal parts of a workload's SPEC."""

    name: str
    epochs: int
    batch_size: int
    cuts: dict[str, Cut | None]


_PLUGINS: dict[str, Declared] = {}


def add_plugin(spec: Declared) -> None:
    """Plan a user's workload file as a built-in one (its SPEC literals, read without importing it)."""
    _PLUGINS[spec.name] = spec


def plugin(workload: str) -> Declared | None:
    return _PLUGINS.get(workload)


class UnknownSize(ValueError):
    """A plug-in's training samples per epoch are unknown: it declares no SPEC.shapes and no cut limits them."""


@cache
def estimate_data() -> dict[str, Any]:
    return tomllib.loads(ESTIMATE_DATA.read_text())


def planned_spec(workload: str) -> PlannedSpec:
    found = _PLUGINS.get(workload)
    if found is not None:
        return PlannedSpec(found.name, found.epochs, found.batch_size, found.cuts)
    return _builtin_spec(workload)


@cache
def _builtin_spec(workload: str) -> PlannedSpec:
    if workload not in WORKLOADS:
        raise UnknownWorkload(f"unknown workload {workload!r}; choose from {', '.join(WORKLOADS)}")
    found = importlib.util.find_spec(f"benchmarks.workloads.{workload}")
    assert found is not None and found.origin is not None, f"benchmarks.workloads.{workload} has no source"
    call = _spec_call(ast.parse(Path(found.origin).read_text()), workload)
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    values = {name: ast.literal_eval(keywords[name]) for name in SPEC_FIELDS}
    cuts = {name: _cut(keywords[name]) for name in CUTS if name in keywords}
    return PlannedSpec(workload, values["epochs"], values["batch_size"], cuts)


def _spec_call(module: ast.Module, workload: str) -> ast.Call:
    call = spec_call(module)
    if call is None:
        raise ValueError(f"benchmarks.workloads.{workload}: no `SPEC = WorkloadSpec(...)` assignment")
    return call


def _cut(node: ast.expr) -> Cut | None:
    if isinstance(node, ast.Constant) and node.value is None:
        return None
    if not isinstance(node, ast.Call):
        raise ValueError(f"a cut must be written as Cut(...) with literal values, not {ast.unparse(node)}")
    return Cut(**{k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg})


def train_samples(workload: str, limit: int | None = None) -> int:
    """Training samples of one epoch, the whole data set or its first `limit` samples (characters of text)."""
    found = _PLUGINS.get(workload)
    if found is not None:
        if found.train_samples is None and not limit:
            raise UnknownSize(f"{found.file} declares no SPEC.shapes.train_samples: its epoch's size is unknown")
        return min(limit, found.train_samples or limit) if limit else int(found.train_samples or 0)
    entry = estimate_data()["workloads"][workload]
    if "characters" in entry:
        characters = min(limit, entry["characters"]) if limit else entry["characters"]
        return math.ceil((characters - entry["maxlen"]) / entry["step"])
    return min(limit, entry["train_samples"]) if limit else entry["train_samples"]


def planned(suite: str, workload: str, epochs: int | None = None, train_limit: int | None = None) -> tuple[int, int]:
    """Epochs and training samples per epoch that `suite` runs `workload` with; `epochs` and `train_limit` are the
    runner's flags, which take precedence over the suite's cut as they do in the runner."""
    spec = planned_spec(workload)
    cut_name = get_suite(suite).cut
    cut = spec.cuts.get(cut_name) if cut_name else None
    limit = train_limit or (cut.train_limit if cut else None)
    return epochs or (cut.epochs if cut else spec.epochs), train_samples(workload, limit)
