"""Bad arguments and missing data fail before anything trains, with one line that names the problem."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.benchmarks.conftest import run_benchmarks


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "--workload", "mnist_mlpx", "--backend", "jax"], "unknown workload 'mnist_mlpx'"),
        (["run", "--workload", "mnist_mlp", "--backend", "cntk"], "invalid choice: 'cntk'"),
        (["run", "--workload", "mnist_mlp", "--backend", "jax", "--epochs", "0"], "expected a positive integer"),
        (["run", "--workload", "mnist_mlp", "--backend", "jax", "--platform", "../x"], "use letters, digits"),
        # a folder name too long for the file system, and a run id `docker run --name` refuses
        (["run", "--workload", "mnist_mlp", "--backend", "jax", "--platform", "p" * 100_000], "at most 100"),
        (["suite", "--run-id", "r" * 5000], "--run-id: 'rrrr"),
        (["suite", "--run-id", "rün-1"], "'rün-1': use letters, digits"),
        (["suite", "--suite", "nightly"], "invalid choice: 'nightly'"),
        (["suite", "--backends", "jax,mxnet"], "unknown backend 'mxnet'"),
        (["run", "--workload", "mnist_mlp", "--backend", "jax", "--dataset", "cifar10"], "does not fit mnist_mlp"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(args: list[str], expected: str, keras_home: Path, tmp_path: Path) -> None:
    result = run_benchmarks([*args, "--out", str(tmp_path)], keras_home, timeout=300)
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and expected in errors[0]
    assert not list(tmp_path.rglob("*.csv"))


def test_missing_real_file_without_fallback_exits_3(keras_home: Path, tmp_path: Path) -> None:
    args = ["run", "--workload", "mnist_mlp", "--backend", "jax", "--out", str(tmp_path), "--offline"]
    result = run_benchmarks(args, keras_home, timeout=300)
    assert result.returncode == 3
    assert "error: mnist.npz: not found offline" in result.stderr
    assert not list(tmp_path.rglob("*.csv"))


def test_list_names_every_workload_and_suite(keras_home: Path) -> None:
    result = run_benchmarks(["list"], keras_home, timeout=120)
    assert result.returncode == 0
    assert "twitter_sentiment_bilstm" in result.stdout and "benchmark-gpus-2017-11" in result.stdout


def test_suite_runs_only_installed_backends_and_says_which_are_missing(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.cli import _installed

    assert _installed(["jax", "no_such_framework"]) == ["jax"]
    assert capsys.readouterr().out == "note: no_such_framework is not installed; the suite runs without it\n"


def test_suite_with_repeats_prints_medians_with_intervals_and_stability(keras_home: Path, tmp_path: Path) -> None:
    """Three repeats of one small item, each a fresh process: files per repeat, a pooled row with its interval."""
    args = ["suite", "--suite", "quick", "--backends", "jax", "--workloads", "mnist_mlp", "--repeats", "3"]
    args += ["--epochs", "4", "--train-limit", "256", "--val-limit", "128", "--out", str(tmp_path), "--run-id", "rep"]
    result = run_benchmarks([*args, "--prefer-dataset", "fashion_mnist"], keras_home, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    run_dir = tmp_path / "local" / "rep"
    assert sorted(p.name for p in run_dir.glob("*.csv")) == [f"mnist_mlp_jax.r0{i}.csv" for i in (1, 2, 3)]
    assert result.stdout.count("--- repeat ") == 3
    [row] = [line for line in result.stdout.splitlines() if re.match(r"mnist_mlp\s+jax\s", line)]
    assert "(75% order-statistic, n=3)" in row and ("stable" in row or "unstable" in row)
    meta = json.loads((run_dir / "mnist_mlp_jax.r02.json").read_text())
    assert meta["repeat"] == {"group": "rep", "index": 2, "planned": 3, "target_ci_pct": None}
    assert meta["stability"]["label"] in ("stable", "unstable") and meta["fingerprint"]["host_single_thread_score"] > 0
    assert json.loads((run_dir / "repeats.json").read_text())["items"][0]["repeats"] == 3


@pytest.mark.parametrize(
    ("executable", "cwd", "printed"),
    [
        ("{tmp}/proj/.venv/bin/python", "{tmp}/proj", ".venv/bin/python"),  # `make bench` in the project
        ("{tmp}/proj/python", "{tmp}/proj", "./python"),  # a bare `python` would be looked up in PATH
        ("{tmp}/proj/.venv/bin/python", "{tmp}/elsewhere", "{tmp}/proj/.venv/bin/python"),
    ],
)
def test_the_report_command_names_the_interpreter_that_ran_the_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], executable: str, cwd: str,
    printed: str,
) -> None:  # fmt: skip
    from benchmarks import cli

    (tmp_path / "proj").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.setattr(cli.sys, "executable", executable.format(tmp=tmp_path))
    monkeypatch.chdir(cwd.format(tmp=tmp_path))
    cli._print_next_steps(Path("logs/local/r1"))
    report = capsys.readouterr().out.splitlines()[-1]
    assert report.startswith(f"report: {printed.format(tmp=tmp_path)} -m report logs/local --out report-out  (or ")
