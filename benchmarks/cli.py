"""`python -m benchmarks`: run workloads, run a suite, list what exists, fetch dataset files.

Frameworks are imported only after the backend is chosen (Keras reads KERAS_BACKEND once, at import), so this
module imports none of them at the top.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import os
import secrets
import shlex
import signal
import string
import subprocess
import sys
import traceback
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, NoReturn

from benchmarks.command import RunnerCommand
from benchmarks.harness.backends import (
    ALL_BACKENDS,
    BACKENDS,
    FLOAT32_MATMUL,
    PRECISIONS,
    Overrides,
    is_native,
    prepare_process,
)
from benchmarks.harness.distribution import BATCH_POLICIES, SAME_GLOBAL, DistributionError, check_request, parse_gpus
from benchmarks.plugins import BadWorkload
from benchmarks.suites import SUITES, get_suite
from benchmarks.work import WorkItem, item_command
from benchmarks.workload_set import Workload, Workloads, installed_names, workloads_of
from benchmarks.workloads import WORKLOADS

if TYPE_CHECKING:
    from benchmarks.harness.runner import CallbackFactory

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_DATA = 3
EXIT_INTERRUPTED = 130
SUBCOMMANDS = ("run", "suite", "list", "fetch-data", "check-workload", "step-costs", "check-allreduce")


def new_run_id() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(2)


# Platform and run ids become folder names (logs/<platform>/<run-id>), container names (`docker run --name`:
# ASCII, a letter or digit first) and cloud tags; the longest leaves room for what is appended to them (a fan-out's
# `-<profile>`, a container's `-<workload>-<backend>-rN`) within a file name's 255 bytes.
MAX_NAME_CHARS = 100
NAME_CHARS = frozenset(string.ascii_letters + string.digits + "-_.")


def name_error(what: str, text: str) -> str | None:
    """Why `text` cannot be a platform or run id, as one line naming `what` (e.g. "--run-id"); None if it can."""
    problem = _name_problem(text)
    return None if problem is None else f"{what} {problem}"


def _name_problem(text: str) -> str | None:
    """`text` (cut, if long: the line must stay one line) and what is wrong with it, or None."""
    shown = repr(text if len(text) <= 60 else text[:40] + "...")
    if len(text) > MAX_NAME_CHARS:
        return f"{shown}: {len(text):,} characters; at most {MAX_NAME_CHARS}"
    if not text or text[0] not in NAME_CHARS - set("-_.") or not set(text) <= NAME_CHARS:
        return f"{shown}: use letters, digits, '-', '_' and '.' only (ASCII; a letter or digit first)"
    return None


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _jit(text: str) -> bool | str:
    choices: dict[str, bool | str] = {"auto": "auto", "on": True, "off": False}
    if text not in choices:
        raise argparse.ArgumentTypeError(f"expected auto, on or off, got {text!r}")
    return choices[text]


def _name(text: str) -> str:
    problem = _name_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage, got {text!r}") from None
    if not 0 < value < 100:
        raise argparse.ArgumentTypeError(f"expected a percentage between 0 and 100, got {value:g}")
    return value


DURATION_UNITS = {"s": 1, "m": 60, "h": 3600}


def _duration(text: str) -> float:
    """Seconds, or a number with s, m or h (e.g. 90, 30m, 2h)."""
    unit = text[-1:] if text[-1:] in DURATION_UNITS else "s"
    number = text[:-1] if text[-1:] in DURATION_UNITS else text
    try:
        value = float(number) * DURATION_UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a duration such as 90, 30m or 2h, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive duration, got {text!r}")
    return value


def _gpus(text: str) -> int | str:
    try:
        return parse_gpus(text)
    except DistributionError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--platform", type=_name, default="local", help="where this runs (catalog profile name)")
    parser.add_argument("--out", type=Path, default=Path("logs"), help="log root (default: logs)")
    parser.add_argument("--run-id", type=_name, help="folder for this run's logs (default: UTC time + random)")
    parser.add_argument("--epochs", type=_positive, help="override the epochs of the workload or suite")
    parser.add_argument("--train-limit", type=_positive, help="train on the first N samples only")
    parser.add_argument("--val-limit", type=_positive, help="validate on the first N samples only")
    parser.add_argument("--data-dir", help="offline folder searched first for dataset files (BENCH_DATA_DIR)")
    _workload_file(parser)
    parser.add_argument("--offline", action="store_true", help="never download; fail if a file is missing")
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument("--jit-compile", type=_jit, help="auto, on or off (default: the backend's measured best)")
    parser.add_argument("--steps-per-execution", type=_positive, help="default: the backend's measured best")
    parser.add_argument(
        "--lstm-kernel", choices=("auto", "generic"), help="auto: cuDNN where Keras can use it; generic: Keras's loop"
    )
    parser.add_argument(
        "--float32-matmul", choices=FLOAT32_MATMUL, help="GPU matmul/conv arithmetic (default: tf32 on GPUs)"
    )
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="compute type of the workloads that train in mixed precision on GPUs (default: the workload's measured "
        "best; float32: none)",
    )
    parser.add_argument("--gpus", type=_gpus, default=1, help="train data parallel on N devices, or all (default: 1)")
    parser.add_argument(
        "--batch-policy",
        choices=BATCH_POLICIES,
        default=SAME_GLOBAL,
        help="with --gpus: same-global keeps the published batch; per-device multiplies it by N (lr x sqrt(N))",
    )
    parser.add_argument(
        "--host-gc",
        choices=("on", "frozen", "off"),
        default="on",
        help="Python's garbage collector during fit: on (Python's default), frozen (gc.freeze first) or off",
    )
    repeats = parser.add_argument_group("repeats (each a fresh process, interleaved round robin; docs/statistics.md)")
    repeats.add_argument("--repeats", type=_positive, default=1, help="repeat every item N times (default: 1)")
    repeats.add_argument(
        "--target-ci", type=_percent, help="repeat until the 95%% interval of each median is within +-PCT"
    )
    repeats.add_argument("--budget", type=_duration, help="with --target-ci or --repeats: start no repeat after this")
    repeats.add_argument("--max-repeats", type=_positive, default=30, help="with --target-ci: at most N repeats")
    # Set by the repeat scheduler on the processes it starts; recorded in each repeat's metadata.
    repeats.add_argument("--repeat-index", type=_positive, help=argparse.SUPPRESS)
    repeats.add_argument("--repeat-group", type=_name, help=argparse.SUPPRESS)
    repeats.add_argument("--repeat-planned", type=_positive, help=argparse.SUPPRESS)


def _workload_file(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workload-file",
        action="append",
        default=[],
        metavar="FILE.py",
        help="your own workload: a module with SPEC, load_data, build_model, compile_args (docs/workloads.md)",
    )


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line instead of the usage block; exit 2: bad arguments
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="train workloads on one backend in this process")
    run.add_argument(
        "--workload", help=f"comma-separated: {', '.join(WORKLOADS)} (default with --workload-file: its workload)"
    )
    run.add_argument(
        "--backend",
        required=True,
        choices=ALL_BACKENDS,
        help="a Keras backend, or torch-native: the workload's native PyTorch twin (resnet50, gpt_nietzsche) or your "
        "own native file",
    )
    run.add_argument("--suite", choices=list(SUITES), help="take epochs and slices from this suite")
    run.add_argument("--dataset", help="a dataset every given workload accepts (e.g. fashion_mnist), or synthetic")
    run.add_argument(
        "--prefer-dataset", help="a dataset for the workloads that accept it (e.g. fashion_mnist for the MNIST ones)"
    )
    run.add_argument(
        "--allow-synthetic", action="store_true", help="use labelled synthetic data where a real file is missing"
    )
    _common(run)

    suite = sub.add_parser("suite", help="run a suite: one process per backend, then print the table")
    suite.add_argument("--suite", default="quick", choices=list(SUITES))
    suite.add_argument("--backends", help=f"comma-separated subset of {', '.join(ALL_BACKENDS)} (default: the suite's)")
    suite.add_argument("--workloads", help="comma-separated subset of the suite's workloads")
    suite.add_argument("--strict-data", action="store_true", help="fail instead of using synthetic stand-ins")
    suite.add_argument(
        "--prefer-dataset", help="a dataset for the workloads that accept it (e.g. fashion_mnist for the MNIST ones)"
    )
    _common(suite)

    sub.add_parser("list", help="list workloads and suites")

    check = sub.add_parser(
        "check-workload", help="check a workload file: it imports, SPEC is complete, one step trains on the CPU"
    )
    check.add_argument("--backend", choices=BACKENDS, help="Keras backend for the check (default: one installed)")
    check.add_argument("--data-dir", help="offline folder searched first for dataset files (BENCH_DATA_DIR)")
    _workload_file(check)
    check.add_argument("--workload", action="append", default=[], help="an installed workload (entry point) to check")

    costs = sub.add_parser(
        "step-costs", help="a workload's FLOPs, operations and host data time per step, on the CPU (Keras on JAX)"
    )
    costs.add_argument("--data-dir", help="offline folder searched first for dataset files (BENCH_DATA_DIR)")
    costs.add_argument("--out", type=Path, default=Path("logs"), help="log root: the record goes to OUT/step-costs/")
    _workload_file(costs)

    sub.add_parser(  # its options are benchmarks.allreduce's own: main hands them over unparsed
        "check-allreduce", add_help=False, help="all-reduce across a multi-node job's processes; rank 0 records it"
    )

    fetch = sub.add_parser("fetch-data", help="download and check dataset files into the Keras cache")
    fetch.add_argument("--dataset", action="append", help="dataset name (default: all downloadable ones)")
    fetch.add_argument("--data-dir", help="offline folder searched first")
    return parser


def _split(text: str, allowed: Sequence[str], what: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        raise SystemExit(
            _usage_error(f"unknown {what} {', '.join(unknown) or text!r}; choose from {', '.join(allowed)}")
        )
    return names


def _usage_error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _overrides(args: argparse.Namespace) -> Overrides:
    return Overrides(
        jit_compile=args.jit_compile,
        steps_per_execution=args.steps_per_execution,
        use_cudnn={"auto": "auto", "generic": False, None: None}[args.lstm_kernel],
        float32_matmul=args.float32_matmul,
        precision=args.precision,
    )


def main(
    argv: Sequence[str] | None = None, *, design: str | None = None, callbacks: CallbackFactory | None = None
) -> int:
    """The runner's Python API, for a tool that starts runner processes its own way: `design` names that way in
    each run's metadata (`process.design`, so the report never pools its runs with fresh processes' unasked);
    `callbacks` adds Keras callbacks to each run `run` trains (benchmarks.harness.runner.CallbackFactory)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in SUBCOMMANDS and not argv[0].startswith("-"):  # `python -m benchmarks mnist_mlp
        # --backend jax`: the image entrypoint, for a built-in workload or a plug-in's
        argv = ["run", "--workload", argv[0], *argv[1:]]
    if argv and argv[0] == "check-allreduce":
        from benchmarks.allreduce import main as check_allreduce

        return check_allreduce(argv[1:])
    args = build_parser().parse_args(argv)
    args.argv = argv  # a launcher starts its processes with them (benchmarks.launch)
    missing = _missing_data_dir(args.data_dir) if hasattr(args, "data_dir") else None  # commands that read data
    if missing is not None:
        return _usage_error(missing)
    try:
        if args.command == "run":
            return cmd_run(args, design, callbacks)
        if args.command == "suite":
            return cmd_suite(args)
        if args.command == "fetch-data":
            return cmd_fetch(args)
        if args.command == "check-workload":
            return cmd_check(args)
        if args.command == "step-costs":
            return cmd_step_costs(args)
        return cmd_list()
    except SystemExit as exit_:
        return int(exit_.code or 0)


def _missing_data_dir(given: str | None) -> str | None:
    """Why the data folder (--data-dir, else BENCH_DATA_DIR) cannot be read, or None: a mistyped folder must stop
    the run before anything trains, not leave it to train on synthetic stand-ins."""
    name, value = ("--data-dir", given) if given else ("BENCH_DATA_DIR", os.environ.get("BENCH_DATA_DIR") or None)
    if value is None:
        return None
    path = Path(value).expanduser()
    if not path.exists():
        return f"{name} {value}: no such folder"
    return None if path.is_dir() else f"{name} {value}: not a folder"


def cmd_list() -> int:
    print("workloads:", ", ".join(WORKLOADS))
    if installed_names():
        print("installed workloads (entry points):", ", ".join(installed_names()))
    print("your own workload: --workload-file FILE.py (docs/workloads.md)")
    print("backends: ", ", ".join(ALL_BACKENDS), "(torch-native: native PyTorch twins)")
    print("suites:")
    for suite in SUITES.values():
        print(f"  {suite.name:24} {suite.description}")
    return 0


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # `docker stop` sends SIGTERM: record the run as partial, like Ctrl-C


def _workloads(files: Sequence[str], named: Sequence[str] = ()) -> Workloads:
    """The built-in workloads, the files given and the installed workloads among `named`, read without importing
    them; a usage error (exit 2) names one that cannot be a workload."""
    installed = [name for name in named if name in installed_names()]
    try:
        return workloads_of(files, installed)
    except BadWorkload as exc:
        raise SystemExit(_usage_error(str(exc))) from None


def _names(text: str | None) -> list[str]:
    return [name.strip() for name in (text or "").split(",") if name.strip()]


def cmd_check(args: argparse.Namespace) -> int:
    """Each plug-in imported, its SPEC checked, its model built and one step trained on a tiny batch, on the CPU;
    one line each. Exit 2 at the first that fails, naming what is wrong."""
    if not args.workload_file and not args.workload:
        return _usage_error("check-workload: give --workload-file FILE.py or --workload NAME")
    backend = args.backend or next((b for b in ("jax", "torch", "tensorflow") if importlib.util.find_spec(b)), None)
    if backend is None:
        return _usage_error("check-workload: no Keras backend (jax, torch or tensorflow) is installed here")
    os.environ["KERAS_BACKEND"] = backend
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # the check runs on the CPU, whatever this machine has
    os.environ["JAX_PLATFORMS"] = "cpu"
    from benchmarks.data.files import FileLocations
    from benchmarks.plugins import refusing_exit, trial_step

    where = FileLocations.from_env(args.data_dir, offline=True)
    try:
        workloads = workloads_of(args.workload_file, args.workload)
        for workload in workloads.plugins:
            module = workload.load()
            check = trial_step
            if hasattr(module, "build_training"):  # a native PyTorch workload
                from benchmarks.harness.native import trial_step as check
            with refusing_exit(workload.path.name):  # never an exit status 0 without the "ok" line
                line = check(module, workload.path.name, workload.sha256, where)
            print(f"ok: {line}", flush=True)
    except BadWorkload as exc:
        return _usage_error(str(exc))
    return 0


def cmd_step_costs(args: argparse.Namespace) -> int:
    """Each workload file's step costs (benchmarks.step_costs), measured with Keras on JAX on the CPU, written to
    OUT/step-costs/ for the estimator; one line each."""
    if not args.workload_file:
        return _usage_error("step-costs: give --workload-file FILE.py")
    if importlib.util.find_spec("jax") is None:
        return _usage_error("step-costs: the cost analysis needs JAX here (pip install jax)")
    os.environ["KERAS_BACKEND"] = "jax"
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # measured on the CPU, whatever this machine has
    os.environ["JAX_PLATFORMS"] = "cpu"
    from benchmarks.data.files import FileLocations
    from benchmarks.plugins import refusing_exit
    from benchmarks.step_costs import measure_plugin, record_path, write_step_costs

    where = FileLocations.from_env(args.data_dir, offline=True)
    try:
        for workload in workloads_of(args.workload_file).files:
            with refusing_exit(workload.path.name):
                costs = measure_plugin(workload.load(), workload.path.name, workload.sha256, where)
            path = write_step_costs(costs, record_path(args.out, costs.workload, costs.sha256))
            print(
                f"step costs: {costs.workload}: {costs.flops / 1e9:,.3g} GFLOP and {costs.operations:,} operations "
                f"a step of {costs.batch_size}, host data {costs.host_data_s * 1e3:.2g} ms a batch -> {path}"
            )
    except BadWorkload as exc:
        return _usage_error(str(exc))
    return 0


def cmd_run(args: argparse.Namespace, design: str | None = None, callbacks: CallbackFactory | None = None) -> int:
    workloads = _workloads(args.workload_file, _names(args.workload))
    files = [w.name for w in workloads.files]
    if args.workload is None and not files:
        return _usage_error("run: give --workload NAME[,NAME...] or --workload-file FILE.py")
    names = _split(args.workload or ",".join(files), workloads.names, "workload")
    if args.backend in ("torch", "torch-native") and (args.steps_per_execution or 1) > 1:
        return _usage_error(f"--steps-per-execution must be 1 on the {args.backend} backend")
    native = is_native(args.backend)
    if native and (refused := _without_native_twin(names, files)):
        return _usage_error(refused)
    try:
        check_request(args.backend, args.gpus, args.batch_policy)
    except DistributionError as exc:
        return _usage_error(str(exc))
    if _schedules_repeats(args):
        return _run_repeats(args, names, [args.backend], args.suite, args.allow_synthetic, set())
    if native and args.gpus != 1 and "RANK" not in os.environ and "SLURM_PROCID" not in os.environ:
        from benchmarks.launch import launch_processes

        return launch_processes(args.argv, args.gpus, args.run_id or new_run_id())
    prepare_process(args.backend)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:  # imported here, in the process that trains them, once the backend is set
        modules = {name: _module(workloads[name], native) for name in names}
    except BadWorkload as exc:
        return _usage_error(str(exc))
    from benchmarks.data.files import DatasetUnavailable, FileLocations
    from benchmarks.harness.processes import from_environment
    from benchmarks.harness.runner import BadRunArguments, RunOptions, run_workload
    from benchmarks.metadata import ProcessPlace, Repeat

    suite = get_suite(args.suite) if args.suite else None
    options = RunOptions(
        backend=args.backend,
        platform=args.platform,
        run_id=args.run_id or new_run_id(),
        out_dir=args.out,
        locations=FileLocations.from_env(args.data_dir, True if args.offline else None),
        overrides=_overrides(args),
        suite=args.suite,
        cut=suite.cut if suite else None,
        epochs=args.epochs,
        train_limit=args.train_limit,
        val_limit=args.val_limit,
        dataset=args.dataset,
        allow_synthetic=args.allow_synthetic,
        seed=args.seed,
        gpus=args.gpus,
        batch_policy=args.batch_policy,
        repeat=Repeat(args.repeat_group or args.run_id, args.repeat_index, args.repeat_planned, args.target_ci)
        if args.repeat_index is not None
        else None,
        host_gc=args.host_gc,
        callbacks=callbacks,
    )
    notices: set[str] = set()
    failed = 0
    for position, name in enumerate(names, start=1):
        try:
            workload_options = replace(
                options,
                dataset=args.dataset or _preferred(name, args.prefer_dataset),
                process=ProcessPlace(position, len(names), design),
            )
            path = run_workload(workloads[name], modules[name], workload_options, notices)
            if from_environment().writes_logs:  # the other processes of a data-parallel job write nothing
                print(f"wrote {path}", flush=True)
        except (BadRunArguments, DistributionError) as exc:
            return _usage_error(str(exc))
        except DatasetUnavailable as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_DATA
        except KeyboardInterrupt:
            print(f"interrupted during {name}; finished epochs are kept", file=sys.stderr)
            return EXIT_INTERRUPTED
        except Exception as exc:  # one workload failing must not lose the others' results
            traceback.print_exc()  # the console keeps where it failed; the last line says what
            print(f"error: {name} [{args.backend}] failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            failed += 1
    return EXIT_FAILED if failed else 0


def _module(workload: Workload, native: bool) -> ModuleType:
    """The module a run trains: a built-in workload's own, or its native twin's on torch-native; a user's file as
    it is (a native file or a Keras one: the runner refuses the wrong kind in one line)."""
    if native and workload.built_in:
        from benchmarks.workloads import load

        return load(workload.name, native=True)
    return workload.load()


def _without_native_twin(names: Sequence[str], files: Sequence[str]) -> str | None:
    """Why torch-native cannot train these built-in workloads (None: each has a native twin or is a file)."""
    from benchmarks.workloads.native import NATIVE_WORKLOADS

    missing = [n for n in names if n not in NATIVE_WORKLOADS and n not in files and n in WORKLOADS]
    if not missing:
        return None
    return (
        f"--backend torch-native: no native twin of {', '.join(missing)}; the twins are "
        f"{', '.join(NATIVE_WORKLOADS)} (or give your own native file with --workload-file)"
    )


def _schedules_repeats(args: argparse.Namespace) -> bool:
    """Whether this process plans repeats (it is not itself one of them)."""
    return args.repeat_index is None and (args.repeats > 1 or args.target_ci is not None)


def _run_repeats(
    args: argparse.Namespace,
    names: Sequence[str],
    backends: Sequence[str],
    suite: str | None,
    synthetic: bool,
    seen_notes: set[str],
) -> int:
    """Every (workload, backend) item in fresh processes, round robin; then the table of medians."""
    from benchmarks.repeats import RepeatPolicy, run_repeats
    from benchmarks.summary import print_table, summarize

    policy = RepeatPolicy(args.repeats, args.target_ci, args.budget, args.max_repeats)
    try:
        policy.check()
    except ValueError as exc:
        return _usage_error(str(exc))
    run_id = args.run_id or new_run_id()
    run_dir = args.out / args.platform / run_id
    items = [WorkItem(name, backend) for backend in backends for name in names]
    plan = f"{policy.repeats} repeats" if not policy.adaptive else f"until +-{policy.target_ci_pct:g}% (95% CI)"
    print(f"{len(items)} items x {plan}, each a fresh process, round robin; logs in {run_dir}", flush=True)

    def launch(item: WorkItem) -> int:
        shared = _runner_command(args, (item.workload,), item.backend, run_id, suite, synthetic)
        command = item_command(shared, item, policy.planned)
        print(f"--- repeat {item.repeat}: {item.workload} [{item.backend}]", flush=True)
        return _stream([sys.executable, "-m", "benchmarks", *command.argv()], seen_notes)

    outcome = run_repeats(items, policy, run_dir, run_id, launch)
    print_table(summarize(run_dir))
    print(f"repeats: {outcome.rounds} round(s) in {outcome.elapsed_s:.0f} s, stopped: {outcome.stopped}")
    _print_next_steps(run_dir)
    if EXIT_INTERRUPTED in outcome.exit_codes:
        return EXIT_INTERRUPTED
    return EXIT_FAILED if any(outcome.exit_codes) else 0


def _runner_command(
    args: argparse.Namespace, names: Sequence[str], backend: str, run_id: str, suite: str | None, synthetic: bool
) -> RunnerCommand:
    """The `run` process this one starts, carrying every option the user gave."""
    jit = None if args.jit_compile is None else {True: "on", False: "off"}.get(args.jit_compile, "auto")
    return RunnerCommand(
        tuple(names),
        backend,
        platform=args.platform,
        run_id=run_id,
        out=str(args.out),
        suite=suite,
        epochs=args.epochs,
        train_limit=args.train_limit,
        val_limit=args.val_limit,
        dataset=getattr(args, "dataset", None),  # `run` only
        prefer_dataset=args.prefer_dataset,
        data_dir=args.data_dir,
        offline=args.offline,
        allow_synthetic=synthetic,
        seed=args.seed,
        jit_compile=jit,
        steps_per_execution=args.steps_per_execution,
        lstm_kernel=args.lstm_kernel,
        float32_matmul=args.float32_matmul,
        precision=args.precision,
        target_ci=args.target_ci,
        host_gc=args.host_gc,
        gpus=str(args.gpus),
        batch_policy=args.batch_policy,
        workload_files=tuple(args.workload_file),
    )


def _preferred(workload: str, dataset: str | None) -> str | None:
    """--prefer-dataset applies to the built-in workloads that accept it; the others keep their default."""
    from benchmarks.workloads import spec

    if workload not in WORKLOADS:  # a plug-in: naming its datasets would import it (and Keras) here
        return None
    return dataset if dataset is not None and dataset in spec(workload).datasets else None


def cmd_suite(args: argparse.Namespace) -> int:
    from benchmarks.summary import print_table, summarize

    suite = get_suite(args.suite)
    backends = _split(args.backends, BACKENDS, "backend") if args.backends else _installed(suite.backends)
    files = [w.name for w in _workloads(args.workload_file).files]  # with one, the suite runs it alone unless
    default = files or list(suite.workloads)  # --workloads names others too
    names = _split(args.workloads, (*suite.workloads, *files), "workload") if args.workloads else default
    try:  # refuse before any backend's process starts
        for backend in backends:
            check_request(backend, args.gpus, args.batch_policy)
    except DistributionError as exc:
        return _usage_error(str(exc))
    seen_notes = _fetch_once(args, names)
    args.offline = True  # every file is in place or said missing: the backends' processes only look
    _record_step_costs(args)
    if _schedules_repeats(args):
        return _run_repeats(args, names, backends, suite.name, not args.strict_data, seen_notes)
    run_id = args.run_id or new_run_id()
    run_dir = args.out / args.platform / run_id
    print(f"suite {suite.name}: {len(names)} workloads x {', '.join(backends)}; logs in {run_dir}")
    codes = {}
    for backend in backends:
        command = _runner_command(args, names, backend, run_id, suite.name, not args.strict_data)
        codes[backend] = _stream([sys.executable, "-m", "benchmarks", *command.argv()], seen_notes)
        if codes[backend] == EXIT_INTERRUPTED:
            break
    print_table(summarize(run_dir))
    _print_next_steps(run_dir)
    return max(codes.values(), default=0) if any(codes.values()) else 0


def _record_step_costs(args: argparse.Namespace) -> None:
    """The workload files' step costs under the log root (`step-costs`, in a process of its own), so that the report
    and the estimate can price them on a GPU they never ran on; said, never fatal: the suite runs without them."""
    from benchmarks.step_costs import record_path

    files = [w for w in _workloads(args.workload_file).files if not record_path(args.out, w.name, w.sha256).is_file()]
    if not files or importlib.util.find_spec("jax") is None:
        return  # measured before, for this content; or no JAX here to measure with
    command = [sys.executable, "-m", "benchmarks", "step-costs", "--out", str(args.out)]
    command += [word for w in files for word in ("--workload-file", str(w.path))]
    command += ["--data-dir", args.data_dir] if args.data_dir else []
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    for line in (done.stdout + done.stderr).splitlines():
        if line.startswith(("step costs:", "error: ")):
            print(line.replace("error: ", "note: no step costs: ", 1), flush=True)


def _fetch_once(args: argparse.Namespace, names: Sequence[str]) -> set[str]:
    """Every dataset file the workloads need, resolved here once, before any backend's process starts: downloaded
    (Keras says so once per file), or, where it cannot be had, one note per file. The processes then run --offline,
    so they neither download again nor repeat the note: the returned prefixes silence their notes on those files."""
    from benchmarks.data.files import FILES, DatasetUnavailable, FileLocations, resolve
    from benchmarks.workloads import spec

    where = FileLocations.from_env(args.data_dir, offline=args.offline or None)
    built_in = [name for name in names if name in WORKLOADS]  # a plug-in's loader finds its own files
    datasets = {_preferred(name, args.prefer_dataset) or spec(name).datasets[0] for name in built_in}
    silenced: set[str] = set()
    for file in sorted({f for d in datasets & FILES.keys() for f in FILES[d]}, key=lambda f: f.relpath):
        try:
            resolve(file, where)
        except DatasetUnavailable as exc:
            silenced.add(f"note: {file.relpath}: ")
            if not args.strict_data:  # strict: each workload that needs it fails with the error itself
                print(f"note: {exc}; the workloads that need it run on labelled synthetic data", flush=True)
    return silenced


def _print_next_steps(run_dir: Path) -> None:
    """Where the logs are and how to report them, as the suite's last lines. The report command names this
    interpreter (e.g. .venv/bin/python, as `make bench` runs it): a bare `python` outside an activated virtual
    environment has no Keras and no report package."""
    report = shlex.join([_interpreter(), "-m", "report", str(run_dir.parent), "--out", "report-out"])
    print(f"logs: {run_dir}/ (a CSV and a metadata JSON per workload and backend)")
    print(f"report: {report}  (or make report: every run under logs/)")


def _interpreter() -> str:
    """This interpreter's path, relative to the working folder when inside it (as the user typed it)."""
    path = Path(sys.executable)
    if not path.is_relative_to(Path.cwd()):
        return str(path)
    relative = path.relative_to(Path.cwd())
    return str(relative) if len(relative.parts) > 1 else f"./{relative}"  # a bare name would be looked up in PATH


def _installed(backends: Sequence[str]) -> list[str]:
    """The backends whose framework is installed; a suite run without --backends skips the others, saying so."""
    found = [b for b in backends if importlib.util.find_spec(b) is not None]
    for missing in sorted(set(backends) - set(found)):
        print(f"note: {missing} is not installed; the suite runs without it")
    return found


def _stream(command: list[str], seen_notes: set[str]) -> int:
    """Run a backend's process, passing its output through; a data notice is shown once per suite (`seen_notes`
    holds the notes said so far, and the prefixes of those to keep silent)."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    assert process.stdout is not None
    try:
        for line in process.stdout:
            if line.startswith("note: "):
                if line.startswith(tuple(seen_notes)):  # said already, by this process or another backend's
                    continue
                seen_notes.add(line)
            sys.stdout.write(line)
            sys.stdout.flush()
        return process.wait()
    except KeyboardInterrupt:
        process.send_signal(signal.SIGINT)
        process.wait()
        return EXIT_INTERRUPTED


def cmd_fetch(args: argparse.Namespace) -> int:
    from benchmarks.data.files import FILES, DatasetUnavailable, FileLocations, resolve_dataset

    names = args.dataset or list(FILES)
    unknown = [n for n in names if n not in FILES]
    if unknown:
        return _usage_error(f"unknown dataset {', '.join(unknown)}; choose from {', '.join(FILES)}")
    where = FileLocations.from_env(args.data_dir, offline=False)
    failed = 0
    for name in names:
        try:
            for relpath, path in resolve_dataset(name, where).items():
                print(f"{name}: {relpath} ok ({path})")
        except DatasetUnavailable as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
    return EXIT_DATA if failed else 0
