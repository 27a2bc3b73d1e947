"""Fresh runner processes without paying the framework's import each time: one parent per backend imports Keras,
the framework and the harness, then forks one child per run.

A fresh process on a GPU machine spends much of its life importing: on an H100 host, `import keras` took 14-15 s
with the torch backend (torch itself 4 s) and 5 s with JAX, against epochs of 0.2-5 s. A child forked after the
imports starts where a fresh process stands once its imports are done: the device untouched, nothing compiled, no
workload built, Python's collector tracking the same objects. It then pays everything else a fresh process pays
(the device's context, the compile, the data), so its runs measure what fresh processes measure; the parent
refuses to fork once either framework has started its device runtime or a Python thread runs. The native thread
pools numpy and scipy start on import (OpenBLAS) are rebuilt in the child by OpenBLAS's own fork handlers.

    python -m campaign.preload --backend torch \\
        --run "run --workload mnist_mlp --backend torch --suite short" \\
        --run "run --workload mnist_cnn --backend torch --suite short"

Each child's runs record `process.design` "preloaded" (the runner's Python API, benchmarks.cli.main), so the
report can set them beside runs of truly fresh processes. A child ends with its parent, however the parent ends
(the kernel's parent-death signal).
TensorFlow starts its thread pools on import, so it is not forked: its runs keep fresh processes.

`--staged` forks every child at once. Their first epochs (on PyTorch mostly `torch.compile`'s host work, 34-57 s a
compiled default on an H100 host against 2-6 s steady epochs) run side by side; each child then waits, and once all
are ready the children train their steady epochs one at a time, in the order given, each alone on the device and
the host but for its idle siblings (campaign.turns). Their runs record `process.design` "staged": a first epoch
that shared the machine is never pooled with one that had it alone. PyTorch only: a JAX process takes 75 % of the
device's memory when it starts, so JAX children side by side would each run on a smaller share than a fresh one.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import functools
import importlib
import os
import pkgutil
import shlex
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from benchmarks.harness.backends import prepare_process

if TYPE_CHECKING:
    from campaign.turns import Turn

BACKENDS = ("jax", "torch")
STAGED_BACKENDS = ("torch",)
# What a runner process of the backend imports before it touches the device, outside its timed run: the runner's
# command line; for torch, torch._dynamo (the runner's compiled-state reset: 3.7 s of a torch process on the H100
# host), the compile-cache settings of Inductor and AOTAutograd, Inductor's compile_fx (with functorch's
# partitioners, networkx and jinja2: about 580 modules, which a PyTorch 2.11 child on an H100 host imported even
# where it trained eagerly) and Keras's torch optimizers (every module of the package, imported when the model's
# optimizer is made). On that host a torch child spent 6.7 s outside its run with only torch._dynamo preloaded and
# 1.7 s once the parent had imported what an earlier child imported.
PRELOADS = {
    "jax": ("keras", "benchmarks.cli", "benchmarks.harness.runner"),
    "torch": (
        "keras",
        "benchmarks.cli",
        "benchmarks.harness.runner",
        "torch._dynamo",
        "torch._functorch.config",
        "torch._inductor.config",
        "torch._inductor.compile_fx",
    ),
}
PRELOADED_PACKAGES = {"jax": (), "torch": ("keras.src.backend.torch.optimizers",)}
EXIT_USAGE = 2


class PreloadUnsafe(RuntimeError):
    """The parent's state after its imports would leak into a forked child."""


@dataclass(frozen=True)
class ChildResult:
    argv: tuple[str, ...]
    returncode: int
    wall_s: float
    turn_after_s: float | None = None  # staged: from this child's fork to its turn on the device


@dataclass
class _Staged:
    """A staged child as its parent sees it: its pid, the parent's ends of its pipes, when it started."""

    argv: tuple[str, ...]
    pid: int
    ready_fd: int
    go_fd: int
    started: float


def child_argvs(backend: str, runs: Sequence[str]) -> list[list[str]]:
    """Each --run as runner arguments, checked before anything is imported: a `run` of one workload on the parent's
    backend (more workloads in one child would be one process per round, a different design)."""
    from benchmarks.cli import build_parser
    from benchmarks.workloads import WORKLOADS

    if backend not in BACKENDS:
        raise ValueError(f"--backend {backend!r}: preloaded processes support {', '.join(BACKENDS)}")
    if not runs:
        raise ValueError("--run: give at least one runner command")
    parser = build_parser()
    out = []
    for text in runs:
        argv = shlex.split(text)
        args = parser.parse_args(argv)
        if args.command != "run" or args.backend != backend or args.workload not in WORKLOADS:
            raise ValueError(f"--run {text!r}: must be `run --workload W --backend {backend} ...` for one workload")
        out.append(argv)
    return out


def preload(backend: str) -> None:
    """Import what a runner process of `backend` imports before training, and check it is still safe to fork."""
    prepare_process(backend)
    if backend == "torch":
        # torch.cuda.is_available() (Keras asks at import) would otherwise initialise the CUDA driver in the parent,
        # which a forked child cannot use; NVML answers the same question without it.
        os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    for module in PRELOADS[backend]:
        importlib.import_module(module)
    for package in PRELOADED_PACKAGES[backend]:
        for found in pkgutil.iter_modules(importlib.import_module(package).__path__, f"{package}."):
            importlib.import_module(found.name)
    from benchmarks.harness import sysinfo

    sysinfo.cpu()  # the same for every child, and a 1.1 s subprocess in each
    check_untouched(backend)


def check_untouched(backend: str) -> None:
    if threading.active_count() > 1:
        raise PreloadUnsafe(f"{threading.active_count()} Python threads run after the imports: a fork would lose them")
    if backend == "torch":
        import torch

        if torch.cuda.is_initialized():
            raise PreloadUnsafe("torch initialised CUDA during the imports: a forked child could not use it")
    if backend == "jax":
        from jax._src import xla_bridge

        if xla_bridge.backends_are_initialized():
            raise PreloadUnsafe("JAX started its device backends during the imports: a forked child could not use them")


def run_staged(argvs: Sequence[Sequence[str]]) -> list[ChildResult]:
    """Fork every child at once; once each has said its first epoch is done (or has ended), give them the device
    one at a time in the given order, each after the previous one has ended. A SIGTERM to the parent reaches every
    child still running (each keeps its finished epochs) before the parent ends."""
    children: list[_Staged] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: _stop_children([c.pid for c in children], signum, frame))
    for argv in argvs:
        children.append(_fork_staged(argv, children))
    for child in children:
        os.read(child.ready_fd, 1)  # b"" where the child ended before its first epoch did
        os.close(child.ready_fd)
    results = []
    for child in children:
        turn_after = time.monotonic() - child.started
        with contextlib.suppress(BrokenPipeError):  # it has already ended
            os.write(child.go_fd, b"g")
        os.close(child.go_fd)
        _, status = os.waitpid(child.pid, 0)
        wall = time.monotonic() - child.started
        result = ChildResult(child.argv, os.waitstatus_to_exitcode(status), wall, round(turn_after, 3))
        print(
            f"staged child: exit {result.returncode}, {wall:.1f} s, its turn after {turn_after:.1f} s: "
            f"{shlex.join(child.argv)}",
            flush=True,
        )
        results.append(result)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    return results


def _fork_staged(argv: Sequence[str], siblings: Sequence[_Staged]) -> _Staged:
    from campaign.turns import Turn

    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    started = time.monotonic()
    # the parent's ends, its own and its siblings': a child holding them would hide an ended child's end-of-file
    parents_ends = (ready_r, go_w, *(end for s in siblings for end in (s.ready_fd, s.go_fd)))
    pid = _fork_child(argv, Turn(ready_w, go_r), parents_ends)
    os.close(ready_w)
    os.close(go_r)
    return _Staged(tuple(argv), pid, ready_r, go_w, started)


def run_children(argvs: Sequence[Sequence[str]]) -> list[ChildResult]:
    """Fork one child per runner command, one after another, each running it as `python -m benchmarks` would.
    A SIGTERM to the parent reaches the running child (which keeps its finished epochs) before the parent ends."""
    results = []
    for argv in argvs:
        started = time.monotonic()
        pid = _fork_child(argv)
        signal.signal(signal.SIGTERM, functools.partial(_stop_children, [pid]))
        _, status = os.waitpid(pid, 0)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        result = ChildResult(tuple(argv), os.waitstatus_to_exitcode(status), time.monotonic() - started)
        print(f"preloaded child: exit {result.returncode}, {result.wall_s:.1f} s: {shlex.join(argv)}", flush=True)
        results.append(result)
    return results


def _fork_child(argv: Sequence[str], turn: Turn | None = None, parents_ends: Sequence[int] = ()) -> int:
    """Fork a child that runs `argv` (and never returns), ending with this process; in it, close `parents_ends`.
    Returns the child's pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        die_with_parent(parent)
        for fd in parents_ends:
            os.close(fd)
        _child(argv, turn)
    return pid


def _stop_children(pids: Sequence[int], signum: int, frame: object) -> None:
    """The parent's SIGTERM handler: pass it on to every child, wait for them to end (each records its finished
    epochs), then end."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    sys.exit(128 + signum)


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent: int) -> None:
    """In a process just forked from `parent`: have the kernel send it SIGTERM when that parent ends, however it
    ends (kill -9 included), so that no trainer outlives whoever started it on a paid machine; SIGTERM lets a
    runner keep its finished epochs. Linux only; elsewhere a no-op."""
    if not sys.platform.startswith("linux"):
        return
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # it ended before the request was in place
        os.kill(os.getpid(), signal.SIGTERM)


def _child(argv: Sequence[str], turn: Turn | None = None) -> None:
    """Run the runner, then end as the interpreter would: exit handlers, flushed output, the runner's exit code."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    code = 1
    try:
        from benchmarks.cli import main

        if turn is None:
            code = main(list(argv), design="preloaded")
        else:
            code = main(list(argv), design="staged", callbacks=turn.callbacks)
    finally:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m campaign.preload", description=__doc__.splitlines()[0])
    parser.add_argument("--backend", required=True, help=f"one of {', '.join(BACKENDS)}")
    parser.add_argument("--run", action="append", default=[], help="a runner command for one child (repeatable)")
    parser.add_argument(
        "--staged",
        action="store_true",
        help="fork every child at once: first epochs side by side, then steady epochs one child at a time "
        f"({', '.join(STAGED_BACKENDS)})",
    )
    args = parser.parse_args(argv)
    try:
        argvs = child_argvs(args.backend, args.run)
        if args.staged and args.backend not in STAGED_BACKENDS:
            raise ValueError(f"--staged: --backend must be one of {', '.join(STAGED_BACKENDS)}")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit:  # the runner's parser said what was wrong with a --run
        return EXIT_USAGE
    try:
        preload(args.backend)
    except PreloadUnsafe as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    results = run_staged(argvs) if args.staged else run_children(argvs)
    return next((r.returncode for r in results if r.returncode != 0), 0)


if __name__ == "__main__":
    sys.exit(main())
