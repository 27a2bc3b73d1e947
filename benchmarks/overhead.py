"""Measure the timing harness's overhead: a bare `fit` against the harnessed one, in the same process.

    python -m benchmarks.overhead --workload mnist_mlp --backend jax [--dataset fashion_mnist] [--repeats 5]

Two figures, both per epoch:
- direct: the seconds spent inside the harness's own work per epoch (the timing callback, its CSV row, the
  metadata writes), device waits excluded; this is the overhead itself, free of run-to-run noise;
- A/B: median epoch time of harnessed fits minus that of bare fits, alternating the two on one compiled model
  after a warm-up fit; it includes any indirect cost, and the machine's noise, so its spread is printed too.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.harness.backends import prepare_process


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.overhead", description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="mnist_mlp")
    parser.add_argument("--backend", default="jax", choices=("tensorflow", "jax", "torch"))
    parser.add_argument("--dataset", help="default: the workload's own; synthetic where it is missing")
    parser.add_argument("--epochs", type=int, default=2, help="epochs per fit")
    parser.add_argument("--repeats", type=int, default=5, help="bare/harnessed pairs")
    parser.add_argument("--train-limit", type=int)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    prepare_process(args.backend)
    print(format_result(measure(args)))
    return 0


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import keras

    from benchmarks import workloads
    from benchmarks.data.files import FileLocations
    from benchmarks.harness import backends
    from benchmarks.harness.runner import RunOptions, fit, load_data, plan, run_metadata
    from benchmarks.harness.timing import EpochTimer
    from benchmarks.logs import EpochLogWriter, write_metadata
    from benchmarks.metadata import Status

    module = workloads.load(args.workload)
    spec = module.SPEC
    options = RunOptions(
        backend=args.backend,
        platform="overhead",
        run_id="overhead",
        out_dir=Path(tempfile.mkdtemp()),
        locations=FileLocations.from_env(),
        epochs=args.epochs,
        train_limit=args.train_limit,
        dataset=args.dataset,
        allow_synthetic=True,
    )
    run_plan = plan(spec, options)
    data = load_data(module, run_plan.request, options, set())
    model = backends.build_model(module, data)
    settings = backends.default_settings(args.backend, args.workload, backends.gpu_available(args.backend))
    model.compile(**module.compile_args(), jit_compile=settings.jit_compile)
    sync = backends.synchronizer(args.backend, model)
    meta = run_metadata(spec, options, settings, run_plan, data, model, "")
    path = options.out_dir / "probe.csv"

    def bare() -> float:
        return _timed(sync, lambda: fit(model, data, spec, args.epochs, []))

    def harnessed() -> tuple[float, float]:
        start = time.perf_counter()
        writer = EpochLogWriter(path)
        write_metadata(path, meta.finished(status=Status.RUNNING).to_dict())
        setup = time.perf_counter() - start
        timer = EpochTimer(sync, writer.append, data.info.train_samples, spec.loss_key, spec.accuracy_key)
        total = _timed(sync, lambda: fit(model, data, spec, args.epochs, [timer]))
        start = time.perf_counter()
        writer.close()
        write_metadata(path, meta.finished(status=Status.COMPLETE).to_dict())
        teardown = time.perf_counter() - start
        return total + setup + teardown, timer.hook_seconds + setup + teardown

    fit(model, data, spec, 1, [])  # compile outside the measurement
    bare_s, harnessed_s, direct_s = [], [], []
    for _ in range(args.repeats):
        bare_s.append(bare() / args.epochs)
        total, own = harnessed()
        harnessed_s.append(total / args.epochs)
        direct_s.append(own / args.epochs)
    epoch = statistics.median(bare_s)
    return {
        "workload": args.workload,
        "backend": args.backend,
        "data": data.info.source,
        "keras": keras.__version__,
        "epoch_s": epoch,
        "direct_s": statistics.median(direct_s),
        "ab_s": statistics.median(harnessed_s) - epoch,
        "bare_range_s": (min(bare_s), max(bare_s)),
        "harnessed_range_s": (min(harnessed_s), max(harnessed_s)),
        "repeats": args.repeats,
    }


def _timed(sync: Callable[[], None], work: Callable[[], object]) -> float:
    sync()
    start = time.perf_counter()
    work()
    sync()
    return time.perf_counter() - start


def format_result(r: dict[str, Any]) -> str:
    def pct(seconds: float) -> float:
        return 100 * seconds / float(r["epoch_s"])

    bare_lo, bare_hi = r["bare_range_s"]
    harnessed_lo, harnessed_hi = r["harnessed_range_s"]
    return "\n".join(
        [
            f"harness overhead: {r['workload']} on {r['backend']} ({r['data']} data, Keras {r['keras']}), "
            f"{r['repeats']} bare/harnessed pairs",
            f"  bare epoch, median:      {r['epoch_s']:.4f} s (range {bare_lo:.4f}-{bare_hi:.4f})",
            f"  harnessed epoch, range:  {harnessed_lo:.4f}-{harnessed_hi:.4f} s",
            f"  direct (harness work):   {r['direct_s'] * 1000:.3f} ms/epoch = {pct(r['direct_s']):.3f}% of an epoch",
            f"  A/B median difference:   {r['ab_s'] * 1000:+.1f} ms/epoch = {pct(r['ab_s']):+.2f}% (noise included)",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
