"""One `python -m benchmarks run` invocation as data, and its command line: the one place that builds it.

The orchestrator, the GPU session tool and anything else that starts the runner describe the run with
`RunnerCommand` and ask it for the arguments, instead of assembling flags by hand. Importable without Keras or
any framework (the orchestrator and the GPU session tool run where none is installed).

    RunnerCommand(("mnist_mlp",), "jax", platform="gce-t4", run_id="r1", out="/logs").argv()
    # ['run', '--workload', 'mnist_mlp', '--backend', 'jax', '--platform', 'gce-t4', ...]
    RunnerCommand(...).argv(entrypoint=True)  # the image entrypoint form: ['mnist_mlp', '--backend', 'jax', ...]

Fields left at None are not passed: the runner's own defaults (docs/architecture.md) then apply.
"""

from __future__ import annotations

from dataclasses import dataclass

BATCH_POLICIES = ("same-global", "per-device")  # the runner's --batch-policy values (benchmarks.harness.distribution)


@dataclass(frozen=True)
class RunnerCommand:
    workloads: tuple[str, ...]
    backend: str
    platform: str | None = None
    run_id: str | None = None
    out: str | None = None
    suite: str | None = None
    epochs: int | None = None
    train_limit: int | None = None
    val_limit: int | None = None
    dataset: str | None = None
    prefer_dataset: str | None = None
    data_dir: str | None = None
    offline: bool = False
    allow_synthetic: bool = False
    seed: int | None = None
    jit_compile: str | None = None  # auto | on | off
    steps_per_execution: int | None = None
    lstm_kernel: str | None = None  # auto | generic
    float32_matmul: str | None = None  # tf32 | float32
    precision: str | None = None  # float16 | bfloat16 | float32
    repeat_index: int | None = None  # 1-based; the runner then names its files <stem>.r<II>.csv
    repeat_group: str | None = None  # the run id every repeat of one measurement shares
    repeat_planned: int | None = None  # how many repeats were planned (None: adaptive, or a single run)
    target_ci: float | None = None  # adaptive repeats' target half-width, % of the median (recorded only)
    host_gc: str | None = None  # on | frozen | off
    gpus: str | None = None  # a count, or "all"
    batch_policy: str | None = None  # one of BATCH_POLICIES
    workload_files: tuple[str, ...] = ()  # plug-in workload files (benchmarks.plugins), as this runner sees them

    def __post_init__(self) -> None:
        if not self.workloads:
            raise ValueError("RunnerCommand needs at least one workload")

    def argv(self, *, entrypoint: bool = False) -> list[str]:
        """The arguments after the program: `run --workload W,... --backend B ...` for `python -m benchmarks`,
        or, with `entrypoint`, `W --backend B ...` for the image entrypoint (one workload only)."""
        if entrypoint:
            if len(self.workloads) != 1:
                raise ValueError("the image entrypoint form takes exactly one workload")
            head = [self.workloads[0]]
        else:
            head = ["run", "--workload", ",".join(self.workloads)]
        return [*head, "--backend", self.backend, *self._options()]

    def _options(self) -> list[str]:
        valued = (
            ("--platform", self.platform),
            ("--suite", self.suite),
            ("--run-id", self.run_id),
            ("--out", self.out),
            ("--epochs", self.epochs),
            ("--train-limit", self.train_limit),
            ("--val-limit", self.val_limit),
            ("--dataset", self.dataset),
            ("--prefer-dataset", self.prefer_dataset),
            ("--data-dir", self.data_dir),
            ("--seed", self.seed),
            ("--jit-compile", self.jit_compile),
            ("--steps-per-execution", self.steps_per_execution),
            ("--lstm-kernel", self.lstm_kernel),
            ("--float32-matmul", self.float32_matmul),
            ("--precision", self.precision),
            ("--repeat-index", self.repeat_index),
            ("--repeat-group", self.repeat_group),
            ("--repeat-planned", self.repeat_planned),
            ("--target-ci", self.target_ci),
            ("--host-gc", self.host_gc),
            ("--gpus", self.gpus),
            ("--batch-policy", self.batch_policy),
        )
        options = [text for flag, value in valued if value is not None for text in (flag, str(value))]
        options += [text for path in self.workload_files for text in ("--workload-file", path)]
        options += [
            flag for flag, on in (("--offline", self.offline), ("--allow-synthetic", self.allow_synthetic)) if on
        ]
        return options


def repeat_stem(stem: str, repeat_index: int | None) -> str:
    """The runner's file stem for one repeat: `mnist_mlp_jax` -> `mnist_mlp_jax.r02` (plain without repeats)."""
    return stem if repeat_index is None else f"{stem}.r{repeat_index:02d}"
