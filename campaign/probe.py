"""Step costs of one workload's model under variants, in one process: where the runner's time goes, and what a
setting changes, measured beside each other on one device.

    python -m campaign.probe --workload gpt_nietzsche --backend jax \
        --variants "policy=float32;policy=mixed_float16;policy=mixed_float16,emb32=1,profile=1"
    python -m campaign.probe --workload resnet50 --backend torch-native --variants "precision=bfloat16,compile=1"

Each variant builds the workload's model as the runner does (its own `build_model` and `compile_args`, or a native
twin's `build_training`), on the short suite's slice, trains one epoch (the compiling one, timed apart) and then
`--epochs` epochs, each timed between device synchronisations; it prints one JSON line per variant. Keras keys:
policy (float32, mixed_float16, mixed_bfloat16), matmul (default or a jax_default_matmul_precision value, e.g.
tensorfloat32), emb32 (1: Embedding layers compute in float32), spe (steps_per_execution), jit (auto, on, off),
bench (1: cuDNN autotuning on PyTorch). Native keys: precision (float16,
bfloat16, float32), compile (1: torch.compile). Both: profile (1: one more epoch under the framework's profiler,
its top device operations printed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.harness.backends import prepare_process

TOP_OPS = 14


def parse_variants(text: str) -> list[dict[str, str]]:
    variants = []
    for chunk in (c.strip() for c in text.split(";")):
        if chunk:
            variants.append(dict(pair.split("=", 1) for pair in chunk.split(",")))
    return variants


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m campaign.probe", description=__doc__.splitlines()[0])
    parser.add_argument("--workload", required=True)
    parser.add_argument("--backend", required=True, choices=("jax", "torch", "torch-native"))
    parser.add_argument("--variants", required=True, type=parse_variants)
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs after the compiling one")
    parser.add_argument("--suite", default="short", help="the suite whose slice the variants train on")
    args = parser.parse_args(argv)
    prepare_process(args.backend)
    data = _data(args)
    for variant in args.variants:
        started = time.perf_counter()
        try:
            result = _measure(args, data, variant)
        except Exception as exc:  # one failing variant must not lose the others
            result = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        result = {"workload": args.workload, "backend": args.backend, "variant": variant, **result}
        result["wall_s"] = round(time.perf_counter() - started, 1)
        print("PROBE " + json.dumps(result), flush=True)
    return 0


def _data(args: argparse.Namespace) -> Any:
    from benchmarks import workloads
    from benchmarks.data.files import FileLocations
    from benchmarks.harness.runner import RunOptions, load_data, plan
    from benchmarks.suites import get_suite

    module = workloads.load(args.workload)
    options = RunOptions(
        backend=args.backend,
        platform="probe",
        run_id="probe",
        out_dir=Path(tempfile.mkdtemp()),
        locations=FileLocations.from_env(offline=True),
        cut=get_suite(args.suite).cut,
        allow_synthetic=True,
    )
    return load_data(module, plan(module.SPEC, options).request, options, set())


def _measure(args: argparse.Namespace, data: Any, variant: dict[str, str]) -> dict[str, Any]:
    if args.backend == "torch-native":
        return _native(args, data, variant)
    return _keras(args, data, variant)


def _keras(args: argparse.Namespace, data: Any, variant: dict[str, str]) -> dict[str, Any]:
    import keras

    from benchmarks import workloads
    from benchmarks.harness import backends
    from benchmarks.harness.runner import fit

    module = workloads.load(args.workload)
    spec = module.SPEC
    keras.utils.clear_session()
    backends.reset_compiled_state(args.backend)
    keras.utils.set_random_seed(1337)
    if args.backend == "jax":
        import jax

        matmul = variant.get("matmul", "default")
        jax.config.update("jax_default_matmul_precision", None if matmul == "default" else matmul)
    if args.backend == "torch":
        import torch

        torch.backends.cudnn.benchmark = variant.get("bench") == "1"
    keras.config.set_dtype_policy(variant.get("policy", "float32"))
    try:
        model = module.build_model(data)
    finally:
        keras.config.set_dtype_policy("float32")
    if variant.get("emb32") == "1":
        for layer in model.layers:
            if isinstance(layer, keras.layers.Embedding):
                layer.dtype_policy = keras.DTypePolicy("float32")
    jit_choices: dict[str, bool | str] = {"auto": "auto", "on": True, "off": False}
    jit = jit_choices[variant.get("jit", "auto")]
    model.compile(**module.compile_args(), jit_compile=jit, steps_per_execution=int(variant.get("spe", "1")))
    sync = backends.synchronizer(args.backend, model)

    def epoch() -> None:
        fit(model, data, spec, 1, [])

    result = _timed_epochs(epoch, sync, args.epochs, data)
    result["dtype_policy"] = model.dtype_policy.name
    if variant.get("profile") == "1":
        result["top_ops"] = _profile(args.backend, epoch, sync)
    return result


def _native(args: argparse.Namespace, data: Any, variant: dict[str, str]) -> dict[str, Any]:
    import torch

    from benchmarks.harness import native
    from benchmarks.harness.processes import Place
    from benchmarks.workloads import native as native_workloads

    module = native_workloads.load(args.workload)
    torch._dynamo.reset()
    torch.manual_seed(1337)
    torch.set_float32_matmul_precision("high")
    torch.backends.cudnn.benchmark = variant.get("bench", "1") == "1"
    device = native.device_for(Place())
    trainer = native.NativeTrainer(
        module.build_training(data, device),
        device,
        variant.get("precision", "float16"),
        variant.get("compile") == "1",
        Place(),
    )

    def epoch() -> None:
        trainer.fit(data, 1, [], module.SPEC.batch_size, module.SPEC.validates, 1337)

    result = _timed_epochs(epoch, trainer.synchronize, args.epochs, data)
    if variant.get("profile") == "1":
        result["top_ops"] = _profile("torch", epoch, trainer.synchronize)
    return result


def _timed_epochs(epoch: Callable[[], None], sync: Callable[[], None], epochs: int, data: Any) -> dict[str, Any]:
    times = []
    for _ in range(epochs + 1):
        sync()
        start = time.perf_counter()
        epoch()
        sync()
        times.append(time.perf_counter() - start)
    samples = data.info.train_samples
    steady = statistics.median(times[1:])
    return {
        "first_epoch_s": round(times[0], 3),
        "epochs_s": [round(t, 4) for t in times[1:]],
        "steady_s": round(steady, 4),
        "samples_per_s": round(samples / steady, 1),
        "train_samples": samples,
    }


def _profile(backend: str, epoch: Callable[[], None], sync: Callable[[], None]) -> list[tuple[str, Any]]:
    """The device operations that took the most time in one epoch: (name, ms), most first."""
    if backend == "jax":
        import jax
        from jax.profiler import ProfileData

        folder = tempfile.mkdtemp()
        with jax.profiler.trace(folder):
            epoch()
            sync()
        path = next(Path(folder).rglob("*.xplane.pb"))
        totals: Counter[str] = Counter()
        for plane in ProfileData.from_file(str(path)).planes:
            if not plane.name.startswith("/device:GPU"):
                continue
            lines = list(plane.lines)
            streams = [line for line in lines if "Stream" in line.name] or lines  # not the derived op lines
            for line in streams:
                for event in line.events:
                    stats = dict(event.stats)
                    totals[str(stats.get("hlo_op", event.name))[:90]] += event.duration_ns / 1e6
            totals["(all, " + ", ".join(line.name for line in lines)[:60] + ")"] = -sum(totals.values())
        return [(name, round(abs(ms), 2)) for name, ms in sorted(totals.items(), key=lambda kv: -abs(kv[1]))][:TOP_OPS]
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities) as prof:
        epoch()
        sync()
    key = "device_time_total" if torch.cuda.is_available() else "cpu_time_total"
    events = sorted(prof.key_averages(), key=lambda e: getattr(e, key, 0), reverse=True)
    return [(e.key[:90], round(getattr(e, key, 0) / 1e3, 2)) for e in events[:TOP_OPS]]


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
