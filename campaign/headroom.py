"""Headroom: a workload's Keras model trained by one compiled program per epoch, with its data on the device.

The same model, loss and optimizer as the suite's run (the workload's `build_model` and `compile_args`, its
published batch size), trained through Keras's stateless API on JAX: `model.compute_loss_and_updates` (which
calls `model.stateless_call`) and `optimizer.stateless_apply`, in a `jax.lax.scan` over the epoch's batches,
compiled once by `jax.jit`. The training data are put on the device once; each epoch shuffles them on the device
and drops the last partial batch. No host loop, callbacks, metrics or validation: what is left is the GPU's time
for the epoch's arithmetic, so `steady_median_s` against the suite's steady epoch says how much of that epoch the
framework's host loop costs. Augmenting loaders (cifar10_cnn's shift and flip on the CPU) are trained on their
unaugmented arrays. Where the data have a validation split, each epoch also evaluates it by a compiled scan of
full batches, as `fit` does after each epoch, so the two epochs hold the same arithmetic. Epoch 1 includes
compiling; the later epochs are steady.

    python -m campaign.headroom --workload mnist_mlp --out headroom-mnist_mlp.json
    python -m campaign.headroom --workload cifar10_cnn --synthetic --train-limit 20000 --out cifar.json
    # the slice, epochs and data of the short suite's run, synthetic only where the real file is missing:
    python -m campaign.headroom --workload imdb_fasttext --cut short --allow-synthetic --out imdb.json

On a GPU machine run it where the suite runs (JAX with CUDA installed; `jax.devices()` lists the GPU), with the
same data folder as the suite (`--data-dir`, or `BENCH_DATA_DIR`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks import step_costs, workloads

SUPPORTED = ("mnist_mlp", "mnist_cnn", "imdb_fasttext", "cifar10_cnn")
HOW = (
    "jax.jit of jax.lax.scan over the epoch's batches of model.compute_loss_and_updates (model.stateless_call) "
    "and optimizer.stateless_apply; data on the device, shuffled there each epoch"
)


def _arrays(data: Any) -> tuple[Any, Any]:
    """The training inputs and targets as arrays, also where the loader batches itself (augmentation)."""
    x, y = data.x_train, data.y_train
    if y is None and hasattr(x, "x") and hasattr(x, "y"):  # an augmenting PyDataset: its unaugmented arrays
        x, y = x.x, x.y
    return x, y


def _load(module: Any, request: Any, locations: Any, allow_synthetic: bool) -> Any:
    """The workload's data as the suite's runner loads them: synthetic only where allowed and the file is missing."""
    from benchmarks.data.files import DatasetUnavailable
    from benchmarks.data.loaders import SYNTHETIC_NAME

    try:
        return module.load_data(request, locations)
    except DatasetUnavailable as exc:
        if not allow_synthetic:
            raise
        print(f"note: {exc}; using labelled synthetic data instead", file=sys.stderr, flush=True)
        return module.load_data(replace(request, dataset=SYNTHETIC_NAME), locations)


def train(
    name: str,
    epochs: int,
    train_limit: int | None,
    dataset: str | None,
    data_dir: str | None,
    *,
    val_limit: int | None = None,
    allow_synthetic: bool = False,
) -> dict[str, Any]:
    """Train `name` for `epochs` compiled epochs; returns the record written as JSON. Keras must run on JAX."""
    import jax
    import keras
    import numpy as np

    from benchmarks.data.files import FileLocations
    from benchmarks.data.types import DataRequest
    from benchmarks.harness import backends
    from benchmarks.harness.backends import set_random_seed

    module = workloads.load(name)
    size = module.SPEC.batch_size
    request = DataRequest(
        dataset or module.SPEC.datasets[0], train_limit=train_limit, val_limit=val_limit, batch_size=size
    )
    data = _load(module, request, FileLocations.from_env(data_dir), allow_synthetic)
    x_host, y_host = _arrays(data)
    steps = len(x_host) // size
    if steps < 1:
        raise ValueError(f"train-limit: {len(x_host)} samples make no batch of {size}")
    set_random_seed("jax", request.seed)
    model = backends.build_model(module, data)
    model.compile(**module.compile_args())
    model._symbolic_build(data_batch=(x_host[:size], y_host[:size]))  # the variables fit would build
    optimizer = model.optimizer

    def step(state: Any, batch: Any) -> tuple[Any, Any]:
        trainable, non_trainable, opt_vars, metric_vars = state
        x, y = batch
        grad_fn = jax.value_and_grad(model.compute_loss_and_updates, has_aux=True)
        (_, (loss, _, non_trainable, metric_vars)), grads = grad_fn(
            trainable, non_trainable, metric_vars, x, y, None, training=True, optimizer_variables=opt_vars
        )
        trainable, opt_vars = optimizer.stateless_apply(opt_vars, grads, trainable)
        return (trainable, non_trainable, opt_vars, metric_vars), loss

    def evaluate(state: Any, batch: Any) -> tuple[Any, Any]:
        trainable, non_trainable, _, metric_vars = state
        x, y = batch
        loss, _ = model.compute_loss_and_updates(trainable, non_trainable, metric_vars, x, y, None, training=False)
        return state, loss

    x_val, y_val = (data.x_val, data.y_val) if data.has_validation else (None, None)
    val_steps = len(x_val) // size if x_val is not None else 0

    @jax.jit
    def epoch(state: Any, x: Any, y: Any, xv: Any, yv: Any, key: Any) -> tuple[Any, Any, Any]:
        order = jax.random.permutation(key, x.shape[0])[: steps * size]
        batches = (
            x[order].reshape(steps, size, *x.shape[1:]),
            y[order].reshape(steps, size, *y.shape[1:]),
        )
        state, losses = jax.lax.scan(step, state, batches)
        if not val_steps:
            return state, losses.mean(), losses.mean() * 0
        held_out = (
            xv[: val_steps * size].reshape(val_steps, size, *xv.shape[1:]),
            yv[: val_steps * size].reshape(val_steps, size, *yv.shape[1:]),
        )
        _, val_losses = jax.lax.scan(evaluate, state, held_out)
        return state, losses.mean(), val_losses.mean()

    x_dev, y_dev = jax.device_put(np.asarray(x_host)), jax.device_put(np.asarray(y_host))
    xv_dev, yv_dev = (jax.device_put(np.asarray(a)) for a in (x_val, y_val)) if val_steps else (x_dev, y_dev)
    state = step_costs.train_state(model)
    key = jax.random.key(request.seed)
    records = []
    for number in range(epochs):
        key, sub = jax.random.split(key)
        started = time.perf_counter()
        state, loss, val_loss = epoch(state, x_dev, y_dev, xv_dev, yv_dev, sub)
        loss, val_loss = (float(v) for v in jax.block_until_ready((loss, val_loss)))
        record = {"epoch": number, "seconds": time.perf_counter() - started, "loss": loss}
        records.append({**record, "val_loss": val_loss} if val_steps else record)
    steady = [r["seconds"] for r in records[1:]]
    device = jax.devices()[0]
    return {
        "workload": name,
        "backend": "jax",
        "how": HOW,
        "dataset": data.info.dataset,
        "source": data.info.source,
        "device": getattr(device, "device_kind", str(device)),
        "platform": device.platform,
        "batch_size": size,
        "train_samples": len(x_host),
        "steps_per_epoch": steps,
        "val_samples_evaluated": val_steps * size,
        "epochs": records,
        "first_epoch_s": records[0]["seconds"],
        "steady_median_s": statistics.median(steady) if steady else None,
        "software": {"jax": jax.__version__, "keras": keras.__version__, "python": sys.version.split()[0]},
        "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


CUTS = ("quick", "short", "bounded")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m campaign.headroom", description=__doc__.splitlines()[0])
    parser.add_argument("--workload", required=True, help=f"one of {', '.join(SUPPORTED)}")
    parser.add_argument("--cut", choices=CUTS, help="the epochs and slices of that suite's cut of the workload")
    parser.add_argument("--epochs", type=int, help="compiled epochs; the first compiles (default: the cut's, or 5)")
    parser.add_argument("--train-limit", type=int, help="train on the first N samples (default: the cut's, or all)")
    parser.add_argument("--val-limit", type=int, help="evaluate the first N held-out samples (default: the cut's)")
    data = parser.add_mutually_exclusive_group()
    data.add_argument("--synthetic", action="store_true", help="labelled synthetic data of the real shapes")
    data.add_argument("--prefer-dataset", help="this dataset where the workload accepts it (default: its first)")
    parser.add_argument("--allow-synthetic", action="store_true", help="synthetic data where the real file is missing")
    parser.add_argument("--data-dir", help="offline folder of the datasets (default: $BENCH_DATA_DIR)")
    parser.add_argument("--out", type=Path, required=True, help="the JSON record to write")
    args = parser.parse_args(argv)
    error = _invalid(args)
    if error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    cut = getattr(workloads.spec(args.workload), args.cut) if args.cut else None
    result = train(
        args.workload,
        args.epochs or (cut.epochs if cut else 5),
        args.train_limit or (cut.train_limit if cut else None),
        "synthetic" if args.synthetic else _dataset(args.workload, args.prefer_dataset),
        args.data_dir,
        val_limit=args.val_limit or (cut.val_limit if cut else None),
        allow_synthetic=args.allow_synthetic,
    )
    result["cut"] = args.cut
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"{args.workload}: first epoch {result['first_epoch_s']:.3f} s, steady {result['steady_median_s']} s, "
        f"loss {result['epochs'][0]['loss']:.4f} -> {result['epochs'][-1]['loss']:.4f}"
    )
    return 0


def _invalid(args: argparse.Namespace) -> str | None:
    if args.workload not in SUPPORTED:
        return f"--workload: {args.workload!r} is not one of {', '.join(SUPPORTED)}"
    if args.epochs is not None and args.epochs < 2:
        return "--epochs: at least 2 (the first compiles)"
    for flag in ("train_limit", "val_limit"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            return f"--{flag.replace('_', '-')}: at least 1"
    if os.environ.setdefault("KERAS_BACKEND", "jax") != "jax":
        return f"KERAS_BACKEND: {os.environ['KERAS_BACKEND']}; the compiled loop needs jax"
    return None


def _dataset(workload: str, preferred: str | None) -> str | None:
    """The preferred dataset where the workload accepts it, as the suite's `--prefer-dataset`; else its own."""
    return preferred if preferred in workloads.spec(workload).datasets else None


if __name__ == "__main__":
    sys.exit(main())
