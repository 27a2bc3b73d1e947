"""Run one workload on the backend this process was started with, writing its CSV and metadata as it goes.

The metadata is written before training (status "running"), after every failure (status "partial", with the
error) and at the end (status "complete"), so an interrupted run leaves its finished epochs and says why.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import keras

from benchmarks import metadata, stability, workloads
from benchmarks.data.files import DatasetUnavailable, FileLocations
from benchmarks.data.loaders import SYNTHETIC_NAME
from benchmarks.data.types import SYNTHETIC, Data, DataRequest
from benchmarks.harness import backends, compile_cache, distribution, processes, sysinfo
from benchmarks.harness.fingerprint import fingerprint
from benchmarks.harness.telemetry import Telemetry
from benchmarks.harness.timing import EpochTimer
from benchmarks.harness.trainee import Trainee
from benchmarks.logs import EpochLogWriter, EpochRecord, write_metadata
from benchmarks.metadata import RunMetadata, Status, WorkloadSource
from benchmarks.workload_set import Workload

# The run's telemetry paused while the block runs: a callback that waits between epochs (for a shared device, say)
# keeps its process from polling the driver while another process is timed.
Quiet = Callable[[], AbstractContextManager[None]]
# Extra Keras callbacks for a run, made from its `Quiet`; listed after the epoch timer, so an epoch's end is
# recorded before they act. One that waits between timed epochs says how long in `waited_s` (timing.turn_wait_s).
CallbackFactory = Callable[[Quiet], Sequence[Any]]


class BadRunArguments(ValueError):
    """An argument that does not fit the workload (e.g. a dataset it does not accept)."""


@dataclass(frozen=True)
class RunOptions:
    backend: str
    platform: str
    run_id: str
    out_dir: Path
    locations: FileLocations
    overrides: backends.Overrides = field(default_factory=backends.Overrides)
    suite: str | None = None
    cut: str | None = None  # "quick" or "bounded": train on the workload's cut of that name
    epochs: int | None = None
    train_limit: int | None = None
    val_limit: int | None = None
    dataset: str | None = None
    allow_synthetic: bool = False
    seed: int = 1337
    gpus: int | str = 1  # devices to train on, data parallel ("all": every device of the machine)
    batch_policy: str = distribution.SAME_GLOBAL
    repeat: metadata.Repeat | None = None  # set when this run is one of several repeats of a configuration
    process: metadata.ProcessPlace | None = None  # where this workload stands among those of its process
    host_gc: str = "on"  # Python's garbage collector during fit: on, frozen (gc.freeze first) or off
    callbacks: CallbackFactory | None = None  # given through the Python API (benchmarks.cli.main), never the CLI


@dataclass
class Plan:
    """The resolved numbers of one run: what the user asked, filled in from the workload and the suite."""

    epochs: int
    request: DataRequest
    distribution: distribution.Distribution


def plan(spec: workloads.WorkloadSpec, options: RunOptions, place: processes.Place | None = None) -> Plan:
    dataset = options.dataset or spec.datasets[0]
    if dataset not in (*spec.datasets, SYNTHETIC_NAME):
        raise BadRunArguments(
            f"--dataset {dataset!r} does not fit {spec.name}; choose from {', '.join((*spec.datasets, SYNTHETIC_NAME))}"
        )
    cut = {"quick": spec.quick, "bounded": spec.bounded, "short": spec.short, None: None}[options.cut]
    devices = distribution.resolve_devices(options.backend, options.gpus, place or processes.Place())
    spread = distribution.plan(devices, options.batch_policy, spec.batch_size)
    return Plan(
        epochs=options.epochs or (cut.epochs if cut else spec.epochs),
        request=DataRequest(
            dataset=dataset,
            train_limit=spread.even(options.train_limit or (cut.train_limit if cut else None)),
            val_limit=spread.even(options.val_limit or (cut.val_limit if cut else None)),
            seed=options.seed,
            batch_size=spread.global_batch_size,
        ),
        distribution=spread,
    )


def load_data(module: Any, request: DataRequest, options: RunOptions, notices: set[str]) -> Data:
    """Real data, or labelled synthetic data where the real file is unavailable and the user allowed it."""
    try:
        loaded: Data = module.load_data(request, options.locations)
        return loaded
    except DatasetUnavailable as exc:
        if not options.allow_synthetic:
            raise
        reason = str(exc)
        if reason not in notices:  # say it once per process, not once per workload
            notices.add(reason)
            print(f"note: {reason}; using labelled synthetic data instead", file=sys.stderr, flush=True)
        data: Data = module.load_data(replace(request, dataset=SYNTHETIC_NAME), options.locations)
        data.info.synthetic_reason = reason
        return data


def csv_path(options: RunOptions, workload: str, synthetic: bool) -> Path:
    suffix = "_synthetic" if synthetic else ""
    repeat = f".r{options.repeat.index:02d}" if options.repeat else ""
    return options.out_dir / options.platform / options.run_id / f"{workload}_{options.backend}{suffix}{repeat}.csv"


class SetupClock:
    """Seconds of each step before the first epoch, in the order they ran."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._since = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = round(now - self._since, 3)
        self._since = now

    def timing(self) -> metadata.Timing:
        return metadata.Timing(
            data_s=self.laps.get("data_s"), build_s=self.laps.get("build_s"), describe_s=self.laps.get("describe_s")
        )


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def run_workload(workload: Workload, module: ModuleType, options: RunOptions, notices: set[str] | None = None) -> Path:
    """Train one workload (`module`: `workload.load()`, or its native twin on torch-native); return its CSV path.
    Raises after recording a partial run if training fails."""
    name = workload.name
    native = backends.is_native(options.backend)
    check_kind(module, name, options.backend)
    spec: workloads.WorkloadSpec = module.SPEC
    several = options.backend in processes.MULTI_PROCESS_BACKENDS
    place = processes.from_environment() if several else processes.Place()
    run_plan = plan(spec, options, place)
    cache = compile_cache.activate(options.backend)
    backends.reset_compiled_state(options.backend)
    backends.set_random_seed(options.backend, options.seed)
    started_at = _now()
    setup = SetupClock()
    data = load_data(module, run_plan.request, options, notices if notices is not None else set())
    data, spread = distribution.split_evenly(data, run_plan.distribution)
    setup.lap("data_s")
    settings = options.overrides.apply(
        backends.default_settings(options.backend, name, backends.gpu_available(options.backend))
    )
    backends.apply_float32_matmul(options.backend, settings.float32_matmul)
    if native:
        from benchmarks.harness import native as native_harness

        trainee, spread = native_harness.trainee(module, data, spread, settings, spec, options.seed, place)
    else:
        trainee, spread = keras_trainee(module, data, spread, settings, spec, place)
    run_plan = replace(run_plan, distribution=spread)
    setup.lap("build_s")
    if not place.writes_logs:
        return _train_quietly(trainee, run_plan, spec, data, csv_path(options, name, data.info.source == SYNTHETIC))
    path = csv_path(options, name, data.info.source == SYNTHETIC)
    records: list[EpochRecord] = []
    meta = run_metadata(spec, options, settings, run_plan, data, trainee, started_at, workload.source)
    write_metadata(path, meta.to_dict())
    setup.lap("describe_s")
    meta = replace(meta, timing=setup.timing())
    if cache:
        cache.mark()  # after the fingerprint's own compiles: count the model's
    writer = EpochLogWriter(path)

    def record(epoch: EpochRecord) -> None:
        records.append(epoch)
        writer.append(epoch)
        _print_epoch(name, options.backend, epoch, run_plan.epochs)

    telemetry = Telemetry()
    timer = EpochTimer(trainee.sync, record, data.info.train_samples, spec.loss_key, spec.accuracy_key, probe=telemetry)
    hooks = list(options.callbacks(telemetry.paused)) if options.callbacks else []
    try:
        with telemetry, host_gc(options.host_gc):
            trainee.train(run_plan.epochs, [timer, *hooks])
        processes_s = trainee.gather([r.elapsed for r in records])
        if processes_s is not None:
            meta = replace(meta, distribution={**(meta.distribution or {}), "process_epoch_s": processes_s})
        after = trainee.after_training()
    except BaseException as exc:
        partial = _finish(meta, records, telemetry, timer, cache, Status.PARTIAL, hooks, _describe(exc))
        write_metadata(path, partial)
        raise
    finally:
        writer.close()
        trainee.close()
    write_metadata(path, _finish(meta, records, telemetry, timer, cache, Status.COMPLETE, hooks, extra=after))
    return path


def _train_quietly(trainee: Trainee, run_plan: Plan, spec: workloads.WorkloadSpec, data: Data, path: Path) -> Path:
    """A process other than rank 0 of a data-parallel job: it trains beside rank 0, times its own epochs and hands
    them to rank 0 (which records every process's), and writes nothing."""
    times: list[float] = []
    timer = EpochTimer(
        trainee.sync, lambda epoch: times.append(epoch.elapsed), data.info.train_samples, spec.loss_key, None
    )
    try:
        trainee.train(run_plan.epochs, [timer])
        trainee.gather(times)
    finally:
        trainee.close()
    return path


def check_kind(module: Any, name: str, backend: str) -> None:
    """A native workload trains on a native backend only, a Keras workload on Keras's backends only."""
    is_native_module = hasattr(module, "build_training")
    if backends.is_native(backend) and not is_native_module:
        raise BadRunArguments(f"{name} is a Keras workload: run it with --backend jax, torch or tensorflow")
    if not backends.is_native(backend) and is_native_module:
        raise BadRunArguments(f"{name} is a native PyTorch workload: run it with --backend {backends.NATIVE}")


def keras_trainee(
    module: Any,
    data: Data,
    spread: distribution.Distribution,
    settings: backends.Settings,
    spec: workloads.WorkloadSpec,
    place: processes.Place | None = None,
) -> tuple[Trainee, distribution.Distribution]:
    """The workload's Keras model, built and compiled as the run's settings say; in a job of several processes
    (Keras on JAX: benchmarks.harness.jax_processes), trained on this process's share of every batch."""
    place = place or processes.Place()
    backend = spread.devices.backend
    with distribution.activate(spread):
        model = backends.build_model(module, data, settings.precision)
        backends.apply_lstm_setting(model, settings.use_cudnn)
        compile_args, spread = distribution.scale_learning_rate(module.compile_args(), spread)
        model.compile(
            **compile_args,
            jit_compile=settings.jit_compile,
            steps_per_execution=settings.steps_per_execution,
        )
    batch_size = spread.global_batch_size

    def train(epochs: int, callbacks: list[Any]) -> None:
        fit(model, data, spec, epochs, callbacks, batch_size)

    def after() -> dict[str, Any] | None:
        return module.after_training(model, data) if hasattr(module, "after_training") else None

    trainee = Trainee(
        jit_compile=model.jit_compile,
        dtype_policy=model.dtype_policy.name,  # the model's own: a workload may build it in mixed precision
        lstm_kernel=backends.lstm_kernel(model, backend),
        parameters=model.count_params(),
        sync=backends.synchronizer(backend, model),
        train=train,
        after_training=after,
    )
    if place.several:
        trainee = _across_processes(trainee, module, model, data, spec, batch_size, place, spread.devices.device_type)
    return trainee, distribution.observe(model, spread)


def _across_processes(
    trainee: Trainee,
    module: Any,
    model: keras.Model,
    data: Data,
    spec: workloads.WorkloadSpec,
    batch_size: int,
    place: processes.Place,
    device_type: str,
) -> Trainee:
    """`trainee` as one process of a JAX job: `fit` on this process's shares of the batches; every process's epoch
    times and node gathered for rank 0. A workload's `after_training` is left out: its predictions would be
    programs of the whole job, which rank 0 alone cannot run."""
    from benchmarks.harness import jax_processes

    train_shares, val_shares, shuffle = jax_processes.process_shares(data, batch_size, place)

    def train(epochs: int, callbacks: list[Any]) -> None:
        validation = val_shares if spec.validates else None
        model.fit(
            train_shares, epochs=epochs, validation_data=validation, callbacks=callbacks, shuffle=shuffle, verbose=0
        )

    job = processes.job_fields(jax_processes.job_nodes(), jax_processes.collectives(device_type))
    left_out = {"left_out": f"after_training runs in one-process jobs only; this job had {place.world} processes"}
    return replace(
        trainee,
        train=train,
        gather=jax_processes.gather_times,
        after_training=lambda: left_out if hasattr(module, "after_training") else None,
        job=job,
    )


def fit(
    model: keras.Model,
    data: Data,
    spec: workloads.WorkloadSpec,
    epochs: int,
    callbacks: list[Any],  # keras callbacks
    batch_size: int | None = None,  # the global batch; None: the published one
) -> None:
    validation = None
    if spec.validates and data.has_validation:
        validation = data.x_val if data.y_val is None else (data.x_val, data.y_val)
    if isinstance(data.x_train, keras.utils.PyDataset):  # batches itself
        model.fit(data.x_train, epochs=epochs, validation_data=validation, callbacks=callbacks, verbose=0)
        return
    model.fit(
        data.x_train,
        data.y_train,
        batch_size=batch_size or spec.batch_size,
        epochs=epochs,
        validation_data=validation,
        callbacks=callbacks,
        verbose=0,
    )


def run_metadata(
    spec: workloads.WorkloadSpec,
    options: RunOptions,
    settings: backends.Settings,
    run_plan: Plan,
    data: Data,
    trainee: Trainee,
    started_at: str,
    source: WorkloadSource | None = None,  # a plug-in's origin; None: a built-in workload
) -> RunMetadata:
    gpu = backends.gpu_available(options.backend)
    return RunMetadata(
        run_id=options.run_id,
        workload=spec.name,
        backend=options.backend,
        platform=options.platform,
        status=Status.RUNNING,
        suite=options.suite,
        epochs_planned=run_plan.epochs,
        seed=options.seed,
        started_at=started_at,
        git_commit=sysinfo.git_commit(),
        plugin=source,
        hyperparameters={"epochs": run_plan.epochs, **spec.hyperparameters, **run_plan.distribution.trained()},
        distribution={**run_plan.distribution.as_dict(), **(trainee.job or {})},
        cut=options.cut,
        cut_down=bool(run_plan.request.train_limit or run_plan.request.val_limit) or run_plan.epochs != spec.epochs,
        reference=spec.reference,
        data=metadata.DataRecord(**data.info.as_dict()),
        settings=metadata.Settings(
            jit_compile=trainee.jit_compile,
            jit_compile_requested=settings.jit_compile,
            steps_per_execution=settings.steps_per_execution,
            dtype_policy=trainee.dtype_policy,
            float32_matmul=settings.float32_matmul,
            lstm_kernel=trainee.lstm_kernel,
            use_cudnn=settings.use_cudnn if spec.uses_lstm else None,
            host_gc=options.host_gc,
            omp_wait_policy=backends.omp_wait_policy(options.backend),
            cudnn_benchmark=trainee.cudnn_benchmark,
        ),
        software=sysinfo.software(backends.framework_versions(options.backend)),
        hardware={**sysinfo.hardware(), "accelerator": "gpu" if gpu else "cpu"},
        container=sysinfo.container(),
        run_spec=sysinfo.run_spec(),
        fingerprint=metadata.Fingerprint(**fingerprint(options.backend, gpu)),
        repeat=options.repeat,
        process=options.process,
        parameters=trainee.parameters,
    )


@contextlib.contextmanager
def host_gc(mode: str) -> Iterator[None]:
    """Python's garbage collector during fit. "frozen" moves every object that exists before training (the data,
    the model, the frameworks' modules) out of the collector's sight, so collections during training scan only
    what the training loop creates; "off" stops automatic collection until fit returns. Neither changes the
    model or the data: only when the host pauses."""
    if mode not in HOST_GC:
        raise BadRunArguments(f"--host-gc {mode!r}: choose from {', '.join(HOST_GC)}")
    was_enabled = gc.isenabled()
    if mode == "frozen":
        gc.collect()
        gc.freeze()
    elif mode == "off":
        gc.disable()
    try:
        yield
    finally:
        if mode == "frozen":
            gc.unfreeze()
        if was_enabled:
            gc.enable()


HOST_GC = ("on", "frozen", "off")


def _waited(hooks: Sequence[Any]) -> float | None:
    """Seconds the extra callbacks held the loop between timed epochs; None where none waits."""
    waits = [w for w in (getattr(hook, "waited_s", None) for hook in hooks) if w is not None]
    return round(sum(waits), 3) if waits else None


def _finish(
    meta: RunMetadata,
    records: list[EpochRecord],
    telemetry: Telemetry,
    timer: EpochTimer,
    cache: compile_cache.Tracker | None,
    status: Status,
    hooks: Sequence[Any] = (),
    error: str | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    steady = [r.elapsed for r in records if not r.compiled]
    last = records[-1] if records else None
    energy = telemetry.energy()
    return meta.finished(
        status=status,
        settings=replace(meta.settings, compile_cache=cache.record()) if cache else meta.settings,
        error=error,
        ended_at=_now(),
        epochs_completed=len(records),
        timing=replace(
            meta.timing or metadata.Timing(),
            first_epoch_s=records[0].elapsed if records else None,
            steady_median_s=statistics.median(steady) if steady else None,
            steady_epochs=len(steady),
            total_s=sum(r.elapsed for r in records),
            harness_hook_s=timer.hook_seconds,
            turn_wait_s=_waited(hooks),
        ),
        final=metadata.Final(
            loss=last.loss if last else None,
            acc=last.acc if last else None,
            val_loss=last.val_loss if last else None,
            val_acc=last.val_acc if last else None,
        ),
        stability=metadata.Stability(**_stability(records, telemetry)),
        telemetry=telemetry.summary(),
        energy=metadata.Energy(**energy) if energy else None,
        gpu_utilization=telemetry.gpu_utilization(),
        after_training=extra,
    ).to_dict()


def _stability(records: list[EpochRecord], telemetry: Telemetry) -> dict[str, Any]:
    utilization = {d["epoch"]: d.get("gpu_utilization_pct") for d in telemetry.epoch_details()}
    steady = [r for r in records if not r.compiled]
    return stability.assess(
        [(r.epoch, r.elapsed) for r in steady], [utilization.get(r.epoch) for r in steady] if telemetry.has_gpu else []
    )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")


def _print_epoch(name: str, backend: str, epoch: EpochRecord, planned: int) -> None:
    parts = [f"{name} [{backend}] epoch {epoch.epoch + 1}/{planned}: {epoch.elapsed:.2f} s"]
    if epoch.compiled:
        parts.append("(compile)")
    for label, value in (("loss", epoch.loss), ("acc", epoch.acc), ("val_acc", epoch.val_acc)):
        if value is not None:
            parts.append(f"{label} {value:.4f}")
    print(" ".join(parts), flush=True)
