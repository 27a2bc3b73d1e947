"""`python -m campaign.preload`: one parent imports the framework, then forks a fresh child per runner command."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from campaign import preload
from tests.benchmarks.conftest import REPO, run_benchmarks
from tests.support.processes import running

RUN = "run --workload mnist_mlp --backend jax --suite short --epochs 1"
# A module of a framework in `python -X importtime`'s listing: `import time: self | cumulative | <indent>name`.
FRAMEWORK_IMPORT = re.compile(r"^import time:.*\|\s+(keras|jax|jaxlib|torch|tensorflow)(\.\S+)?$")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    return {**env, "PYTHONPATH": str(REPO), **extra}


def test_each_run_is_parsed_into_runner_arguments() -> None:
    runs = [RUN, f"{RUN} --repeat-index 2 --out '/tmp/a b'"]
    assert preload.child_argvs("jax", runs) == [shlex.split(r) for r in runs]


@pytest.mark.parametrize(
    ("backend", "runs", "expected"),
    [
        ("jax", ["run --workload mnist_mlp --backend torch"], "--backend jax"),
        ("jax", ["run --workload mnist_mlp,mnist_cnn --backend jax"], "for one workload"),
        ("jax", ["run --workload no_such_workload --backend jax"], "for one workload"),
        ("jax", ["suite --suite short --backends jax"], "must be `run"),
        ("jax", ["list"], "must be `run"),
        ("jax", [], "at least one"),
        ("tensorflow", ["run --workload mnist_mlp --backend tensorflow"], "support jax, torch"),
    ],
)
def test_a_run_the_parent_cannot_fork_is_refused_before_anything_is_imported(
    backend: str, runs: list[str], expected: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(expected)):
        preload.child_argvs(backend, runs)


@pytest.mark.parametrize(
    "bad",
    [
        ["--backend", "jax", "--run", "run --workload mnist_mlp --backend torch"],
        ["--backend", "jax", "--run", RUN, "--run", "run --workload no_such_workload --backend jax"],
        ["--backend", "jax", "--run", f"{RUN} --epochs 0"],  # the runner's own parser refuses it
        ["--backend", "jax", "--staged", "--run", RUN],  # staged children are PyTorch's alone
        ["--backend", "torch"],
    ],
)
def test_a_bad_run_exits_2_with_one_line_and_imports_no_framework(bad: list[str], tmp_path: Path) -> None:
    env = _env(BENCH_OFFLINE="1", KERAS_HOME=str(tmp_path))
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "campaign.preload", *bad],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = result.stderr.splitlines()
    assert result.returncode == 2, result.stderr[-2000:]
    assert len([line for line in lines if "error:" in line and not line.startswith("import time:")]) == 1
    assert not [line for line in lines if FRAMEWORK_IMPORT.match(line)]
    assert "preloaded child" not in result.stdout and not list(tmp_path.rglob("*.csv"))


def test_a_thread_running_in_the_parent_makes_the_fork_unsafe() -> None:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        with pytest.raises(preload.PreloadUnsafe, match="Python threads"):
            preload.check_untouched("jax")
    finally:
        stop.set()
        thread.join()


def test_the_jax_preload_leaves_the_device_untouched_and_a_started_backend_is_unsafe() -> None:
    """The check reads JAX's own record of started backends: after the imports there are none, after a device
    query there are."""
    script = (
        "from campaign import preload\n"
        "preload.preload('jax')\n"
        "from benchmarks.harness import sysinfo\n"
        "print('cpu described once for all children:', sysinfo.cpu.cache_info().currsize)\n"
        "import jax\n"
        "jax.devices()\n"
        "try:\n"
        "    preload.check_untouched('jax')\n"
        "except preload.PreloadUnsafe as exc:\n"
        "    print('unsafe:', exc)\n"
    )
    env = _env(JAX_PLATFORMS="cpu")
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    described, unsafe = result.stdout.splitlines()[:2]
    assert described == "cpu described once for all children: 1"
    assert unsafe.startswith("unsafe: JAX started its device backends"), result.stdout


def test_the_torch_preload_holds_what_a_runner_imports_before_its_first_epoch(tmp_path: Path) -> None:
    """After the parent's imports, a child's compile-cache settings, compiled-state reset and model compile import
    none of Inductor, functorch, networkx or Keras's torch optimizers again, and the device is still untouched."""
    script = (
        "import sys\n"
        "from campaign import preload\n"
        "preload.preload('torch')\n"
        "before = set(sys.modules)\n"
        "import keras\n"
        "from benchmarks.harness import backends, compile_cache\n"
        "compile_cache.activate('torch')\n"
        "backends.reset_compiled_state('torch')\n"
        "model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])\n"
        "model.compile(optimizer='rmsprop', loss='mse')\n"
        "model.optimizer.build(model.trainable_variables)\n"
        "heavy = ('torch._inductor', 'torch._functorch', 'networkx', 'keras.src.backend.torch')\n"
        "new = sorted(m for m in set(sys.modules) - before if m.startswith(heavy))\n"
        "print('new:', new[:5], len(new))\n"
        "preload.check_untouched('torch')\n"
    )
    env = _env(KCB_COMPILE_CACHE=str(tmp_path / "cache"))
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines()[-1] == "new: [] 0", result.stdout


def test_each_child_trains_its_run_as_a_fresh_process_and_says_it_was_preloaded(
    keras_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KERAS_BACKEND", raising=False)  # the parent sets it for the backend it preloads
    run = f"{RUN} --train-limit 256 --val-limit 64 --offline --allow-synthetic --dataset synthetic"
    run += f" --out {shlex.quote(str(tmp_path))} --run-id pre"
    args = ["--backend", "jax", "--run", f"{run} --repeat-index 1", "--run", f"{run} --repeat-index 2"]
    result = run_benchmarks(args, keras_home, timeout=300, module="campaign.preload")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert len(re.findall(r"^preloaded child: exit 0, ", result.stdout, flags=re.MULTILINE)) == 2
    for index in (1, 2):
        meta = json.loads((tmp_path / "local" / "pre" / f"mnist_mlp_jax_synthetic.r0{index}.json").read_text())
        assert (meta["status"], meta["backend"], meta["repeat"]["index"]) == ("complete", "jax", index)
        assert meta["process"] == {"position": 1, "workloads": 1, "design": "preloaded"}


@pytest.mark.parametrize(("run", "children"), [("run_children", 1), ("run_staged", 2)])
def test_children_end_when_their_parent_is_killed_outright(tmp_path: Path, run: str, children: int) -> None:
    """A parent killed with SIGKILL forwards nothing: the kernel's parent-death signal stops every training child,
    the one running (one at a time) or all of them (staged)."""
    pid_file = tmp_path / "pids"
    script = (
        "import os, time\n"
        "from campaign import preload\n"
        "def train(argv, turn=None):\n"
        f"    open({str(pid_file)!r}, 'a').write(f'{{os.getpid()}}\\n')\n"
        "    time.sleep(120)\n"
        "    os._exit(0)\n"
        "preload._child = train\n"
        f"preload.{run}([['run']] * {children})\n"
    )
    with subprocess.Popen([sys.executable, "-c", script], cwd=REPO) as parent:
        started = time.monotonic()
        while (
            not pid_file.exists() or len(pid_file.read_text().split()) < children
        ) and time.monotonic() < started + 60:
            time.sleep(0.05)
        pids = [int(pid) for pid in pid_file.read_text().split()]
        parent.kill()
    while any(running(pid) for pid in pids) and time.monotonic() < started + 90:
        time.sleep(0.05)
    assert len(pids) == children and not any(running(pid) for pid in pids)


def test_staged_children_start_together_and_take_their_turns_one_after_another(tmp_path: Path) -> None:
    """Every child reaches its first epoch's end before any takes its turn; turns follow the given order, each
    after the previous child has ended; a child that ends before its first epoch does (d) holds nobody up."""
    events = tmp_path / "events"
    script = (
        "import os, sys, time\n"
        "from campaign import preload\n"
        "def child(argv, turn):\n"
        "    name, first, code = argv\n"
        "    def note(what):\n"
        f"        with open({str(events)!r}, 'a') as f:\n"
        "            f.write(f'{time.monotonic():.6f} {name} {what}\\n')\n"
        "    if first == 'gone':\n"
        "        os._exit(int(code))\n"
        "    time.sleep(float(first))  # the first epoch, beside the others\n"
        "    note('ready')\n"
        "    turn.wait()\n"
        "    note('turn')\n"
        "    time.sleep(0.2)  # the steady epochs, alone\n"
        "    note('end')\n"
        "    os._exit(int(code))\n"
        "preload._child = child\n"
        "runs = [['a', '0.6', '0'], ['b', '0.1', '0'], ['d', 'gone', '5'], ['c', '0.3', '3']]\n"
        "results = preload.run_staged(runs)\n"
        "print([(r.argv[0], r.returncode) for r in results])\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines()[-1] == "[('a', 0), ('b', 0), ('d', 5), ('c', 3)]"
    lines = [line.split() for line in events.read_text().splitlines()]
    order = [(name, what) for _, name, what in sorted(lines, key=lambda line: float(line[0]))]
    assert sorted(order[:3]) == [("a", "ready"), ("b", "ready"), ("c", "ready")]  # all ready before any turn
    assert order[3:] == [("a", "turn"), ("a", "end"), ("b", "turn"), ("b", "end"), ("c", "turn"), ("c", "end")]
    assert len(re.findall(r"^staged child: exit \d+, [\d.]+ s, its turn after", result.stdout, re.MULTILINE)) == 4


def test_staged_torch_children_record_their_wait_and_a_first_epoch_that_shared_the_machine(
    keras_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks.logs import read_metadata
    from campaign.configurations import first_epoch_kind

    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    run = "run --backend torch --suite short --epochs 2 --train-limit 256 --val-limit 64 --offline"
    run += f" --allow-synthetic --dataset synthetic --out {shlex.quote(str(tmp_path))} --run-id stg --repeat-index 1"
    args = ["--backend", "torch", "--staged"]
    args += ["--run", f"{run} --workload mnist_mlp", "--run", f"{run} --workload mnist_cnn"]
    result = run_benchmarks(args, keras_home, timeout=300, module="campaign.preload")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert len(re.findall(r"^staged child: exit 0, ", result.stdout, flags=re.MULTILINE)) == 2
    for workload in ("mnist_mlp", "mnist_cnn"):
        path = tmp_path / "local" / "stg" / f"{workload}_torch_synthetic.r01.csv"
        meta = read_metadata(path)
        assert meta is not None and meta.status.value == "complete" and meta.process is not None
        assert meta.process.design == "staged"
        assert meta.timing is not None and meta.timing.turn_wait_s is not None and meta.timing.steady_epochs == 1
        assert meta.settings is not None and first_epoch_kind(meta.settings, meta.process).endswith(
            "beside its round's first epochs"
        )
