"""Model FLOPs and bytes per training step of each workload, as committed in report/data/model_costs.toml (written
by the reference measurements' tool, `python -m campaign.model_costs`: XLA's cost analysis of the Keras train step
on JAX)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

COSTS_FILE = Path(__file__).parent / "data" / "model_costs.toml"
HOW = (
    "jax.jit(model.train_step).lower(state, batch).compile().cost_analysis() on CPU; recurrent layers unrolled; "
    "the model built on the short suite's data"
)


@dataclass(frozen=True)
class ModelCost:
    workload: str
    batch_size: int
    flops_per_step: float
    bytes_per_step: float
    parameters: int
    data: str  # the dataset its shapes and vocabulary came from
    jax: str
    keras: str
    how: str = HOW
    # benchmarks.step_costs's figures of the same train step (the estimator's physics basis reads them)
    matmul_flops: float | None = None
    conv_flops: float | None = None
    operations: int | None = None
    host_data_s: float | None = None
    host_score: float | None = None


def load_costs(path: Path = COSTS_FILE) -> dict[str, ModelCost]:
    if not path.is_file():
        return {}
    return {name: ModelCost(workload=name, **entry) for name, entry in tomllib.loads(path.read_text()).items()}
