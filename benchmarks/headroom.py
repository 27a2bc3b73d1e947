"""Headroom: a workload's Keras model trained by one compiled program per epoch, with its data on the device.

The same model, loss and optimizer as the suite's run (the workload's `build_model` and `compile_args`, its
published batch size), trained through Keras's stateless API on JAX: `model.compute_loss_and_updates` (which
calls `model.stateless_call`) and `optimizer.stateless_apply`, in a `jax.lax.scan` over the epoch's batches,
compiled once by `jax.jit`. The training data are put on the device once; each epoch shuffles them on the device
and drops the last partial batch. No host loop, callbacks, metrics or validation: what is left is the GPU's time
for the epoch's arithmetic, so `steady_median_s` against the suite's steady epoch says how much of that epoch the
framework's host loop costs. Augmenting loaders (cifar10_cnn's shift and flip on the CPU) are trained on their
unaugmented arrays. Epoch 1 includes compiling; the later epochs are steady.

    python -m benchmarks.headroom --workload mnist_mlp --out headroom-mnist_mlp.json
    python -m benchmarks.headroom --workload cifar10_cnn --synthetic --train-limit 20000 --out cifar.json

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
from pathlib import Path
from typing import Any

from benchmarks import workloads

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


def train(name: str, epochs: int, train_limit: int | None, dataset: str | None, data_dir: str | None) -> dict[str, Any]:
    """Train `name` for `epochs` compiled epochs; returns the record written as JSON. Keras must run on JAX."""
    import jax
    import keras
    import numpy as np

    from benchmarks.data.files import FileLocations
    from benchmarks.data.types import DataRequest

    module = workloads.load(name)
    size = module.SPEC.batch_size
    request = DataRequest(dataset or module.SPEC.datasets[0], train_limit=train_limit, batch_size=size)
    data = module.load_data(request, FileLocations.from_env(data_dir))
    x_host, y_host = _arrays(data)
    steps = len(x_host) // size
    if steps < 1:
        raise ValueError(f"train-limit: {len(x_host)} samples make no batch of {size}")
    keras.utils.set_random_seed(request.seed)
    model = module.build_model(data)
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

    @jax.jit
    def epoch(state: Any, x: Any, y: Any, key: Any) -> tuple[Any, Any]:
        order = jax.random.permutation(key, x.shape[0])[: steps * size]
        batches = (
            x[order].reshape(steps, size, *x.shape[1:]),
            y[order].reshape(steps, size, *y.shape[1:]),
        )
        state, losses = jax.lax.scan(step, state, batches)
        return state, losses.mean()

    x_dev, y_dev = jax.device_put(np.asarray(x_host)), jax.device_put(np.asarray(y_host))
    state = tuple(
        [v.value for v in group]
        for group in (
            model.trainable_variables,
            model.non_trainable_variables,
            optimizer.variables,
            model.metrics_variables,
        )
    )
    key = jax.random.key(request.seed)
    records = []
    for number in range(epochs):
        key, sub = jax.random.split(key)
        started = time.perf_counter()
        state, loss = epoch(state, x_dev, y_dev, sub)
        loss = float(jax.block_until_ready(loss))
        records.append({"epoch": number, "seconds": time.perf_counter() - started, "loss": loss})
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
        "epochs": records,
        "first_epoch_s": records[0]["seconds"],
        "steady_median_s": statistics.median(steady) if steady else None,
        "software": {"jax": jax.__version__, "keras": keras.__version__, "python": sys.version.split()[0]},
        "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.headroom", description=__doc__.splitlines()[0])
    parser.add_argument("--workload", required=True, help=f"one of {', '.join(SUPPORTED)}")
    parser.add_argument("--epochs", type=int, default=5, help="compiled epochs; the first compiles (default 5)")
    parser.add_argument("--train-limit", type=int, help="train on the first N samples (default: all)")
    parser.add_argument("--synthetic", action="store_true", help="labelled synthetic data of the real shapes")
    parser.add_argument("--data-dir", help="offline folder of the datasets (default: $BENCH_DATA_DIR)")
    parser.add_argument("--out", type=Path, required=True, help="the JSON record to write")
    args = parser.parse_args(argv)
    error = _invalid(args)
    if error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    result = train(args.workload, args.epochs, args.train_limit, "synthetic" if args.synthetic else None, args.data_dir)
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
    if args.epochs < 2:
        return "--epochs: at least 2 (the first compiles)"
    if args.train_limit is not None and args.train_limit < 1:
        return "--train-limit: at least 1"
    if os.environ.setdefault("KERAS_BACKEND", "jax") != "jax":
        return f"KERAS_BACKEND: {os.environ['KERAS_BACKEND']}; the compiled loop needs jax"
    return None


if __name__ == "__main__":
    sys.exit(main())
