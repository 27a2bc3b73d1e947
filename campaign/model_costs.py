"""Model FLOPs and bytes per training step, from XLA's cost analysis of each workload's Keras train step on JAX.

Each workload's model is built as the runner builds it (its `build_model` and `compile_args`, its published batch
size, its input shapes and vocabulary from the short suite's slice of its data, or from labelled synthetic data of
the same shapes where the data are not on this machine), and Keras's stateless
`train_step(state, batch)` is lowered and compiled by `jax.jit` on this machine's JAX device. XLA's cost analysis
of the compiled program gives 'flops' and 'bytes accessed': the program XLA would run here (after its fusions, on
the CPU where this runs), not a count of the model's textbook operations, and not what cuDNN or XLA's GPU
compiler would run. XLA counts a loop's body once whatever its trip count, so recurrent layers are unrolled for the
count (their time steps written out), which the trained model does not do.

Beside XLA's figures, each workload's step costs as the estimator's physics basis reads them (benchmarks.step_costs,
as `python -m benchmarks step-costs` measures a workload file): the FLOPs of its matrix products and convolutions
and its primitive operations, from the JAX program of the same train step, and its data pipeline's time per batch on
this host with this host's single-thread score.

    python -m campaign.model_costs                      # all workloads -> report/data/model_costs.toml
    python -m campaign.model_costs mnist_mlp --print    # print, do not write
    python -m campaign.model_costs --step-costs-only    # keep XLA's figures, measure the step costs again
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from benchmarks import step_costs, workloads
from report.model_costs import COSTS_FILE, ModelCost, load_costs


def measure(name: str, known: ModelCost | None = None) -> ModelCost:
    """One workload's train-step cost; the process must run Keras on JAX (see `main`). With `known` (its XLA
    figures as committed), only the step costs are measured: XLA's compilation of the written-out recurrent layers
    takes many minutes where tracing them takes seconds."""
    import jax
    import keras

    from benchmarks.data.files import DatasetUnavailable, FileLocations
    from benchmarks.data.loaders import SYNTHETIC_NAME
    from benchmarks.data.types import DataRequest

    module = workloads.load(name)
    size = module.SPEC.batch_size
    # The data the short suite's repeats trained on: a model's size can follow its data (fastText's n-gram
    # vocabulary over both splits, a text generator's characters), and with it the optimizer's work per step.
    cut = module.SPEC.short
    limits: tuple[int | None, int | None] = (cut.train_limit, cut.val_limit) if cut else (None, None)
    request = DataRequest(module.SPEC.datasets[0], *limits, batch_size=size)
    try:
        data = module.load_data(request, FileLocations.from_env(offline=True))
    except DatasetUnavailable:  # the same shapes, labelled synthetic, as the runner's --allow-synthetic
        data = module.load_data(replace(request, dataset=SYNTHETIC_NAME), FileLocations.from_env(offline=True))
    steps = step_costs.measure(module, data)
    step_figures = {
        "matmul_flops": steps.matmul_flops,
        "conv_flops": steps.conv_flops,
        "operations": steps.operations,
        "host_data_s": steps.host_data_s,
        "host_score": steps.host_score,
    }
    if known is not None:
        return replace(known, **step_figures)  # type: ignore[arg-type]
    # recurrent layers written out: XLA counts a loop once
    model, state, batch = step_costs.built_train_step(module, data)
    analysis: Any = jax.jit(model.train_step).lower(state, batch).compile().cost_analysis()
    if isinstance(analysis, list):  # older JAX: one dict per program
        analysis = analysis[0]
    return ModelCost(
        workload=name,
        batch_size=size,
        flops_per_step=float(analysis["flops"]),
        bytes_per_step=float(analysis["bytes accessed"]),
        parameters=int(model.count_params()),
        data=data.info.dataset,
        jax=jax.__version__,
        keras=keras.__version__,
        **step_figures,  # type: ignore[arg-type]
    )


def to_toml(costs: Sequence[ModelCost]) -> str:
    lines = [
        "# Written by `python -m campaign.model_costs`: per workload, one training step at the published batch size.",
        "# flops_per_step and bytes_per_step are XLA's cost analysis of the compiled program on the CPU (see the",
        "# module's docstring): the program XLA would run there, not cuDNN's kernels on a GPU. matmul_flops,",
        "# conv_flops, operations, host_data_s and host_score are benchmarks.step_costs's (the estimator's physics).",
    ]
    for cost in costs:
        lines += ["", f"[{cost.workload}]"]
        for key, value in asdict(cost).items():
            if key != "workload" and value is not None:
                lines.append(f"{key} = {json.dumps(value)}")  # a JSON string or number is TOML too
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m campaign.model_costs", description=__doc__.splitlines()[0])
    parser.add_argument("workloads", nargs="*", help="default: all")
    parser.add_argument("--print", action="store_true", help="print the TOML instead of updating the file")
    parser.add_argument("--out", type=Path, default=COSTS_FILE)
    parser.add_argument(
        "--step-costs-only",
        action="store_true",
        help="keep the committed XLA figures, measure only the step costs (seconds instead of many minutes)",
    )
    args = parser.parse_args(argv)
    unknown = [w for w in args.workloads if w not in workloads.WORKLOADS]
    if unknown:
        print(f"error: workloads: unknown {', '.join(unknown)}", file=sys.stderr)
        return 2
    if os.environ.setdefault("KERAS_BACKEND", "jax") != "jax":
        print("error: KERAS_BACKEND: the cost analysis needs jax", file=sys.stderr)
        return 2
    found = load_costs(args.out) if not args.print else {}
    for name in args.workloads or workloads.WORKLOADS:
        found[name] = measure(name, found.get(name) if args.step_costs_only else None)
        print(f"{name}: {found[name].flops_per_step:.4g} flops/step", file=sys.stderr, flush=True)
        if not args.print:  # after each workload: the recurrent ones take minutes
            args.out.write_text(to_toml([found[w] for w in workloads.WORKLOADS if w in found]))
    if args.print:
        print(to_toml([found[w] for w in workloads.WORKLOADS if w in found]), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
