"""Measure the timing harness's overhead: the runner's epoch against a plain `fit` of the same model.

    python -m benchmarks.overhead --workload mnist_mlp --backend jax [--suite short] [--repeats 5] [--json]
    python -m benchmarks.overhead --workload resnet50 --backend jax --suite short --runner-csv RUN.csv

The model is built, compiled and fed exactly as the runner builds it for this machine (the workload's defaults:
precision, jit, steps per execution; a native twin's trainer on torch-native), trained one epoch to compile, then
in pairs: a plain `fit` (no callbacks: what a user's own script runs) and a harnessed one (the runner's epoch
timer, telemetry thread, CSV row and metadata writes). Figures, per steady epoch:
- direct: the harness's own work (its callbacks' time, device waits excluded, and the log writes): the overhead
  itself, free of run-to-run noise;
- A/B: the harnessed epochs' median minus the plain ones', alternating on one compiled model; it includes any
  indirect cost (the telemetry thread's polling, say) and the machine's noise, whose spread is printed;
- with --runner-csv, a runner process's own steady median (`python -m benchmarks run`, fresh, defaults), against
  the plain median here: the whole runner, start to end, in the same call on the same machine (its own process:
  its fingerprint, its distribution context, its data pipeline).
The runner's share is each difference over the plain epoch; the GPU tool (campaign.gpu_session --phase overhead)
runs the runner and this beside each other for every workload.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.harness.backends import ALL_BACKENDS, prepare_process


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.overhead", description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="mnist_mlp")
    parser.add_argument("--backend", default="jax", choices=ALL_BACKENDS)
    parser.add_argument("--dataset", help="default: the workload's own; synthetic where it is missing")
    parser.add_argument("--suite", help="train on this suite's slice of the workload (e.g. short, as GPU runs do)")
    parser.add_argument("--epochs", type=int, default=2, help="epochs per fit")
    parser.add_argument("--repeats", type=int, default=5, help="plain/harnessed pairs")
    parser.add_argument("--train-limit", type=int)
    parser.add_argument("--runner-csv", type=Path, help="a runner process's CSV of the same workload, to hold up")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line too")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    prepare_process(args.backend)
    result = measure(args)
    print(format_result(result))
    if args.json:
        print("OVERHEAD " + json.dumps(result), flush=True)
    return 0


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import keras

    from benchmarks import workloads
    from benchmarks.data.files import FileLocations
    from benchmarks.harness import backends, distribution, processes
    from benchmarks.harness.runner import RunOptions, keras_trainee, load_data, plan, run_metadata
    from benchmarks.harness.telemetry import Telemetry
    from benchmarks.harness.timing import EpochTimer
    from benchmarks.logs import EpochLogWriter, write_metadata
    from benchmarks.metadata import Status
    from benchmarks.suites import get_suite

    native = backends.is_native(args.backend)
    module = workloads.load(args.workload, native=native)
    spec = module.SPEC
    options = RunOptions(
        backend=args.backend,
        platform="overhead",
        run_id="overhead",
        out_dir=Path(tempfile.mkdtemp()),
        locations=FileLocations.from_env(),
        cut=get_suite(args.suite).cut if args.suite else None,
        epochs=args.epochs,
        train_limit=args.train_limit,
        dataset=args.dataset,
        allow_synthetic=True,
    )
    run_plan = plan(spec, options)
    data = load_data(module, run_plan.request, options, set())
    data, spread = distribution.split_evenly(data, run_plan.distribution)
    settings = backends.default_settings(args.backend, args.workload, backends.gpu_available(args.backend))
    backends.apply_float32_matmul(args.backend, settings.float32_matmul)
    backends.set_random_seed(args.backend, options.seed)
    if native:
        from benchmarks.harness import native as native_harness

        trainee, spread = native_harness.trainee(module, data, spread, settings, spec, options.seed, processes.Place())
    else:
        trainee, spread = keras_trainee(module, data, spread, settings, spec)
    run_plan = replace(run_plan, distribution=spread)
    meta = run_metadata(spec, options, settings, run_plan, data, trainee, "")
    path = options.out_dir / "probe.csv"

    def plain() -> float:
        return _timed(trainee.sync, lambda: trainee.train(args.epochs, []))

    def harnessed() -> tuple[float, float]:
        start = time.perf_counter()
        writer = EpochLogWriter(path)
        write_metadata(path, meta.finished(status=Status.RUNNING).to_dict())
        setup = time.perf_counter() - start
        telemetry = Telemetry()
        timer = EpochTimer(
            trainee.sync, writer.append, data.info.train_samples, spec.loss_key, spec.accuracy_key, telemetry
        )
        with telemetry:
            total = _timed(trainee.sync, lambda: trainee.train(args.epochs, [timer]))
        start = time.perf_counter()
        writer.close()
        write_metadata(path, meta.finished(status=Status.COMPLETE).to_dict())
        teardown = time.perf_counter() - start
        return total + setup + teardown, timer.hook_seconds + setup + teardown

    trainee.train(1, [])  # compile outside the measurement
    plain_s, harnessed_s, direct_s = [], [], []
    for _ in range(args.repeats):
        plain_s.append(plain() / args.epochs)
        total, own = harnessed()
        harnessed_s.append(total / args.epochs)
        direct_s.append(own / args.epochs)
    epoch = statistics.median(plain_s)
    result: dict[str, Any] = {
        "workload": args.workload,
        "backend": args.backend,
        "data": data.info.source,
        "keras": keras.__version__,
        "settings": {"dtype_policy": trainee.dtype_policy, "jit_compile": str(trainee.jit_compile)},
        "epoch_s": epoch,
        "direct_s": statistics.median(direct_s),
        "ab_s": statistics.median(harnessed_s) - epoch,
        "bare_range_s": (min(plain_s), max(plain_s)),
        "harnessed_range_s": (min(harnessed_s), max(harnessed_s)),
        "repeats": args.repeats,
    }
    if args.runner_csv is not None:
        result["runner_s"] = runner_steady_median(args.runner_csv)
    return result


def runner_steady_median(csv: Path) -> float:
    """A runner process's steady median from its log (the compiling epoch left out)."""
    from benchmarks.logs import read_epoch_log

    steady = [row.elapsed for row in read_epoch_log(csv).epochs if not row.compiled]
    if not steady:
        raise SystemExit(f"error: --runner-csv {csv}: no steady epoch in it")
    return statistics.median(steady)


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
    lines = [
        f"harness overhead: {r['workload']} on {r['backend']} ({r['data']} data, Keras {r['keras']}, "
        f"{r['settings']['dtype_policy']}), {r['repeats']} plain/harnessed pairs",
        f"  plain epoch, median:     {r['epoch_s']:.4f} s (range {bare_lo:.4f}-{bare_hi:.4f})",
        f"  harnessed epoch, range:  {harnessed_lo:.4f}-{harnessed_hi:.4f} s",
        f"  direct (harness work):   {r['direct_s'] * 1000:.3f} ms/epoch = {pct(r['direct_s']):.3f}% of an epoch",
        f"  A/B median difference:   {r['ab_s'] * 1000:+.1f} ms/epoch = {pct(r['ab_s']):+.2f}% (noise included)",
    ]
    if "runner_s" in r:
        runner = float(r["runner_s"]) - float(r["epoch_s"])
        lines.append(
            f"  runner process, median:  {r['runner_s']:.4f} s = {pct(runner):+.2f}% against the plain epoch here"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
